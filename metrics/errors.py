"""The one error type for bad input (it names the file and line so the user can fix the data), and the note that
reports bad input a job went on with."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


class InputError(ValueError):
    """Bad input data or arguments, reported plainly (file and line when known)."""

    def __init__(self, message: str, path: str | Path | None = None, line: int | None = None):
        self.path = None if path is None else str(path)
        self.line = line
        self.reason = message
        where = ""
        if self.path is not None:
            where = f"{self.path}:{line}: " if line is not None else f"{self.path}: "
        super().__init__(f"{where}{message}")


class Note(str):
    """Bad input that was tolerated, not refused: one line saying what was dropped or corrected (the text itself),
    with what it counts. ``kind`` names what happened (``judgments_unknown_document``: a short name, the same for
    every note of that kind), ``count`` how many items it concerns, ``ids`` the first of them.

    A ``str``, so anything that lists notes as lines (``Retriever.notes()``) can return one.
    """

    kind: str
    count: int
    ids: tuple[str, ...]

    def __new__(cls, text: str, kind: str, count: int, ids: Sequence[str] = ()) -> Note:
        note = super().__new__(cls, text)
        note.kind, note.count, note.ids = kind, int(count), tuple(str(i) for i in ids)
        return note

    def __getnewargs__(self) -> tuple[str, str, int, tuple[str, ...]]:  # pickles with what it counts
        return str(self), self.kind, self.count, self.ids
