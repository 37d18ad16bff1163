"""The tracking store opened, and runs logged, by a second process while the command computes.

Opening MLflow's SQLAlchemy store costs a single run about 2 s (SQLAlchemy, MLflow's ORM models, the connection and
its schema check) before it can log anything. So ``python -m pipeline``, for one run on a machine with two cores or
more, forks a :class:`StoreProcess` once it has imported MLflow's client and before it imports Hydra: the copy shares
that import (forked earlier, it imported MLflow again, 1.2-1.3 s of CPU that a machine whose cores are busy paid in
full), imports the store while the job imports and composes its config, opens the store the config names, and logs
the job's record when the job has saved it.

Nothing depends on the copy. The job's results are saved before they are logged, as always; the copy logs them from
the job's folder with the same code the job would use (:func:`pipeline.tracking.records.publish`), so a store that does
not answer, a sync, a resume behave as before. If the copy is gone (killed, crashed), the job opens the store and
logs by itself. The copy ignores Ctrl-C, which the terminal sends to both processes: the job decides. A job stopped
while the copy works gives it :data:`STOP_GRACE_S` to answer (a store write is quick, and the copy, in step, then
closes the runs for the job), else sends it SIGTERM, which the copy's logging handles as the job's own would (each
store write whole, a half-logged run closed FAILED), and SIGKILL after :data:`KILL_AFTER_S`: a copy waiting out
MLflow's retries on a server that does not answer never keeps a stopped command from ending.

A sweep (``-m``) has the copy too. Its driver's store work (the parent run, reading the jobs back, the summary and
the gate) goes through a :class:`RemoteClient`: the driver never imports the SQLAlchemy store (about 1.9 s), which
the copy imported while the driver composed its configs. Each call is whole: a Ctrl-C during one acts once its
answer is back, and the copy, alive, then closes the sweep's runs FAILED for the driver. A job of the sweep hands its
saved record over without waiting (:meth:`StoreProcess.publish_later`); the answer is read before the next request,
or when the sweep ends. If the copy is gone, every call is made in-process instead. Only the process that forked the
copy talks to it: a process forked from that one (a plot drawer, a fork-based worker) opens the store itself.

When the store stops answering a sweep's requests, the copy says so at once, in one line (the driver reads the
answers only between jobs or at the end), and answers the next requests at once while the store stays down
(:func:`pipeline.tracking.store.still_not_answering`): the jobs go on, each saving its results in its folder.

This module imports nothing heavy: the copy imports the store after the fork.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import pickle
import signal
import sys
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection, Pipe
from pathlib import Path
from typing import Any

from pipeline.common import collector
from pipeline.common.forking import second_core, yield_to_the_command
from pipeline.common.names import PROG

_CURRENT: StoreProcess | None = None
STOP_GRACE_S = 2.0  # once the command is stopped: how long it waits for the copy's answers
KILL_AFTER_S = 4.0  # then: how long the copy has to end after SIGTERM (closing a half-logged run), before SIGKILL


class Gone(Exception):
    """The store process is not there any more (or failed unexpectedly): the job does the work itself."""


def current() -> StoreProcess | None:
    """The store process this command started, if any."""
    return _CURRENT


def settle() -> None:
    """Read every answer still owed by the store process (logged runs, or why not), if there is one."""
    if _CURRENT is not None:
        _CURRENT.settle()


def hurry() -> None:
    """The command has been stopped: from now on it waits at most :data:`STOP_GRACE_S` for each of the store
    process's answers, then ends it (see :meth:`StoreProcess.hurry`)."""
    if _CURRENT is not None:
        _CURRENT.hurry()


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
    atexit.register(_CURRENT.close)
    return _CURRENT


