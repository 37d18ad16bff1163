"""The guard of a server a command starts: it ends the server when the command dies without ending it.

A SIGKILL, the OOM killer or a crash ends a command without its clean-up, and whatever it started in a session of its
own lives on: ``python -m pipeline.server`` killed that way left its MLflow server (uvicorn, its workers, MLflow's job
runner and its consumers: 13 processes) serving the port. So the command starts the server through this guard
(:func:`pipeline.team.processes.guarded`), the leader of a new session and process group, which

- starts ``COMMAND`` (if given) in its own group, so that one signal to the group reaches every process of the server,
  whatever processes the server starts in turn;
- reads its stdin, a pipe whose other end only the command holds: the kernel closes it when the command ends, however
  it ends. End of file without a ``release`` line first means the command is gone: the guard sends SIGTERM to its
  group, gives it ``--grace`` seconds, sends SIGKILL to what is left, runs ``--then`` (a JSON list: a command, e.g.
  ``pg_ctl stop``, for what lives outside the group) and leaves;
- when ``COMMAND`` ends on its own (the command stopped it: SIGTERM to the group, which the guard itself ignores), ends
  what is left of the group the same way and exits with ``COMMAND``'s status.

Run as a file (``python guard.py``), not as a module: it needs only the standard library and no package on the path.
On Linux it also asks for SIGTERM when its parent dies (``PR_SET_PDEATHSIG``), in case the pipe was handed on.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time

RELEASE = b"release"
PR_SET_PDEATHSIG = 1


def group_members(group: int) -> list[int]:
    """The live processes of process group ``group`` (Linux: read from /proc; elsewhere unknown, empty)."""
    found = []
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/stat", encoding="utf-8", errors="replace") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
            except OSError:  # ended meanwhile
                continue
            if fields[0] not in ("Z", "X") and int(fields[2]) == group:
                found.append(int(entry.name))
    return found


def end_group(group: int, grace: float, spare: int | None = None) -> None:
    """SIGTERM to every process of ``group``; after ``grace`` seconds, SIGKILL to each one left (but ``spare``)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and [p for p in group_members(group) if p != spare]:
        time.sleep(0.1)
    for pid in group_members(group):
        if pid != spare:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def _ask_for_parent_death_signal() -> None:
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="guard.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--grace", type=float, default=20.0, help="seconds between SIGTERM and SIGKILL")
    parser.add_argument("--then", default="[]", help="a command (JSON list) to run once the command is gone")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ARGS: the server to start and guard")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    then = json.loads(args.then)
    group, parent = os.getpgrp(), os.getppid()
    # the server first, with the signal dispositions the guard was given (it would inherit an ignored SIGINT)
    child = subprocess.Popen(command, stdin=subprocess.DEVNULL) if command else None
    orphaned = threading.Event()
    # SIGTERM: the command stopping the server (to the whole group: the server ends, then the guard), or the parent-
    # death signal, which a thread of the command ending also sends: only a new parent means the command is gone
    signal.signal(signal.SIGTERM, lambda signum, frame: orphaned.set() if os.getppid() != parent else None)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _ask_for_parent_death_signal()
    released = threading.Event()

    def watch() -> None:  # raw reads: a buffered stdin's lock, held by this thread, would abort the exit
        said = b""
        while chunk := os.read(0, 4096):
            said += chunk
            if RELEASE in said.split():
                released.set()
                return
        orphaned.set()

    threading.Thread(target=watch, daemon=True).start()
    while not orphaned.wait(0.1):
        if child is not None and child.poll() is not None:  # stopped by the command: what is left goes too
            end_group(group, args.grace, spare=os.getpid())
            return child.returncode if child.returncode >= 0 else 128 - child.returncode
        if released.is_set() and child is None:
            return 0
    if released.is_set():
        return 0
    end_group(group, args.grace, spare=os.getpid())
    if then:
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            subprocess.run(then, cwd="/", stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=120)
    return 0


if __name__ == "__main__":
    status = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)  # the watching thread may still be reading: nothing to tear down
