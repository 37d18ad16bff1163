"""A sweep that will take long says so after its first job, with an estimate from that job's time."""

from __future__ import annotations

from pipeline.sweep.pace import say_how_long


def test_a_long_sweep_says_how_long_after_its_first_job(capsys):
    say_how_long(12, 40.0)
    said = capsys.readouterr().err.splitlines()
    assert said == ["rankscope: 12 jobs; the first took 40 s, so the other 11 may take up to about 7 min (they reuse "
                    "its corpus, term counts and embeddings, so usually less)"]


def test_a_short_sweep_says_nothing(capsys):
    say_how_long(4, 2.5)  # the help-desk study: 7.5 s more at most
    say_how_long(1, 500.0)  # nothing else to wait for
    assert capsys.readouterr().err == ""
