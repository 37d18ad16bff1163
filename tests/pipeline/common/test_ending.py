"""A command ends without the interpreter's teardown, yet loses nothing: threads finish, atexit handlers run,
buffered output is written, and the status is the one asked for."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.pipeline.helpers import REPO

PROGRAM = textwrap.dedent("""
    import atexit, sys, threading, time
    from pipeline.common import ending

    class Teardown:
        def __del__(self):  # runs only in the interpreter's teardown, which is skipped
            print("torn down")

    KEPT = Teardown()

    def main():
        def upload():
            time.sleep(0.5)
            print("thread finished")
        threading.Thread(target=upload).start()  # non-daemon, like MLflow's artifact uploads
        atexit.register(lambda: print("atexit ran"))
        sys.stdout.write("buffered, no newline")
        return eval(sys.argv[1])

    ending.run(main)
""")


@pytest.mark.parametrize(("returned", "status"), [("None", 0), ("3", 3), ("sys.exit(4)", 4), ("sys.exit()", 0),
                                                  ("sys.exit('bad input')", 1)])
def test_the_status_is_kept_and_nothing_pending_is_lost(returned, status):
    done = subprocess.run([sys.executable, "-c", PROGRAM, returned], cwd=REPO, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == status, done.stderr
    assert "buffered, no newline" in done.stdout and "thread finished" in done.stdout and "atexit ran" in done.stdout
    assert "torn down" not in done.stdout  # the teardown was skipped
    assert ("bad input" in done.stderr) == (status == 1)


STOPPED = textwrap.dedent("""
    import os, signal, sys, threading, time
    from pipeline.common import ending, interrupts

    interrupts.install()

    def main():
        threading.Timer(0.2, os.kill, (os.getpid(), getattr(signal, sys.argv[1]))).start()
        try:
            time.sleep(10)
        finally:
            if sys.argv[2] == "failing-clean-up":
                {}["lost"]  # a clean-up that fails as the stop unwinds it
        return 0

    ending.run(main, "cmd", "what was saved")
""")


@pytest.mark.parametrize("clean_up", ["clean-up", "failing-clean-up"])
@pytest.mark.parametrize(("name", "word", "status"), [("SIGINT", "Ctrl-C", 130), ("SIGTERM", "SIGTERM", 143)])
def test_a_stopped_command_ends_with_its_one_line_and_the_shells_status(name, word, status, clean_up):
    done = subprocess.run([sys.executable, "-c", STOPPED, name, clean_up], cwd=REPO, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == status, done.stderr
    assert done.stderr.strip() == f"cmd: stopped by {word}: what was saved"


def test_without_a_line_for_stops_an_interruption_is_left_to_python():
    program = STOPPED.replace('ending.run(main, "cmd", "what was saved")',
                              "ending.run(main)")
    done = subprocess.run([sys.executable, "-c", program, "SIGINT", "clean-up"], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode != 0 and "KeyboardInterrupt" in done.stderr


HALF_BUILT = textwrap.dedent("""
    import logging, sys
    from pipeline.common import ending

    def stopped(self):
        raise KeyboardInterrupt  # a Ctrl-C landing inside Handler.__init__, after it registered the handler for exit

    create_lock = logging.Handler.createLock
    if sys.argv[1] == "lock":
        logging.Handler.createLock = stopped
    try:
        handler = logging.StreamHandler(sys.stdout)
    except KeyboardInterrupt as exc:
        stop = exc  # kept, as a command keeps it while it ends: its traceback holds the half-built handler
    logging.Handler.createLock = create_lock
    if sys.argv[1] == "stream":  # built up to its lock, stopped before its stream was set
        del handler.stream
    logging.getLogger("kept").addHandler(logging.StreamHandler(sys.stdout))  # a whole one: still flushed at exit
    print("ended", end="")
    ending.finish(0)
