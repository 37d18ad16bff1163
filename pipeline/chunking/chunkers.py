"""The chunkers ``conf/chunker/*.yaml`` entries build: each turns texts into character ranges, ``text[start:end]``.

- :class:`Whole` (``chunker=none``, the default): every document one chunk, i.e. no chunking.
- :class:`Fixed`: windows of ``size`` tokens (or characters), ``overlap`` shared between neighbours; a window's
  offsets are its first token's start and its last token's end, from the tokenizer's own offset mapping.
- :class:`Recursive`: semantic-text-splitter's ``TextSplitter``: the largest semantic units that fit (paragraphs, then
  lines, sentences, words, graphemes, characters), packed up to ``size``, as LangChain's recursive splitter does.
- :class:`Sentences`: whole sentences (NLTK's Punkt, untrained: no model to download) packed up to ``size``, the
  overlap in whole sentences; a sentence longer than ``size`` is split as :class:`Recursive` splits it.
- :class:`Markdown`: one chunk per section (a heading and what follows it, up to the next heading; markdown-it-py
  finds them); a section longer than ``size`` is split by semantic-text-splitter's ``MarkdownSplitter``.
- your own class (``chunker=custom chunker._target_=MODULE.CLASS``): one method, ``chunk(text)``, returning the
  chunks' ``(start, end)`` offsets (or ``(start, end, text)``: then ``text[start:end]`` must equal the text given).
  :class:`OwnChunker` checks what it returns.

``size`` and ``overlap`` count ``unit`` (``tokens`` of ``tokenizer``, or ``characters``). ``spans_of`` gives each
chunk as ``(start, end)``, or ``(start, end, tokens)`` when the chunker counted its tokens itself (a fixed window of
tokens); the others' tokens are counted on the chunk's text. The chunks are trimmed of
surrounding whitespace where the library trims them (recursive, markdown) and never cross a document. ``depth``
is how many chunks each question's ranking keeps (null: :data:`DEPTH_FACTOR` times the job's ``depth``), enough
for the documents and the token budgets read from it.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from pipeline.chunking.tokens import Tokens, load, require

Spans = list[tuple[int, ...]]  # (start, end) or (start, end, tokens)
UNITS = ("tokens", "characters")
DEPTH_FACTOR = 4  # chunks ranked per document kept, unless chunker.depth says otherwise
OURS = ("tokenizer", "depth")  # keys rankscope reads from any chunker entry (a user's class need not take them)


def chunk_depth(depth: int | None, documents: int) -> int:
    """How many chunks a question's ranking keeps: ``depth``, else :data:`DEPTH_FACTOR` x the documents kept."""
    return int(depth) if depth is not None else DEPTH_FACTOR * documents


@dataclass
class Counted:
    """What every chunker entry holds for rankscope: the ``tokenizer`` that counts a chunk's tokens (budgets) and
    ``depth``, the chunks each question's ranking keeps."""

    tokenizer: str = "minilm"
    depth: int | None = None
    _base: Path | None = field(default=None, repr=False)

    @classmethod
    def from_config(cls, context: Any, **keys: Any) -> Counted:
        return cls(**keys, _base=context.base)

    def tokens(self) -> Tokens:
        return load(self.tokenizer, self._base)


@dataclass
class Whole(Counted):
    """No chunking: a document is one chunk, its whole text (``chunker=none``)."""

    chunks_documents = False  # the job ranks documents as they are

    def spans_of(self, texts: Sequence[str]) -> list[Spans]:
        return [[(0, len(t))] if t else [] for t in texts]


