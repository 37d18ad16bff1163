"""The tracking store opened, and a single run logged, by a second process while the job computes.

Opening MLflow's SQLAlchemy store costs a single run about 2 s (SQLAlchemy, MLflow's ORM models, the connection and
its schema check) before it can log anything. So ``python -m pipeline``, for one run on a machine with two cores or
more, forks a :class:`StoreProcess` before it imports Hydra: the copy imports the store while the job imports and
composes its config, opens the store the config names, and logs the job's record when the job has saved it.

Nothing depends on the copy. The job's results are saved before they are logged, as always; the copy logs them from
the job's folder with the same code the job would use (:func:`pipeline.tracking.records.publish`), so a store that does
not answer, a sync, a resume behave as before. If the copy is gone (killed, crashed), the job opens the store and
logs by itself. The copy ignores Ctrl-C, which the terminal sends to both processes: the job decides. A job stopped
while the copy logs sends it SIGTERM, which the copy's logging handles as the job's own would (each store write
whole, a half-logged run closed FAILED), and waits for it to end.

This module imports nothing heavy: the copy imports MLflow after the fork.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import traceback
from multiprocessing.connection import Connection, Pipe
from pathlib import Path
from typing import Any

from pipeline.common.forking import second_core

_CURRENT: StoreProcess | None = None


class Gone(Exception):
    """The store process is not there any more (or failed unexpectedly): the job does the work itself."""


def current() -> StoreProcess | None:
    """The store process this command started, if any."""
    return _CURRENT


def discard() -> None:
    """A sweep after all (``hydra.mode=MULTIRUN`` in a config): its driver and jobs log themselves, so the store
    process, which would only compete with them for the second core, ends now."""
    if _CURRENT is not None:
        _CURRENT.stop()


def start() -> StoreProcess | None:
    """Fork the store process (once), where it can help: ``os.fork`` exists and a second core is free to run it
    (on one core it would only add its imports to the job's). Set ``RANKSCOPE_STORE_PROCESS=0`` to log in-process."""
    global _CURRENT
    if _CURRENT is not None or not second_core() or os.environ.get("RANKSCOPE_STORE_PROCESS", "1") == "0":
        return _CURRENT
    ours, theirs = Pipe()
    pid = os.fork()
    if pid == 0:  # the copy
        ours.close()
        _serve(theirs)
    theirs.close()
    _CURRENT = StoreProcess(pid, ours)
    atexit.register(_CURRENT.stop)
    return _CURRENT


class StoreProcess:
    """The job's side of the store process: requests and their answers, one at a time."""

    def __init__(self, pid: int, connection: Connection) -> None:
        self.pid = pid
        self.connection: Connection | None = connection

    def open(self, uri: str, experiment: str) -> str:
        """Open (and if new, create) the store and experiment: the experiment's id. InputError as
        :meth:`pipeline.tracking.store.Store.open` raises it; :class:`Gone` when the process is not there."""
        answer = self._ask("open", uri, experiment)
        if answer[0] == "refused":
            from metrics.errors import InputError

            raise InputError(answer[1])
        return str(answer[1])

    def publish(self, folder: Path) -> Any:
        """Log the record saved in ``folder`` (:func:`pipeline.tracking.records.publish`): a ``Published``.
        Raises ``StoreUnavailable`` when the store does not answer, :class:`Gone` when the process is not there."""
        answer = self._ask("publish", str(folder))
        from pipeline.tracking.records import Published
        from pipeline.tracking.store import StoreUnavailable

        if answer[0] == "unavailable":
            raise StoreUnavailable(answer[1])
        return Published(str(answer[1]), bool(answer[2]))

    def _ask(self, *request: Any) -> tuple[Any, ...]:
        if self.connection is None:
            raise Gone("not running")
        try:
            self.connection.send(request)
            answer = self.connection.recv()
        except (OSError, EOFError) as exc:
            self.stop()
            raise Gone(f"{type(exc).__name__}: {exc}") from None
        except KeyboardInterrupt:  # stopped while the copy works: it finishes its store write, then ends
            self.stop(wait=True)
            raise
        if answer[0] == "crashed":
            self.stop()
            raise Gone(answer[1])
        return answer

    def stop(self, wait: bool = False) -> None:
        """End the process (SIGTERM: a store write in progress is finished first); ``wait`` for it to end."""
        if self.connection is None:
            return
        self.connection.close()
        self.connection = None
        try:
            os.kill(self.pid, signal.SIGTERM)
            if wait:
                os.waitpid(self.pid, 0)
        except OSError:  # already ended
            pass


def _serve(connection: Connection) -> None:
    """The copy: import the store, then answer the job's requests until it closes the connection. Never returns."""
    status = 0
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # SIGTERM keeps the job's handler: it raises Terminated
        from pipeline.common.redact import redact_std_streams

        redact_std_streams()  # MLflow's warnings pass the secret redaction, as the job's own output does
        from pipeline.tracking.records import JobRecord, publish
        from pipeline.tracking.store import Store, StoreUnavailable

        with contextlib.suppress(ImportError):  # what opening a SQLite store imports: paid while the job composes
            import mlflow.store.tracking.sqlalchemy_store  # noqa: F401
        from metrics.errors import InputError

        store: Store | None = None
        while True:
            try:
                request = connection.recv()
            except EOFError:
                break
            try:
                if request[0] == "open":
                    store = Store.open(request[1], request[2])
                    answer: tuple[Any, ...] = ("opened", store.experiment_id)
                elif request[0] == "publish" and store is not None:
                    folder = Path(request[1])
                    record = JobRecord.load(folder)
                    if record is None:
                        raise FileNotFoundError(f"no record in {folder}")
                    published = publish(store.client, record, folder)
                    answer = ("published", published.run_id, published.reused)
                else:
                    answer = ("crashed", f"unexpected request {request[0]!r}")
            except InputError as exc:
                answer = ("refused", str(exc))
            except StoreUnavailable as exc:
                answer = ("unavailable", str(exc))
            except Exception:  # a bug: the job logs by itself (and would show the same failure)
                answer = ("crashed", traceback.format_exc())
            connection.send(answer)
    except BaseException:  # SIGTERM from the job (Terminated), a closed pipe
        status = 1
    finally:
        os._exit(status)
