"""``python -m pipeline.ui``: the MLflow UI on a local store, at http://127.0.0.1:5000 until Ctrl-C.

``make ui`` runs it on ./mlflow.db. It serves what ``mlflow ui --backend-store-uri URI`` serves, from one process
(:mod:`pipeline.tracking.ui`), so the page answers in about half the time.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

SAYS = "python -m pipeline.ui"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=SAYS, description=__doc__.split("\n\n")[0])
    p.add_argument("--backend-store-uri", help="the store (default: sqlite:///<cwd>/mlflow.db, the one "
                   "`python -m pipeline` logs to)")
    p.add_argument("--port", type=int, default=5000, help="port on 127.0.0.1 (default: 5000)")
    args = p.parse_args(argv)
    from metrics.errors import InputError  # the work's imports come after the arguments are read
    from pipeline.common import interrupts
    from pipeline.common.names import LOOPBACK
    from pipeline.common.redact import redact_text
    from pipeline.team.tracking_server import ServerError, check_port_free
    from pipeline.tracking.store import tracking_uri
    from pipeline.tracking.ui import serve_ui

    interrupts.install()
    try:
        uri = tracking_uri(args.backend_store_uri, Path.cwd())
        if uri.startswith(("http://", "https://")):
            raise InputError(f"{redact_text(uri)} is a tracking server: it serves its own UI; open it in a browser")
        check_port_free(LOOPBACK, args.port)
        print(f"MLflow UI on http://{LOOPBACK}:{args.port} (store {redact_text(uri)}); stop with Ctrl-C",
              flush=True)
        serve_ui(uri, args.port)
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