@dataclass
class Chunker(Counted):
    """What every built-in chunker takes besides: ``size`` and ``overlap`` in ``unit`` (tokens of ``tokenizer``, or
    characters)."""

    size: int = 256
    overlap: int = 0
    unit: str = "tokens"
    chunks_documents = True

    def __post_init__(self) -> None:
        if self.unit not in UNITS:
            raise ValueError(f"unit must be one of {', '.join(UNITS)}, got {self.unit!r}")
        if int(self.size) < 1:
            raise ValueError(f"size must be at least 1, got {self.size}")
        if not 0 <= int(self.overlap) < int(self.size):
            raise ValueError(f"overlap must be at least 0 and smaller than size ({self.size}), got {self.overlap}")
        if self.depth is not None and int(self.depth) < 1:
            raise ValueError(f"depth must be at least 1 (or null), got {self.depth}")

    def measure(self, texts: Sequence[str]) -> list[int]:
        """Each text's length in ``unit``."""
        if self.unit == "characters":
            return [len(t) for t in texts]
        return self.tokens().count(texts).tolist()

    def like(self, kind: type[Chunker], **changes: Any) -> Chunker:
        """A chunker of another kind with these settings (a sentence too long, split as ``recursive`` splits it)."""
        return kind(**{**{f.name: getattr(self, f.name) for f in fields(Chunker)}, **changes})

    def spans_of(self, texts: Sequence[str]) -> list[Spans]:  # pragma: no cover - every chunker defines it
        raise NotImplementedError


@dataclass
class Fixed(Chunker):
    """Windows of ``size`` tokens or characters, each starting ``size - overlap`` after the one before."""

    def spans_of(self, texts: Sequence[str]) -> list[Spans]:
        step = int(self.size) - int(self.overlap)
        if self.unit == "characters":
            return [[(i, min(i + self.size, len(t))) for i in range(0, max(len(t) - self.overlap, 1), step)]
                    if t else [] for t in texts]
        out = []
        for encoding in self.tokens().encode(texts):
            n, spans = len(encoding), []
            for i in range(0, n, step):
                last = min(i + self.size, n) - 1
                spans.append((encoding.token_to_chars(i)[0], encoding.token_to_chars(last)[1], last + 1 - i))
                if last == n - 1:  # the window's tokens, counted: no second pass over its text
                    break
            out.append(spans)
        return out


def _indices(found: list[list[tuple[int, str]]]) -> list[Spans]:
    """semantic-text-splitter's ``(character offset, chunk)`` pairs as ranges."""
    return [[(offset, offset + len(chunk)) for offset, chunk in pairs] for pairs in found]


@dataclass
class Recursive(Chunker):
    """semantic-text-splitter's ``TextSplitter``: the largest semantic units that fit, up to ``size``."""

    def splitter(self, kind: str = "TextSplitter") -> Any:
        cls = getattr(require("semantic_text_splitter"), kind)
        if self.unit == "characters":
            return cls(int(self.size), overlap=int(self.overlap))
        return cls.from_huggingface_tokenizer(self.tokens().tokenizer, int(self.size), overlap=int(self.overlap))

    def spans_of(self, texts: Sequence[str]) -> list[Spans]:
        return _indices(self.splitter().chunk_all_indices(list(texts)))


@dataclass
class Sentences(Chunker):
    """Whole sentences packed up to ``size``; ``overlap``: the last sentences of a chunk (up to that many tokens or
    characters) begin the next one too."""

    def spans_of(self, texts: Sequence[str]) -> list[Spans]:
        punkt = require("nltk.tokenize.punkt", "chunker=sentence").PunktSentenceTokenizer()
        sentences = [list(punkt.span_tokenize(t)) for t in texts]
        flat = [t[s:e] for t, found in zip(texts, sentences) for s, e in found]
        sizes = iter(self.measure(flat))
        long: list[tuple[int, int, int]] = []  # (text, start, end) of sentences longer than size
        packed = [self._pack([(s, e, next(sizes)) for s, e in found], i, long) for i, found in enumerate(sentences)]
        if long:
            pieces = iter(self.like(Recursive, overlap=0).spans_of(
                [texts[i][s:e] for i, s, e in long]))
            split = {(i, s): [(s + a, s + b) for a, b in next(pieces)] for i, s, _ in long}
            packed = [[p for span in spans for p in (split.get((i, span[0]), [span]))]
                      for i, spans in enumerate(packed)]
        return packed

    def _counted(self, start: int, end: int, sentences: list[tuple[int, int, int]]) -> tuple[int, ...]:
        """A chunk of whole sentences: in tokens, the sum of its sentences' (whitespace between them adds none)."""
        if self.unit != "tokens":
            return (start, end)
        return (start, end, sum(n for s, e, n in sentences))

    def _pack(self, found: list[tuple[int, int, int]], text: int, long: list[tuple[int, int, int]]) -> Spans:
        out: Spans = []
        current: list[tuple[int, int, int]] = []

        def close() -> None:
            if current:
                out.append(self._counted(current[0][0], current[-1][1], current))

        for start, end, n in found:
            if n > self.size:  # a sentence alone too long: its own chunk, split later
                close()
                current = []
                out.append((start, end))
                long.append((text, start, end))
                continue
            if current and sum(c[2] for c in current) + n > self.size:
                close()
                kept, total = [], 0
                for c in reversed(current):  # the overlap: trailing sentences, whole
                    if total + c[2] > self.overlap:
                        break
                    kept.insert(0, c)
                    total += c[2]
                current = kept if total + n <= self.size else []
            current.append((start, end, n))
        close()
        return out


