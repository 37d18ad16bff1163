"""A graded relevance scale: its grades, lowest first, each with the meaning assessors read."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from metrics.errors import InputError

# TREC Deep Learning's four grades, worded for a question answered from documents
DEFAULT_MEANINGS = {
    0: "not relevant: nothing in it helps answer the question",
    1: "related: on the topic, but it does not answer the question",
    2: "relevant: it answers part of the question",
    3: "highly relevant: it answers the question fully",
}


@dataclass(frozen=True)
class Scale:
    """Integer grades from ``low`` to ``high``, each with a meaning (shown to assessors)."""

    meanings: tuple[tuple[int, str], ...]

    @classmethod
    def of(cls, meanings: Mapping[int | str, str] | None = None) -> Scale:
        """A scale from ``{grade: meaning}`` (keys may be texts of integers, as YAML gives them); consecutive grades
        from the lowest, at least two."""
        given = DEFAULT_MEANINGS if meanings is None else meanings
        try:
            grades = {int(k): str(v) for k, v in given.items()}
        except (TypeError, ValueError):
            raise InputError(f"scale: grades must be integers, got {', '.join(map(str, given))}") from None
        ordered = sorted(grades)
        if len(ordered) < 2 or ordered != list(range(ordered[0], ordered[0] + len(ordered))):
            raise InputError(f"scale: expected at least two consecutive integer grades, got {ordered}")
        if ordered[0] < 0:
            raise InputError(f"scale: grades start at 0 or above (a negative grade means 'not judged' in TREC "
                             f"qrels), got {ordered[0]}")
        return cls(tuple((g, grades[g]) for g in ordered))

    @property
    def grades(self) -> list[int]:
        return [g for g, _ in self.meanings]

    @property
    def low(self) -> int:
        return self.meanings[0][0]

    @property
    def high(self) -> int:
        return self.meanings[-1][0]

    def meaning(self, grade: int) -> str:
        return dict(self.meanings)[grade]

    def check(self, value: object, where: str = "") -> int:
        """``value`` as a grade of this scale; an InputError naming ``where`` (a file's line, a task) otherwise."""
        text = str(value).strip()
        try:
            grade = int(text)
        except ValueError:
            try:
                number = float(text)
            except ValueError:
                number = float("nan")
            if not number.is_integer():
                raise InputError(f"{where}grade {text!r} is not an integer of the scale {self.low}-{self.high}"
                                 ) from None
            grade = int(number)
        if not self.low <= grade <= self.high:
            raise InputError(f"{where}grade {grade} is outside the scale {self.low}-{self.high}")
        return grade

    def describe(self) -> str:
        """``0 not relevant ...; 1 related ...``: one line."""
        return "; ".join(f"{g} {m}" for g, m in self.meanings)
