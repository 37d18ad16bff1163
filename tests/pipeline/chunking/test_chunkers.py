"""Every chunker's offsets are exact: ``text[start:end]`` is the chunk the library made, on text with accents,
emoji, CJK and odd spacing; sizes hold in tokens or characters; what a user's chunker returns is checked."""

from __future__ import annotations

from itertools import pairwise

import pytest

from metrics.errors import InputError
from pipeline.chunking.chunkers import ChunkerFailed, Fixed, Markdown, OwnChunker, Recursive, Sentences, Whole
from pipeline.chunking.tokens import load, tokenizer_path
from tests.pipeline.chunking.own import OffByOne, Paragraphs, PastTheEnd, Twice

TEXT = ("# Café prices\n\nThe Pro plan costs 49 € a month — naïve users pay less. 日本語のテキストです。 Émoji 😀 "
        "and\ttabs\u00a0too.\n\n## Refunds\n\nDr. Smith asked: can I get my money back?  Yes, within 14 days! "
        "Otherwise, no.\n\n") * 6
TEXTS = [TEXT, "", "one word", "   spaced   out   "]


def library_chunks(kind: str, chunker: Recursive, text: str) -> list[str]:
    return chunker.splitter(kind).chunks(text)


@pytest.mark.parametrize(("size", "overlap", "unit"), [(24, 0, "tokens"), (40, 8, "tokens"), (120, 0, "characters"),
                                                       (90, 20, "characters")])
def test_recursive_chunks_are_exactly_the_text_semantic_text_splitter_returns(size, overlap, unit):
    chunker = Recursive(size=size, overlap=overlap, unit=unit)
    for text, spans in zip(TEXTS, chunker.spans_of(TEXTS)):
        assert [text[s:e] for s, e in spans] == library_chunks("TextSplitter", chunker, text)


def test_markdown_sections_never_cross_a_heading_and_long_ones_are_the_markdown_splitters_chunks():
    chunker = Markdown(size=30)
    spans = chunker.spans_of([TEXT])[0]
    pieces = [TEXT[s:e] for s, e in spans]
    assert all(p.count("# ") <= 1 and (p.startswith("#") or "\n#" not in p) for p in pieces)
    whole = Markdown(size=10_000).spans_of([TEXT])[0]
    sections = [TEXT[s:e] for s, e in whole]
    assert len(sections) == 12 and all(s.startswith("#") for s in sections)  # a section per heading, trimmed
    long = [s for s in sections if chunker.measure([s])[0] > 30]
    splitter = Recursive(size=30).splitter("MarkdownSplitter")
    assert [p for p in pieces if any(p in s for s in long)] == [c for s in long for c in splitter.chunks(s)]


def test_sentence_chunks_are_whole_punkt_sentences_up_to_the_size():
    from nltk.tokenize.punkt import PunktSentenceTokenizer

    chunker = Sentences(size=40, overlap=12)
    sentences = list(PunktSentenceTokenizer().span_tokenize(TEXT))
    starts, ends = {s for s, _ in sentences}, {e for _, e in sentences}
    spans = chunker.spans_of([TEXT])[0]
    assert spans and all(s in starts and e in ends for s, e, *_ in spans)
    counted = chunker.measure([TEXT[s:e] for s, e, *_ in spans])
    assert max(counted) <= 40  # each chunk's tokens, counted on its text, within the size
    assert [n for *_, n in spans] == counted  # and its sentences' tokens add up to its own
    assert any(b[0] < a[1] for a, b in pairwise(spans))  # overlap: neighbours share whole sentences


def test_a_fixed_window_holds_exactly_its_tokens():
    chunker = Fixed(size=16, overlap=4)
    tokens = chunker.tokens()
    for text, spans in zip(TEXTS, chunker.spans_of(TEXTS)):
        offsets = tokens.offsets([text])[0]
        for n, (s, e, counted) in enumerate(spans):
            inside = [i for i, (a, b) in enumerate(offsets) if s <= a and b <= e]
            assert inside == list(range(n * 12, min(n * 12 + 16, len(offsets)))), (text[:20], n)
            assert counted == len(inside)
        assert not spans or spans[-1][1] == offsets[-1][1]


def test_fixed_characters_are_windows_of_the_size_with_the_overlap():
    spans = Fixed(size=10, overlap=3, unit="characters").spans_of(["x" * 30])[0]
    assert spans == [(0, 10), (7, 17), (14, 24), (21, 30)]


def test_no_chunking_is_each_document_whole():
    assert Whole().spans_of(["abc", ""]) == [[(0, 3)], []]


@pytest.mark.parametrize(("settings", "reason"), [
    ({"size": 64, "overlap": 64}, "overlap must be at least 0 and smaller than size"),
    ({"size": 0}, "size must be at least 1"),
    ({"unit": "words"}, "unit must be one of tokens, characters"),
])
def test_settings_that_cannot_chunk_are_refused(settings, reason):
    with pytest.raises(ValueError, match=reason):
        Recursive(**settings)


def test_the_shipped_tokenizer_counts_past_its_128_token_truncation_and_without_padding():
    text = "word " * 500
    assert load("minilm").count([text, "a"]).tolist() == [500, 1]


def test_an_unknown_tokenizer_is_one_line_naming_the_known_ones():
    with pytest.raises(InputError, match=r"chunker\.tokenizer='bert-huge' is neither a known tokenizer \(.*minilm\)"):
        tokenizer_path("bert-huge")


def test_a_tokenizer_file_by_path_is_taken(tmp_path):
    copy = tmp_path / "tok" / "tokenizer.json"
    copy.parent.mkdir()
    copy.write_bytes(tokenizer_path("minilm").read_bytes())
    assert load(str(copy.parent)).digest == load("minilm").digest


def test_a_users_chunker_is_used_as_it_chunks():
    chunker = OwnChunker(inner=Paragraphs(), name="Paragraphs")
    spans = chunker.spans_of([TEXT])[0]
    assert [TEXT[s:e] for s, e in spans] == [p for p in TEXT.split("\n\n") if p]


@pytest.mark.parametrize(("inner", "reason"), [
    (OffByOne(), "the offsets do not reproduce the chunk"),
    (PastTheEnd(), "outside the text's"),
    (Twice(), "the same chunk twice"),
])
def test_a_users_chunker_that_returns_what_is_not_a_chunk_is_stopped(inner, reason):
    with pytest.raises(ChunkerFailed, match=reason):
        OwnChunker(inner=inner, name=type(inner).__name__).spans_of(["some text here"])
