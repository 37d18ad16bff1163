"""The servers a command starts, tied to it: they end when it ends, however it ends, and a later command knows its own.

:func:`guarded` starts a server under the guard (:mod:`pipeline.team.guard`, a process of its own): killed by SIGKILL,
the command takes its servers with it. :func:`watch_over` is a guard with no server, which runs a command (``pg_ctl
stop``) if the command dies while it holds it.

Every process started this way carries :data:`OWNER_ENV` in its environment: the process id and start time of the
command that started it (:func:`owner_mark`). A server whose guard was killed too (or one left by an older version)
is then recognised by a later command: :func:`leftover_on_port` finds what listens on a port (Linux: /proc) and
whether it is a server of ours whose command is gone, and how to end it. Elsewhere nothing is recognised, and a busy
port is just busy.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.common.names import SERVER_OWNER_ENV as OWNER_ENV
from pipeline.team.guard import RELEASE, end_group, group_members

GUARD = Path(__file__).with_name("guard.py")
LISTEN = "0A"  # /proc/net/tcp's state of a listening socket


def start_ticks(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot, /proc/PID/stat): with the pid, a process's identity
    (a pid is reused, not with the same start time). None where there is no such process, or no /proc."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as stat:
            return stat.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def owner_mark(pid: int | None = None) -> str:
    """``PID:START``: this process (or ``pid``), as the servers it starts carry it in :data:`OWNER_ENV`."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}:{start_ticks(pid) or '?'}"


def is_alive(mark: str) -> bool:
    """Whether the process a mark names still runs (the same process: same pid and start time)."""
    pid, _, ticks = mark.partition(":")
    if not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return ticks == "?" or start_ticks(int(pid)) in (ticks, None)


def mark_of(pid: int) -> str | None:
    """The owner's mark in process ``pid``'s environment, if it carries one (and this user may read it)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as environ:
            variables = environ.read().split(b"\0")
    except OSError:
        return None
    prefix = OWNER_ENV.encode() + b"="
    return next((v[len(prefix):].decode() for v in variables if v.startswith(prefix)), None)


def guarded(command: Sequence[str], env: dict[str, str] | None = None, grace: float = 20.0,
            **popen: Any) -> subprocess.Popen:
    """Start ``command`` under a guard, the leader of a new process group holding the server's processes; the
    guard's Popen (its pid is the group's id). Keep it: its ``stdin`` is the pipe whose end tells the guard that this
    process is gone. Stop the server with SIGTERM to the group (:func:`stop_group`)."""
    environment = {**(os.environ if env is None else env), OWNER_ENV: owner_mark()}
    return subprocess.Popen([sys.executable, str(GUARD), "--grace", str(grace), "--", *command], env=environment,
                            stdin=subprocess.PIPE, start_new_session=True, **popen)


def watch_over(then: Sequence[str], grace: float = 20.0) -> subprocess.Popen:
    """A guard with no server: it runs ``then`` if this process dies before :func:`release` is called."""
    return subprocess.Popen([sys.executable, str(GUARD), "--grace", str(grace), "--then", json.dumps(list(then))],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, start_new_session=True)


def release(guard: subprocess.Popen) -> None:
    """Tell a guard its work is done (the server stopped cleanly): it leaves without doing anything."""
    with contextlib.suppress(OSError, ValueError):
        guard.stdin.write(RELEASE + b"\n")
        guard.stdin.close()
    with contextlib.suppress(subprocess.TimeoutExpired):
        guard.wait(timeout=10)


def stop_group(process: subprocess.Popen, grace: float = 20.0) -> None:
    """SIGTERM the group ``process`` leads (a guarded server: every process of it), SIGKILL what is left after
    ``grace``; the guard's pipe is closed afterwards."""
    try:
        if process.poll() is None:
            for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
                try:
                    os.killpg(process.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    process.wait(timeout=wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
    finally:
        if process.stdin is not None:
            with contextlib.suppress(OSError):
                process.stdin.close()


def listeners(port: int) -> list[int]:
    """The processes listening on TCP ``port`` (any address) that this user may inspect (Linux: /proc)."""
    sockets = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table, encoding="ascii") as rows:
            for row in list(rows)[1:]:
                fields = row.split()
                if len(fields) > 9 and fields[3] == LISTEN and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    sockets.add(f"socket:[{fields[9]}]")
    found = []
    if not sockets:
        return found
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError):
                for fd in os.scandir(f"/proc/{entry.name}/fd"):
                    with contextlib.suppress(OSError):
                        if os.readlink(fd.path) in sockets:
                            found.append(int(entry.name))
                            break
    return found


@dataclass(frozen=True)
class Leftover:
    """A server of ours whose command is gone: what it is, who started it, and how to end it."""

    what: str  # 'an MLflow server'
    where: str  # 'port 5000 on 127.0.0.1'
    owner: str  # the command's mark (PID:START)
    processes: int
    end: Callable[[], None]
    group: int | None = None  # its process group, which `kill -- -GROUP` ends

    def describe(self) -> str:
        """'an MLflow server (13 processes) that an earlier rankscope command (pid 4242, no longer running) left
        running on port 5000 on 127.0.0.1'"""
        count = f"{self.processes} process{'es' if self.processes != 1 else ''}"
        return (f"{self.what} ({count}) that an earlier rankscope command (pid {self.owner.partition(':')[0]}, no "
                f"longer running) left running on {self.where}")


@dataclass(frozen=True)
class Holder:
    """What listens on a port, as far as this user can tell: a server of ours (with its command's mark) or not."""

    pids: tuple[int, ...]
    owner: str | None  # the mark of the rankscope command that started it; None: not ours, or not known
    group: int | None

    @property
    def ours(self) -> bool:
        return self.owner is not None

    @property
    def owner_alive(self) -> bool:
        return self.owner is not None and is_alive(self.owner)

    @property
    def guard_alive(self) -> bool:
        """Whether the server's guard still runs: the leader of a marked server's group is its guard (:func:`guarded`
        made it so), and a guard whose command is gone is ending the server itself."""
        return self.group is not None and self.group in group_members(self.group)


def holder_of(port: int) -> Holder | None:
    """Who listens on ``port``; None when nothing is found (or this system has no /proc)."""
    pids = listeners(port)
    if not pids:
        return None
    owner = next(filter(None, map(mark_of, pids)), None)
    group = None
    with contextlib.suppress(OSError):
        group = os.getpgid(pids[0])
    return Holder(tuple(pids), owner, group if owner is not None else None)


def leftover_on_port(host: str, port: int, what: str, wait: float = 30.0) -> Leftover | Holder | None:
    """What holds ``port``: a :class:`Leftover` (ours, its command gone: it can be ended), a :class:`Holder` (a
    running command's server, or another program's), or None (nothing found). A server whose command is gone but
    whose guard still runs is being ended by that guard: waited for (None once it is gone), up to ``wait`` seconds."""
    holder = holder_of(port)
    deadline = time.monotonic() + wait
    while holder is not None and holder.ours and not holder.owner_alive and holder.guard_alive \
            and time.monotonic() < deadline:
        time.sleep(0.2)
        holder = holder_of(port)
    if holder is None or not holder.ours or holder.owner_alive or holder.group is None:
        return holder
    group = holder.group
    return Leftover(what=what, where=f"port {port} on {host}", owner=holder.owner or "",
                    processes=len(group_members(group)), end=lambda: end_group(group, grace=20.0), group=group)
