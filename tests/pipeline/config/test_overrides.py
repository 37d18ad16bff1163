"""Overrides Hydra's grammar refuses unquoted but reads quoted (a URL's query string) are quoted for it; one that
cannot be read even so is named in the command's one line."""

from __future__ import annotations

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import OverrideParseException

from pipeline.config.overrides import readable, unreadable
from pipeline.job.context import system_name


def values(override: str) -> object:
    (parsed,) = OverridesParser.create().parse_overrides([override])
    return [getattr(v, "text", v) for v in parsed.value().list] if parsed.is_sweep_override() else parsed.value()


@pytest.mark.parametrize("typed, value", [
    ("retriever.url=http://127.0.0.1:9/search?ms=20", "http://127.0.0.1:9/search?ms=20"),
    ("retriever.url=http://h/search?ms=20&size=5", "http://h/search?ms=20&size=5"),
    ("+tags.query=a=b", "a=b"),
    ("retriever.url=http://h/p;x", "http://h/p;x"),
    ("+tags.note=it's=here", "it's=here"),
])
def test_a_value_the_grammar_refuses_unquoted_is_read_as_typed(typed, value):
    with pytest.raises(OverrideParseException):
        values(typed)  # as Hydra alone would: "mismatched input '=' expecting <EOF>"
    (fixed,) = readable([typed])
    assert values(fixed) == value


def test_each_value_of_a_sweep_is_quoted_on_its_own():
    (fixed,) = readable(["retriever.url=http://a/s?x=1,http://b/s"])
    assert values(fixed) == ["http://a/s?x=1", "http://b/s"]


@pytest.mark.parametrize("typed", [
    "retriever=bm25", "retriever.k1=0.3,0.6", "metrics.k=[3,5]", "retriever.url='http://h/s?ms=20'",
    "hydra.sweep.dir=/tmp/x", "-m", "--cfg", "+tags.x=a'b\"c=d",  # the last cannot be quoted: left for Hydra
])
def test_what_the_grammar_reads_already_or_cannot_read_quoted_is_left_as_it_is(typed):
    assert readable([typed]) == [typed]


def test_an_override_that_cannot_be_read_is_named_with_how_to_quote_it():
    with pytest.raises(OverrideParseException) as refused:
        OverridesParser.create().parse_overrides(["+tags.x=a'b\"c=d"])
    assert unreadable(refused.value).startswith("cannot read the override '+tags.x=a\\'b\"c=d' (quote its value")
    assert unreadable(ValueError("other")) is None


@pytest.mark.parametrize("override", ["retriever.url='http://h/s?ms=20'", 'retriever.url="http://h/s?ms=20"'])
def test_a_quoted_value_leaves_no_quote_in_the_systems_name(override):
    assert system_name("http", ["retriever=http", override], []) == "http url=http://h/s?ms=20"