@dataclass
class Markdown(Chunker):
    """One chunk per Markdown section (a heading and what follows it); one longer than ``size`` split by
    semantic-text-splitter's ``MarkdownSplitter``."""

    def spans_of(self, texts: Sequence[str]) -> list[Spans]:
        parser = require("markdown_it", "chunker=markdown").MarkdownIt("commonmark")
        sections = [self._sections(t, parser) for t in texts]
        flat = [(i, s, e) for i, found in enumerate(sections) for s, e in found]
        splitter = self.like(Recursive).splitter(
            "MarkdownSplitter")  # a section that fits comes back whole, one longer is split
        pieces = _indices(splitter.chunk_all_indices([texts[i][s:e] for i, s, e in flat]))
        out: list[Spans] = [[] for _ in texts]
        for (i, s, _), found in zip(flat, pieces):
            out[i].extend((s + a, s + b) for a, b in found)
        return out

    @staticmethod
    def _sections(text: str, parser: Any) -> Spans:
        """Each section's range, trimmed of surrounding whitespace (text before the first heading is one too)."""
        lines = [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]
        heads = sorted({lines[t.map[0]] for t in parser.parse(text) if t.type == "heading_open" and t.map})
        bounds = [*sorted({0, *heads}), len(text)]
        out = []
        for start, end in itertools.pairwise(bounds):
            piece = text[start:end]
            lead = len(piece) - len(piece.lstrip())
            trail = len(piece.rstrip())
            if trail > lead:
                out.append((start + lead, start + trail))
        return out


class ChunkerFailed(ValueError):
    """A user's chunker returned what is not a chunk of the text it was given."""


@dataclass(kw_only=True)
class OwnChunker(Counted):
    """A user's class with ``chunk(text)``: what it returns checked, every range inside the text, non-empty, once;
    a ``(start, end, text)`` triple's text equal to ``text[start:end]``."""

    inner: Any
    name: str
    chunks_documents = True

    def spans_of(self, texts: Sequence[str]) -> list[Spans]:
        return [self._checked(t, i) for i, t in enumerate(texts)]

    def _checked(self, text: str, position: int) -> Spans:
        found = self.inner.chunk(text)
        spans: Spans = []
        for n, item in enumerate(found if found is not None else [], start=1):
            try:
                start, end, *rest = item
                start, end = int(start), int(end)
            except (TypeError, ValueError):
                raise ChunkerFailed(f"its chunk {n} is {item!r}, not (start, end)") from None
            if not 0 <= start < end <= len(text):
                raise ChunkerFailed(f"its chunk {n} has offsets {start}:{end}, outside the text's {len(text)} "
                                    f"characters (0 <= start < end <= length)")
            if rest and rest[0] != text[start:end]:
                raise ChunkerFailed(f"its chunk {n} says {str(rest[0])[:40]!r} at {start}:{end}, where the text "
                                    f"holds {text[start:end][:40]!r}: the offsets do not reproduce the chunk")
            spans.append((start, end))
        if len(set(spans)) != len(spans):
            raise ChunkerFailed("it returned the same chunk twice")
        return sorted(spans)