class StoreProcess:
    """The job's side of the store process: requests and their answers, one at a time."""

    def __init__(self, pid: int, connection: Connection) -> None:
        self.pid = pid
        self.connection: Connection | None = connection
        self.owner = os.getpid()  # a process forked from this one inherits the pipe, and must leave it alone
        self.uris: set[str] = set()  # the stores the copy has opened
        self.unanswered: list[Callable[[tuple[Any, ...]], None]] = []  # handlers of requests sent without waiting
        self.opening: dict[tuple[str, str], tuple[Any, ...]] = {}  # answers to :meth:`open_later`, not taken yet
        self.hurried = False  # the command is stopped: each answer is waited for STOP_GRACE_S at most

    def usable(self) -> bool:
        """Whether this process may talk to the copy: it runs, and this is the process that started it."""
        return self.connection is not None and os.getpid() == self.owner

    def serves(self, uri: str) -> bool:
        """Whether calls on the store at ``uri`` can go to the copy: it is usable and opened that store."""
        return self.usable() and uri in self.uris

    def open_later(self, uri: str, experiment: str) -> None:
        """Ask the copy to open (and if new, create) the store and experiment without waiting: :meth:`open` takes
        its answer. A sweep's driver reads its first corpus meanwhile (the copy's SQLAlchemy engine, schema check
        and experiment lookup: about 85 ms). :class:`Gone` when the process is not there."""
        from pipeline.common.interrupts import deferred

        if not self.usable():
            raise Gone("not running")
        with deferred():
            self._send(("open", uri, experiment))
        self.unanswered.append(lambda answer: self.opening.__setitem__((uri, experiment), answer))

    def open(self, uri: str, experiment: str) -> str:
        """Open (and if new, create) the store and experiment: the experiment's id. InputError as
        :meth:`pipeline.tracking.store.Store.open` raises it; :class:`Gone` when the process is not there."""
        self.settle()  # an answer to open_later comes first
        answer = self.opening.pop((uri, experiment), None) or self._ask("open", uri, experiment)
        if answer[0] == "gone":
            raise Gone(answer[1])
        if answer[0] == "refused":
            from metrics.errors import InputError

            raise InputError(answer[1])
        self.uris.add(uri)
        return str(answer[1])

    def call(self, uri: str, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """``MlflowClient(uri).<method>(*args, **kwargs)``, made by the copy: its value, or the exception it
        raised (MLflow's own; any other as an ``MlflowException`` naming it). A Ctrl-C or SIGTERM meanwhile acts
        at once (:meth:`_answer`). :class:`Gone` when the process is not there."""
        if not self.serves(uri):
            raise Gone("not serving this store")
        answer = self._ask("call", uri, method, args, kwargs)
        if answer[0] == "raised":
            raise answer[1]
        return answer[1]

    def run_later(self, uri: str, function: Callable[..., Any], args: tuple[Any, ...],
                  answered: Callable[[tuple[Any, ...]], None]) -> None:
        """Ask the copy to call ``function(client, *args)`` with its client of the store at ``uri``, without waiting:
        ``answered`` gets ``("returned", value)``, ``("raised", exception)`` or ``("gone", reason)`` when the next
        request, or :meth:`settle`, reads it. ``function`` is pickled by name (a module-level function).
        :class:`Gone` when the process does not serve that store."""
        from pipeline.common.interrupts import deferred

        if not self.serves(uri):
            raise Gone("not serving this store")
        with deferred():
            self._send(("run", uri, function, args))
        self.unanswered.append(answered)

    def publish(self, folder: Path) -> Any:
        """Log the record saved in ``folder`` (:func:`pipeline.tracking.records.publish`): a ``Published``.
        Raises ``StoreUnavailable`` when the store does not answer, :class:`Gone` when the process is not there."""
        answer = self._ask("publish", str(folder))
        from pipeline.tracking.records import Published
        from pipeline.tracking.store import StoreUnavailable

        if answer[0] == "unavailable":
            raise StoreUnavailable(answer[1])
        return Published(str(answer[1]), bool(answer[2]))

    def publish_later(self, folder: Path, answered: Callable[[tuple[Any, ...]], None]) -> None:
        """Ask the copy to log the record saved in ``folder``, without waiting: ``answered`` gets the answer
        (``("published", run_id, reused)``, ``("unavailable", reason)``, or ``("gone", reason)`` if the copy failed)
        when the next request, or :meth:`settle`, reads it. :class:`Gone` when the process is not there."""
        from pipeline.common.interrupts import deferred

        if not self.usable():
            raise Gone("not running")
        with deferred():
            self._send(("publish", str(folder)))
        self.unanswered.append(answered)

    def settle(self, waiting: bool = True) -> None:
        """Read the answers to the requests sent without waiting, in order, each handed to its handler; with
        ``waiting=False`` only those that have come already (a caller sharing work with the copy hands it more as it
        answers)."""
        while self.unanswered and os.getpid() == self.owner:
            if not waiting and (self.connection is None or not self.connection.poll(0)):
                return
            answered = self.unanswered.pop(0)
            try:
                answer = self._answer()
            except Gone as exc:
                answer = ("gone", str(exc))
            answered(answer)

    def _ask(self, *request: Any) -> tuple[Any, ...]:
        from pipeline.common.interrupts import deferred

        self.settle()  # the answers to earlier requests come first
        with deferred():  # a request is sent whole
            self._send(request)
        return self._answer()

    def _send(self, request: tuple[Any, ...]) -> None:
        if self.connection is None:
            raise Gone("not running")
        try:
            self.connection.send(request)
        except OSError as exc:
            self.stop()
            raise Gone(f"{type(exc).__name__}: {exc}") from None

    def _answer(self) -> tuple[Any, ...]:
        """The copy's next answer. A Ctrl-C or SIGTERM while waiting for it acts at once (:meth:`_stopped`); once
        the command is stopped, an answer that does not come within :data:`STOP_GRACE_S` ends the copy
        (:meth:`hurry`), and :class:`Gone` is raised."""
        from pipeline.common.interrupts import deferred

        if self.connection is None:
            raise Gone("not running")
        answer: tuple[Any, ...] | None = None
        try:
            if not self.connection.poll(self._patience()):  # a stop interrupts this wait, between two answers
                self.stop(wait=True)
                raise Gone("no answer before the stopped command ends")
            with deferred():  # an answer is read whole
                answer = self.connection.recv()
        except (OSError, EOFError) as exc:
            self.stop()
            raise Gone(f"{type(exc).__name__}: {exc}") from None
        except KeyboardInterrupt:
            if answer is None:
                self._stopped()
            raise
        if answer[0] == "crashed":
            self.stop()
            raise Gone(answer[1])
        return answer

    def hurry(self) -> None:
        """The command has been stopped: from now on each answer is waited for :data:`STOP_GRACE_S` at most; the
        copy that does not answer in time (perhaps waiting out MLflow's retries on a store that does not answer)
        is ended (:meth:`stop`), and the command does the rest itself, trying the store once per request."""
        self.hurried = True

    def _patience(self) -> float | None:
        return STOP_GRACE_S if self.hurried else None

    def _stopped(self) -> None:
        """Stopped while the copy works on a request: it has :data:`STOP_GRACE_S` to answer (then it is in step, and
        closes the runs for the command), else it is ended."""
        from pipeline.common.interrupts import deferred

        self.hurry()
        with deferred():  # a second stop acts once this is settled
            try:
                if self.connection is not None and self.connection.poll(self._patience()):
                    self.connection.recv()  # the answer to the request stopped: dropped, the copy is in step
                    return
            except (OSError, EOFError):
                pass
            self.stop(wait=True)

    def close(self) -> None:
        """At exit: the answers still owed are read (the runs they log are whole), then the process ends."""
        with contextlib.suppress(Exception):
            self.settle()
        self.stop()

    def stop(self, wait: bool = False) -> None:
        """End the process (SIGTERM: a store write in progress is finished first); ``wait`` for it to end, SIGKILL
        after :data:`KILL_AFTER_S` (it may be closing a half-logged run on a store that does not answer)."""
        from pipeline.common.interrupts import deferred

        if self.connection is None:
            return
        self.connection.close()
        self.connection = None
        try:
            os.kill(self.pid, signal.SIGTERM)
            if not wait:
                return
            with deferred():  # a stop while it ends acts once it has ended
                deadline = time.monotonic() + KILL_AFTER_S
                while os.waitpid(self.pid, os.WNOHANG)[0] == 0:
                    if time.monotonic() > deadline:
                        os.kill(self.pid, signal.SIGKILL)
                        os.waitpid(self.pid, 0)
                        break
                    time.sleep(0.01)
        except OSError:  # already ended
            pass


def _serve(connection: Connection) -> None:
    """The copy: import the store, then answer the job's requests until it closes the connection. Never returns."""
    status = 0
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # SIGTERM keeps the job's handler: it raises Terminated
        from pipeline.common.redact import redact_std_streams, redact_text

        redact_std_streams()  # MLflow's warnings pass the secret redaction, as the job's own output does
        from pipeline.tracking.records import JobRecord, publish
        from pipeline.tracking.store import Store, StoreUnavailable, not_answering

        with contextlib.suppress(ImportError):  # what opening a SQLite store imports: paid while the job composes
            import mlflow.store.tracking.sqlalchemy_store  # noqa: F401
        collector.resume()  # MLflow's objects, frozen (pipeline.common.collector)
        yield_to_the_command()  # once its imports are done (pipeline.common.forking)
        from metrics.errors import InputError

        store: Store | None = None
        stores: dict[str, Store] = {}
        told: set[str] = set()  # stores said not to answer (until they answer again)
        while True:
            try:
                request = connection.recv()
            except EOFError:
                break
            uri = store.uri if request[0] == "publish" and store is not None else request[1]
            of_a_sweep = request[0] in ("call", "run")  # the driver's calls; a job's record says below
            try:
                if request[0] == "open":
                    store = stores[request[1]] = Store.open(request[1], request[2])
                    answer: tuple[Any, ...] = ("opened", store.experiment_id)
                elif request[0] == "call" and request[1] in stores:
                    answer = _called(stores[request[1]].client, *request[2:])
                elif request[0] == "run" and request[1] in stores:
                    answer = _ran(stores[request[1]].client, *request[2:])
                elif request[0] == "publish" and store is not None:
                    folder = Path(request[1])
                    record = JobRecord.load(folder)
                    if record is None:
                        raise FileNotFoundError(f"no record in {folder}")
                    of_a_sweep = record.parent_run_id is not None
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
            reason = not_answering(uri) if isinstance(uri, str) else None
            if reason is None:
                told.discard(str(uri))
            elif uri not in told and of_a_sweep:  # a single run says it itself, waiting for this answer
                told.add(uri)
                print(f"{PROG}: the tracking store {redact_text(uri)} does not answer ({reason}): the sweep goes on, "
                      f"each job saving its results in its folder, and ends with the command that logs them",
                      file=sys.stderr, flush=True)
            connection.send_bytes(_pickled(answer))
    except BaseException:  # SIGTERM from the job (Terminated), a closed pipe
        status = 1
    finally:
        os._exit(status)


def _called(client: Any, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """A client call's answer: ``("returned", value)`` or ``("raised", exception)``."""
    return _ran(client, lambda c, *a: getattr(c, method)(*a, **kwargs), args)


def _ran(client: Any, function: Callable[..., Any], args: tuple[Any, ...]) -> tuple[Any, ...]:
    """``function(client, *args)``'s answer: ``("returned", value)`` or ``("raised", exception)``: raised at once,
    without a try, while the store still does not answer (:func:`pipeline.tracking.store.still_not_answering`)."""
    from pipeline.tracking.store import (
        NotAnswering,
        did_not_answer,
        still_not_answering,
        stopped_answering,
        store_error,
    )

    uri = str(client.tracking_uri)
    reason = still_not_answering(uri)
    if reason is not None:
        return ("raised", NotAnswering(reason))
    try:
        return ("returned", function(client, *args))
    except Exception as exc:
        if did_not_answer(exc):
            stopped_answering(uri, store_error(exc))
        return ("raised", exc)


def _pickled(answer: tuple[Any, ...]) -> bytes:
    """The answer as it crosses the pipe: a value or exception that does not pickle (a database driver's error
    holding its connection) becomes an ``MlflowException`` that names it, which callers treat as a store error."""
    try:
        data = pickle.dumps(answer)
        if answer[0] == "raised":
            pickle.loads(data)  # an exception whose arguments do not rebuild it would fail on the other side
        return data
    except Exception:
        from pipeline.tracking.client import MlflowException

        what = answer[1]
        reason = f"{type(what).__name__}: {what}" if answer[0] == "raised" else f"an unpicklable {answer[0]} answer"
        return pickle.dumps(("raised", MlflowException(reason)))


class RemoteClient:
    """An ``MlflowClient`` of the store at ``uri`` whose calls the store process makes; once the process is gone,
    the calls are made by a client in this process."""

    def __init__(self, process: StoreProcess, uri: str) -> None:
        self.process, self.uri = process, uri
        self._local: Any = None
        self._failed: Exception | None = None  # what a run_later call raised, for wait_later

    @property
    def tracking_uri(self) -> str:
        return self.uri

    def run_later(self, function: Callable[..., Any], *args: Any) -> None:
        """``function(client, *args)``, made by the store process while this one goes on; :meth:`wait_later` raises
        what it raised. If the process is gone before it answers, the call is made in this process then."""
        if self._local is None:
            try:
                self.process.run_later(self.uri, function, args, functools.partial(self._ran, function, args))
                return
            except Gone:
                self._go_local()
        function(self._local, *args)

    def wait_later(self) -> None:
        """Until every :meth:`run_later` call has been made; the first exception one raised is raised here."""
        self.process.settle()
        failed, self._failed = self._failed, None
        if failed is not None:
            raise failed

    def _ran(self, function: Callable[..., Any], args: tuple[Any, ...], answer: tuple[Any, ...]) -> None:
        try:
            if answer[0] == "raised":
                raise answer[1]
            if answer[0] == "gone":
                self._go_local()
                function(self._local, *args)
        except Exception as exc:  # kept for wait_later: other calls answer as usual meanwhile
            self._failed = self._failed or exc

    def _go_local(self) -> None:
        from pipeline.tracking.store import client_for

        if self._local is None:
            self._local = client_for(self.uri)

    def __getattr__(self, method: str) -> Any:
        if method.startswith("_"):
            raise AttributeError(method)

        def call(*args: Any, **kwargs: Any) -> Any:
            if self._local is None:
                try:
                    return self.process.call(self.uri, method, args, kwargs)
                except Gone:
                    self._go_local()
            return getattr(self._local, method)(*args, **kwargs)

        call.__name__ = method
        return call