""")


@pytest.mark.parametrize("cut", ["lock", "stream"])
def test_a_log_handler_a_stop_cut_short_leaves_the_exit_quiet(cut):
    """A Ctrl-C inside a log handler's construction (Hydra builds each job's as it starts) must not add a traceback
    from logging's exit to the command's one line."""
    done = subprocess.run([sys.executable, "-c", HALF_BUILT, cut], cwd=REPO, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0 and done.stdout == "ended", done.stderr
    assert done.stderr == ""


ENDING_STOPPED = textwrap.dedent("""
    import atexit, os, signal, sys, threading, time
    from pipeline.common import ending, interrupts

    interrupts.install()
    stop = getattr(signal, sys.argv[1])

    def main():
        if sys.argv[2] == "thread":  # a non-daemon thread still working when main returns (an artifact upload)
            threading.Thread(target=time.sleep, args=(3,)).start()
        else:  # an exit handler still working (the store process's last answers)
            atexit.register(time.sleep, 3)
        timer = threading.Timer(0.5, os.kill, (os.getpid(), stop))  # once main has returned, while the end waits
        timer.daemon = True
        timer.start()
        return 0

    ending.run(main, "cmd", lambda: "what was saved")
""")


@pytest.mark.parametrize("waiting", ["thread", "exit handler"])
@pytest.mark.parametrize(("name", "word", "status"), [("SIGINT", "Ctrl-C", 130), ("SIGTERM", "SIGTERM", 143)])
def test_a_stop_that_comes_while_the_command_ends_is_obeyed_with_its_line_and_status(name, word, status, waiting):
    """Left to Python, a Ctrl-C in the command's last moments killed it with the signal (status -2, the interruption
    stress saw it once) or, swallowed by an exit handler, let it end 0."""
    done = subprocess.run([sys.executable, "-c", ENDING_STOPPED, name, waiting], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == status, done.stderr
    assert done.stderr.strip() == f"cmd: stopped by {word}: what was saved"


AFTER_THE_STOP = textwrap.dedent("""
    import atexit, os, signal, time
    from pipeline.common import ending, interrupts

    interrupts.install()

    def close_runs():  # an exit handler meeting an error of its own (an artifact it cannot read), and going on
        try:
            {}["missing"]
        except KeyError as exc:
            interrupts.stop_if_interrupted(exc)  # the stop is over: this error is not it
            print("runs closed", flush=True)

    def main():
        atexit.register(close_runs)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(10)

    ending.run(main, "cmd", "what was saved")
""")


def test_an_exit_handler_after_a_stop_meets_its_own_errors_not_the_stop_again():
    """A sweep's exit handler closes its runs FAILED; an error it handled there was taken for the stop (raised while
    it unwound), which cut the handler short and left the sweep's parent run RUNNING."""
    done = subprocess.run([sys.executable, "-c", AFTER_THE_STOP], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 130, done.stderr
    assert done.stdout.strip() == "runs closed"
    assert done.stderr.strip() == "cmd: stopped by Ctrl-C: what was saved"


TURNED_INTO_AN_ERROR = textwrap.dedent("""
    import os, signal, sys, time
    from pipeline.common import ending, interrupts

    interrupts.install()

    def main():
        stopped = False
        try:  # a C extension's import, stopped half-way, reports an ImportError of its own and drops the stop
            os.kill(os.getpid(), getattr(signal, sys.argv[1]))
            time.sleep(10)
        except KeyboardInterrupt:
            stopped = True
        if stopped:  # raised outside the handler: nothing links it to the stop
            raise ImportError("cannot import name 'multiarray' from partially initialized module 'numpy._core'")
        return 0

    ending.run(main, "cmd", "what was saved")
""")


@pytest.mark.parametrize(("name", "word", "status"), [("SIGINT", "Ctrl-C", 130), ("SIGTERM", "SIGTERM", 143)])
def test_a_stop_a_library_turned_into_its_own_error_is_still_the_stop(name, word, status):
    """A Ctrl-C landing in numpy's import under load ended a command with an ImportError's traceback and status 1
    (tests/pipeline/test_stopped_commands.py, now and then): the error did not carry the stop."""
    done = subprocess.run([sys.executable, "-c", TURNED_INTO_AN_ERROR, name], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == status, done.stderr
    assert done.stderr.strip() == f"cmd: stopped by {word}: what was saved"
