"""Servers tied to the command that starts them: real processes, killed for real.

A guarded server's whole process tree ends when its command is SIGKILLed; a guard with nothing to guard runs its
clean-up command then, and nothing once released. A server of ours left running (its guard killed too) is told apart
from another program's and from a running command's, and ended only when the caller agrees.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pipeline.common.names import SERVER_OWNER_ENV
from pipeline.team.guard import group_members
from pipeline.team.postgres import free_port
from pipeline.team.processes import holder_of, listeners, owner_mark
from pipeline.team.tracking_server import ServerError, check_port_free, port_free

REPO = Path(__file__).resolve().parents[3]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}

pytestmark = pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux's /proc")

# A server that starts a worker in its own group (as uvicorn does), both listening on PORT: argv[1].
SERVER = textwrap.dedent(
    """
    import socket, subprocess, sys, time
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", int(sys.argv[1])))
    listener.listen()
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], pass_fds=[listener.fileno()])
    print("serving", flush=True)
    time.sleep(600)
    """
)


def wait_until(condition, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return condition()


def owner(code: str, tmp_path: Path) -> subprocess.Popen:
    """A command (a process of its own, as ``python -m pipeline.server`` is) running ``code``, which prints a line
    once its server runs."""
    process = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], cwd=tmp_path, env=ENV, text=True,
                               stdout=subprocess.PIPE, start_new_session=True)
    return process


def test_a_guarded_server_and_its_workers_end_when_its_command_is_killed(tmp_path):
    port = free_port()
    command = owner(f"""
        import sys, time
        from pipeline.team.processes import guarded
        server = guarded([sys.executable, "-c", {SERVER!r}, "{port}"], stdout=sys.stdout)
        print(server.pid, flush=True)
        time.sleep(600)
        """, tmp_path)
    try:
        group = int(command.stdout.readline())
        assert command.stdout.readline().strip() == "serving"
        served_by = listeners(port)
        assert len(served_by) == 2 and all(os.getpgid(pid) == group for pid in served_by), "server and worker listen"
        assert set(served_by) < set(group_members(group))
        command.send_signal(signal.SIGKILL)
        command.wait()
        assert wait_until(lambda: not group_members(group)), "the guard ended the server's group"
        assert port_free("127.0.0.1", port)
    finally:
        for pid in group_members(group):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("released", [True, False])
def test_a_watch_runs_its_clean_up_only_if_its_command_dies_without_releasing_it(tmp_path, released):
    done = tmp_path / "cleaned"
    command = owner(f"""
        import sys, time
        from pipeline.team.processes import release, watch_over
        guard = watch_over([sys.executable, "-c", "open({str(done)!r}, 'w').write('x')"])
        if {released}:
            release(guard)
        print(guard.pid, flush=True)
        time.sleep(600)
        """, tmp_path)
    guard = int(command.stdout.readline())
    command.send_signal(signal.SIGKILL)
    command.wait()
    assert wait_until(lambda: done.exists() or not group_members(guard), timeout=30), "the guard ended"
    time.sleep(0.5)
    assert done.exists() is not released


# The leader of a server's group (its guard, killed too), which starts the server and ends.
LEADER = textwrap.dedent(
    """
    import subprocess, sys
    server = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]], stdout=subprocess.PIPE, text=True)
    print(server.stdout.readline().strip(), flush=True)
    """
)


def leave_server(tmp_path: Path, port: int, mark: str | None) -> int:
    """A server (and its worker) on ``port`` carrying ``mark`` (its command's mark; None: no mark, another
    program's), in a group whose leader has ended, as a server's group whose guard was killed; the group."""
    env = dict(ENV)
    if mark is not None:
        env[SERVER_OWNER_ENV] = mark
    leader = subprocess.Popen([sys.executable, "-c", LEADER, SERVER, str(port)], env=env, stdout=subprocess.PIPE,
                              text=True, start_new_session=True)
    assert leader.stdout.readline().strip() == "serving"
    leader.wait()
    return leader.pid


def a_gone_commands_mark(tmp_path: Path) -> str:
    command = subprocess.run([sys.executable, "-c", "from pipeline.team.processes import owner_mark; "
                              "print(owner_mark())"], env=ENV, capture_output=True, text=True, check=True)
    return command.stdout.strip()


@pytest.fixture
def groups():
    """Process groups a test starts: every process of them is killed afterwards."""
    started: list[int] = []
    yield started
    for group in started:
        for pid in group_members(group):
            os.kill(pid, signal.SIGKILL)


def test_a_leftover_of_a_gone_command_is_named_and_ended_only_when_agreed(tmp_path, groups):
    port, mark = free_port(), a_gone_commands_mark(tmp_path)
    groups.append(leave_server(tmp_path, port, mark))
    asked = []
    with pytest.raises(ServerError) as refused:
        check_port_free("127.0.0.1", port, lambda leftover: asked.append(leftover) or False)
    assert str(refused.value) == (
        f"an MLflow server (2 processes) that an earlier rankscope command (pid {mark.split(':')[0]}, no longer "
        f"running) left running on port {port} on 127.0.0.1: end it with --end-stale, or give another port (--port N, "
        f"or --port 0 for any free one)")
    assert len(asked) == 1 and asked[0].processes == 2 and not port_free("127.0.0.1", port), "nothing was ended"
    with pytest.raises(ServerError, match=f"end it with `kill -- -{groups[0]}` \\(its process group\\)"):
        check_port_free("127.0.0.1", port)  # a caller that cannot end it (python -m pipeline.ui) says how

    check_port_free("127.0.0.1", port, lambda leftover: True)
    assert port_free("127.0.0.1", port) and not group_members(groups[0]), "its server and worker were ended"


def test_a_server_of_a_running_command_or_of_another_program_is_never_offered_to_end(tmp_path, groups):
    ours, theirs = free_port(), free_port()
    groups.append(leave_server(tmp_path, ours, owner_mark()))  # this test's process runs: the command is alive
    groups.append(leave_server(tmp_path, theirs, None))
    agree = lambda leftover: pytest.fail("offered to end a server that is not a leftover")  # noqa: E731
    with pytest.raises(ServerError, match=f"still runs \\(pid {os.getpid()}\\)"):
        check_port_free("127.0.0.1", ours, agree)
    with pytest.raises(ServerError, match="already in use: stop what holds it"):
        check_port_free("127.0.0.1", theirs, agree)
    assert holder_of(theirs).owner is None and all(group_members(g) for g in groups), "both still run"
