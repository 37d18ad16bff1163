"""Ctrl-C and SIGTERM stop the command even when they land in a finaliser, where Python would print "Exception
ignored" and let the command run on to the end (the interruption stress caught one doing so, with status 0)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest

from pipeline.common import interrupts
from tests.pipeline.helpers import REPO

PROGRAM = textwrap.dedent("""
    import os, signal, sys, threading, time
    from pipeline.common import interrupts

    interrupts.install()

    class Slow:
        def __del__(self):  # the signal arrives while this finaliser runs
            time.sleep(1.0)

    threading.Timer(0.3, os.kill, (os.getpid(), getattr(signal, sys.argv[1]))).start()
    try:
        Slow()  # dropped at once: __del__ runs here
        time.sleep(3)
        print("went on to the end")
    except KeyboardInterrupt as exc:
        print("stopped", interrupts.status(exc)[1])
        sys.exit(interrupts.status(exc)[0])
""")


@pytest.mark.parametrize(("name", "word", "code"), [("SIGTERM", "SIGTERM", 143), ("SIGINT", "Ctrl-C", 130)])
def test_a_signal_landing_in_a_finaliser_still_stops_the_command(name, word, code):
    done = subprocess.run([sys.executable, "-c", PROGRAM, name], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout.strip()) == (code, f"stopped {word}"), done.stderr
    assert "Exception ignored" not in done.stderr and "Traceback" not in done.stderr


def test_other_unraisable_errors_are_still_reported():
    code = ("from pipeline.common import interrupts\ninterrupts.install()\n"
            "class Bad:\n    def __del__(self):\n        raise ValueError('in a finaliser')\nBad()\nprint('on')\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "on" and "ValueError: in a finaliser" in done.stderr


def test_installing_twice_keeps_one_hook():
    code = ("import sys\nfrom pipeline.common import interrupts\ninterrupts.install()\nfirst = sys.unraisablehook\n"
            "interrupts.install()\nassert sys.unraisablehook is first\nassert interrupts._PREVIOUS_HOOK is not first\n")
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, timeout=60)




def test_a_ctrl_c_inside_a_deferred_block_acts_once_the_block_is_over():
    done = []
    with pytest.raises(KeyboardInterrupt), interrupts.deferred():
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
        done.append("the write finished")
    assert done == ["the write finished"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_ctrl_c_inside_a_deferred_block_that_fails_still_stops_the_command():
    # a store write that gives up (the store stayed locked) must not swallow the Ctrl-C pressed meanwhile
    with pytest.raises(KeyboardInterrupt) as stopped, interrupts.deferred():
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
        raise sqlite3.OperationalError("database is locked")
    assert isinstance(stopped.value.__context__, sqlite3.OperationalError)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_deferred_block_keeps_an_ignored_signal_ignored():
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        with interrupts.deferred():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGTERM, previous)


def _raised_while_unwinding(stop: KeyboardInterrupt) -> Exception:
    """The error a failing clean-up raises while ``stop`` unwinds (its cause wrapped once more, as OmegaConf wraps)."""
    try:
        try:
            try:
                raise stop
            finally:
                raise AttributeError("'NoneType' object has no attribute '_invalidate_flags_cache'")
        except AttributeError as inner:
            raise KeyError("wrapped") from inner
    except KeyError as outer:
        return outer


@pytest.mark.parametrize("stop", [KeyboardInterrupt(), interrupts.Terminated()])
def test_the_interruption_behind_an_error_raised_while_it_unwound_is_found(stop):
    assert interrupts.behind(_raised_while_unwinding(stop)) is stop
    assert interrupts.behind(stop) is stop


def test_an_error_with_no_interruption_behind_it_has_none():
    try:
        try:
            raise ValueError("first")
        except ValueError as first:
            raise RuntimeError("second") from first
    except RuntimeError as second:
        assert interrupts.behind(second) is None
    looped = ValueError("a chain that loops")
    looped.__context__ = RuntimeError("back")
    looped.__context__.__context__ = looped
    assert interrupts.behind(looped) is None
