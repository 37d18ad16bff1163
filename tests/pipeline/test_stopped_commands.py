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
