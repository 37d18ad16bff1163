"""Users' own chunkers, as a user would write them: one method, ``chunk(text)``, character offsets out."""

from __future__ import annotations

import re


class Paragraphs:
    """A chunk per paragraph (blank lines between), with its text: ``(start, end, text)``."""

    def __init__(self, minimum: int = 1) -> None:
        self.minimum = minimum

    def chunk(self, text: str) -> list[tuple[int, int, str]]:
        return [(m.start(), m.end(), m.group()) for m in re.finditer(r"[^\n]+(?:\n[^\n]+)*", text)
                if len(m.group()) >= self.minimum]


class OffByOne:
    """Offsets one character late: what it says a chunk is, the text does not hold there."""

    def chunk(self, text: str) -> list[tuple[int, int, str]]:
        return [(m.start() + 1, m.end() + 1, m.group()) for m in re.finditer(r"\S+", text)][:3]


class PastTheEnd:
    def chunk(self, text: str) -> list[tuple[int, int]]:
        return [(0, len(text) + 5)]


class Twice:
    def chunk(self, text: str) -> list[tuple[int, int]]:
        return [(0, 1), (0, 1)] if text else []
