"""``python -m pipeline`` stopped at its edges: one line and status 130 or 143, never a traceback or death by the
signal. The interruption stress (``python -m bench.interruptions``) once saw a Ctrl-C end a sweep with status -2:
the stop had landed where nothing caught it, as the command forked its store process (or, just as uncaught, as it
ended: ``tests/pipeline/common/test_ending.py``)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.pipeline.helpers import cli_env

# The signal arrives as the command forks its store process (pipeline.tracking.background.start): os.fork sends it
# to the command itself first, so it lands there every time.
STOPPED_AS_IT_FORKS = textwrap.dedent("""
    import os, runpy, signal, sys

    stop, fork = getattr(signal, sys.argv[1]), os.fork

    def stopped_fork():
        os.kill(os.getpid(), stop)
        return fork()

    os.fork = stopped_fork
    sys.argv = ["pipeline", "quiet=true"]
    runpy.run_module("pipeline", run_name="__main__", alter_sys=True)
""")


@pytest.mark.parametrize(("name", "word", "status"), [("SIGINT", "Ctrl-C", 130), ("SIGTERM", "SIGTERM", 143)])
def test_a_stop_as_the_command_starts_its_store_process_is_one_line(tmp_path, name, word, status):
    done = subprocess.run([sys.executable, "-c", STOPPED_AS_IT_FORKS, name], cwd=tmp_path, env=cli_env(tmp_path),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == status, done.stderr[-3000:]
    assert done.stderr.strip() == f"rankscope: stopped by {word} while starting: nothing was done"
    assert not (tmp_path / "outputs").exists()
