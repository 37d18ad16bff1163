"""How jobs are named and find their sweep, and why output folders never collide."""

from __future__ import annotations

import re

from pipeline.app import stamp, unescape
from pipeline.config.paths import entry_defaults
from pipeline.job.context import SweepHandle, system_name


def test_a_run_is_named_by_its_retriever_when_only_the_retriever_varies():
    assert system_name("BM25", ["retriever=bm25", "experiment=helpdesk_study"], ["retriever"]) == "BM25"


def test_a_grid_point_is_named_by_the_values_that_set_it_apart():
    overrides = ["retriever=bm25", "retriever.k1=0.9", "retriever.b=0.4", "metrics.k=[3,5]"]
    assert system_name("BM25", overrides, ["retriever.k1", "retriever.b"]) == "BM25 k1=0.9 b=0.4"


def test_a_single_run_is_named_by_every_setting_it_overrides():
    overrides = ["retriever.k1=0.9", "metrics=beir", "corpus=scifact", "depth=50", "tracking.uri=sqlite:///x.db"]
    assert system_name("BM25", overrides, []) == "BM25 k1=0.9 depth=50"


def test_a_swapped_fusion_component_is_in_the_name():
    overrides = ["retriever=rrf", "retriever@retriever.components.second=dense"]
    assert system_name("RRF", overrides, []) == "RRF components.second=dense"


def test_your_own_class_is_named_by_its_arguments_and_by_its_class_only_when_that_varies():
    fixed = ["retriever=custom", "retriever._target_=mine.search.ListSearch", "+retriever.min_length=3"]
    assert system_name("custom", fixed, ["retriever.min_length"]) == "custom min_length=3"
    swept = ["retriever=custom", "retriever._target_=mine.search.Other"]
    assert system_name("custom", swept, ["retriever._target_"]) == "custom _target_=Other"


def test_a_swept_path_is_named_by_its_last_part():
    name = system_name("BM25", ["corpus.path=/data/beir/collections/scifact"], ["corpus.path"])
    assert name == "BM25 corpus.path=.../scifact"


def test_the_hand_off_file_round_trips(tmp_path):
    handle = SweepHandle("7", "abc123", ["retriever", "retriever.k1"])
    handle.write(tmp_path / "sweep")
    assert SweepHandle.read(tmp_path / "sweep") == handle
    assert SweepHandle.read(tmp_path / "elsewhere") is None


def test_two_commands_started_in_the_same_second_get_different_folders():
    first, second = stamp(), stamp()
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}/\d{2}-\d{2}-\d{2}-[0-9a-f]{6}", first)
    assert first != second


def test_overrides_are_shown_as_typed():
    assert unescape(r"tracking.uri=http\://127.0.0.1\:5000") == "tracking.uri=http://127.0.0.1:5000"


def test_a_setting_given_its_entry_s_own_value_changes_nothing_and_is_not_in_the_name():
    """The same configuration has one name in every sweep: BM25 at bm25.yaml's k1=1.2 b=0.75 is "BM25" in a systems
    sweep and at that point of a k1 x b grid alike; a value that differs stays in the name."""
    defaults = entry_defaults("retriever", "bm25")
    assert defaults["k1"] == 1.2 and defaults["b"] == 0.75
    grid = ["retriever.k1", "retriever.b"]
    assert system_name("BM25", ["retriever.k1=1.2", "retriever.b=0.75"], grid, defaults) == "BM25"
    assert system_name("BM25", ["retriever.k1=1.20", "retriever.b=0.4"], grid, defaults) == "BM25 b=0.4"
    assert system_name("BM25", ["retriever=bm25"], ["retriever"], defaults) == "BM25"
    assert system_name("BM25", ["retriever.k1=0.9", "retriever.b=0.75"], grid, defaults) == "BM25 k1=0.9"
    assert entry_defaults("retriever", "no_such_entry") == {}  # a user's own entry: every override named
