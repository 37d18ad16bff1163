"""``pipeline.compare``, ``pipeline.gate`` and ``pipeline.sync`` stopped by Ctrl-C or SIGTERM: one line saying what
stays and what to run, status 130 or 143, no traceback (they printed 40-80 lines of one, and SIGTERM killed them
silently). The signal lands while they import MLflow, where a stop most often finds them."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from pipeline.common.names import SAYS_COMPARE, SAYS_GATE, SAYS_SYNC
from tests.pipeline.helpers import cli_env

COMMANDS = {
    "compare": (["pipeline.compare", "BM25", "BM25 k1=0.5"], SAYS_COMPARE, "run the command again"),
    "gate": (["pipeline.gate", "BM25 k1=0.5", "--baseline", "BM25"], SAYS_GATE, "run the gate again"),
    "sync": (["pipeline.sync", "."], SAYS_SYNC, "run the same command again"),
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize(("sig", "word", "status"), [(signal.SIGINT, "Ctrl-C", 130), (signal.SIGTERM, "SIGTERM", 143)])
def test_a_stopped_command_says_so_in_one_line(tmp_path, command, sig, word, status):
    args, says, advice = COMMANDS[command]
    process = subprocess.Popen([sys.executable, "-m", *args], cwd=tmp_path, env=cli_env(tmp_path),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(0.4)  # importing MLflow takes a second or more
    process.send_signal(sig)
    _, err = process.communicate(timeout=120)
    lines = [line for line in err.splitlines() if line.strip()]
    assert process.returncode == status, err[-3000:]
    assert len(lines) == 1 and "Traceback" not in err, err[-3000:]
    assert lines[0].startswith(f"{says}: stopped by {word}: ") and advice in lines[0]
