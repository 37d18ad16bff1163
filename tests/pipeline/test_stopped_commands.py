"""``pipeline.compare``, ``pipeline.gate`` and ``pipeline.sync`` stopped by Ctrl-C or SIGTERM: one line saying what
stays and what to run, status 130 or 143, no traceback (they printed 40-80 lines of one, and SIGTERM killed them
silently). The signal lands while they import MLflow, where a stop most often finds them: once numpy's compiled core
is loaded, which the command's own imports do after its handlers are in place. (A fixed pause once sent it before,
on a loaded machine, into the interpreter's own start-up.)"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import pipeline
from pipeline.common import interrupts
from pipeline.common.names import SAYS_COMPARE, SAYS_GATE, SAYS_SYNC
from tests.pipeline.helpers import cli_env

COMMANDS = {
    "compare": (["pipeline.compare", "BM25", "BM25 k1=0.5"], SAYS_COMPARE, "run the command again"),
    "gate": (["pipeline.gate", "BM25 k1=0.5", "--baseline", "BM25"], SAYS_GATE, "run the gate again"),
    "sync": (["pipeline.sync", "."], SAYS_SYNC, "run the same command again"),
}


def wait_for_numpy(process: subprocess.Popen, timeout: float = 120) -> None:
    """Until ``process`` has loaded numpy's compiled core (it is importing MLflow): an event, not a pause."""
    maps, deadline = Path(f"/proc/{process.pid}/maps"), time.monotonic() + timeout
    while "_multiarray_umath" not in maps.read_text():
        assert process.poll() is None, f"ended ({process.returncode}) before importing numpy"
        assert time.monotonic() < deadline, "numpy not imported"
        time.sleep(0.005)


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs /proc to see what a process has loaded")
@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize(("sig", "word", "status"), [(signal.SIGINT, "Ctrl-C", 130), (signal.SIGTERM, "SIGTERM", 143)])
def test_a_stopped_command_says_so_in_one_line(tmp_path, command, sig, word, status):
    args, says, advice = COMMANDS[command]
    process = subprocess.Popen([sys.executable, "-m", *args], cwd=tmp_path, env=cli_env(tmp_path),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    wait_for_numpy(process)
    process.send_signal(sig)
    _, err = process.communicate(timeout=120)
    lines = [line for line in err.splitlines() if line.strip()]
    assert process.returncode == status, err[-3000:]
    assert len(lines) == 1 and "Traceback" not in err, err[-3000:]
    assert lines[0].startswith(f"{says}: stopped by {word}: ") and advice in lines[0]


# Put on the path ahead of everything (a sitecustomize): sends the signal as the command, its code now running, imports
# its first module of ours, the moment between ``python -m`` finding the command and the command setting anything.
STOPPED_WHILE_IMPORTING = '''
import os, signal, sys

class StopOnImport:
    def find_spec(self, name, path=None, target=None):
        if name.startswith("pipeline.") and sys.argv[:1] != ["-m"]:
            sys.meta_path.remove(self)
            os.kill(os.getpid(), getattr(signal, os.environ["RANKSCOPE_TEST_STOP"]))
        return None

sys.meta_path.insert(0, StopOnImport())
'''


@pytest.mark.parametrize("module", sorted(set(pipeline.COMMANDS) - {"pipeline.server"}))  # its imports come later
@pytest.mark.parametrize(("sig", "word", "status"), [("SIGINT", "Ctrl-C", 130), ("SIGTERM", "SIGTERM", 143)])
def test_a_command_stopped_while_it_imports_says_so_in_one_line(tmp_path, module, sig, word, status):
    (tmp_path / "hook").mkdir()
    (tmp_path / "hook" / "sitecustomize.py").write_text(STOPPED_WHILE_IMPORTING)
    env = cli_env(tmp_path)
    env.update(PYTHONPATH=f"{tmp_path / 'hook'}:{env['PYTHONPATH']}", RANKSCOPE_TEST_STOP=sig)
    done = subprocess.run([sys.executable, "-m", module, "--help"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert done.returncode == status, done.stderr[-3000:]
    assert done.stderr.strip() == interrupts.STOPPED_STARTING.format(word=word) and not done.stdout


def test_a_module_that_is_no_command_keeps_pythons_own_handling():
    probe = ("import signal, sys; sys.argv[:1] = ['-m']; sys.orig_argv = [sys.executable, '-m', 'pipeline.x'];"
             " import pipeline; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler,"
             " signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=cli_env(Path.cwd()),
                          timeout=60, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert done.stdout.split() == ["True", "True"], done.stderr


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_the_server_stopped_while_it_imports_its_work_says_stopped(tmp_path, sig):
    """The server reads its arguments, then imports what serves: a stop there ends it as a stop later does."""
    (tmp_path / "hook").mkdir()
    (tmp_path / "hook" / "sitecustomize.py").write_text(STOPPED_WHILE_IMPORTING)
    env = cli_env(tmp_path)
    env.update(PYTHONPATH=f"{tmp_path / 'hook'}:{env['PYTHONPATH']}", RANKSCOPE_TEST_STOP=sig)
    done = subprocess.run([sys.executable, "-m", "pipeline.server", "--backend-store-uri", "sqlite:///m.db"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert (done.returncode, done.stderr.strip()) == (0, "Stopped."), done.stderr[-3000:]
    assert not (tmp_path / "m.db").exists()
