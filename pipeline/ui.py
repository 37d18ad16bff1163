"""``python -m pipeline.ui``: the MLflow UI on a local store, at http://127.0.0.1:5000 (``$RANKSCOPE_UI_PORT``, the
port the links rankscope prints name, else 5000) until Ctrl-C.

``make ui`` runs it on ./mlflow.db. It serves what ``mlflow ui --backend-store-uri URI`` serves, from one process
(:mod:`pipeline.tracking.ui`), so the page answers in about half the time. It prints, and on a desktop opens, the
address of the rankscope experiment's runs in the UI's runs mode, on its saved view of the last sweep: MLflow's home
page would open the experiment in its GenAI mode, on traces. A store that does not exist is refused, never created.
"""

from __future__ import annotations

import argparse
import socket
import sys
from collections.abc import Sequence
from pathlib import Path

SAYS = "python -m pipeline.ui"


def free_port(host: str) -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=SAYS, description=__doc__.split("\n\n")[0])
    p.add_argument("--backend-store-uri", help="the store (default: sqlite:///<cwd>/mlflow.db, the one "
                   "`python -m pipeline` logs to)")
    p.add_argument("--port", type=int, help="port on 127.0.0.1 (default: $RANKSCOPE_UI_PORT, which the links "
                   "rankscope prints use too, else 5000; 0: any free one)")
    p.add_argument("--experiment", default="rankscope", help="the experiment the printed address opens")
    p.add_argument("--no-browser", action="store_true", help="print the address, do not open a browser")
    args = p.parse_args(argv)
    from metrics.errors import InputError  # the work's imports come after the arguments are read
    from pipeline.common import interrupts
    from pipeline.common.names import LOOPBACK
    from pipeline.common.redact import redact_text
    from pipeline.team.tracking_server import ServerError, check_port_free
    from pipeline.tracking.links import ui_port
    from pipeline.tracking.store import tracking_uri
    from pipeline.tracking.ui import check_exists, first_page, serve_ui

    interrupts.install()
    try:
        uri = tracking_uri(args.backend_store_uri, Path.cwd())
        if uri.startswith(("http://", "https://")):
            raise InputError(f"{redact_text(uri)} is a tracking server: it serves its own UI; open it in a browser")
        port = ui_port() if args.port is None else args.port
        port = port or free_port(LOOPBACK)  # --port 0: any free one, known before the address is printed
        check_port_free(LOOPBACK, port)
        check_exists(uri)
        base = f"http://{LOOPBACK}:{port}"
        print(f"MLflow UI on {base} (store {redact_text(uri)}); stop with Ctrl-C", flush=True)
        page = first_page(uri, base, args.experiment)
        print(f"Open:  {redact_text(page)}", flush=True)
        serve_ui(uri, port, open_page=None if args.no_browser else page)
    except (InputError, ServerError) as exc:
        print(f"{SAYS}: {redact_text(str(exc))}".replace("\n", " "), file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # uvicorn stopped serving, then raised the signal again
        code, word = interrupts.status(exc)
        print(f"{SAYS}: stopped by {word}", file=sys.stderr, flush=True)
        return code
    return 0


if __name__ == "__main__":
    from pipeline.common import ending

    ending.run(main)
