"""What a collection's grades mean: a mapping from the grades its judgments hold to the gains rankscope measures
with (``corpus.grades``), and how negative grades are read (``corpus.negative_grades``). Applied once, where every
route assembles its Collection (:mod:`pipeline.data.assemble`), so the judgments' digest is that of the gains measured.

Cranfield's judgments hold relevance codes, 1 a complete answer to 4 of minimum interest: read as gains, the least
useful document would gain four times the best one. ``grades: {1: 4, 2: 3, 3: 2, 4: 1, -1: -1}`` makes them gains.

A negative grade is trec_eval's "in the pool, not judged" by default (``unjudged``): never relevant, and neither judged
(judged@k) nor judged non-relevant (bpref). ``nonrelevant`` reads it as a judged non-relevant document (grade 0).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from metrics.errors import InputError
from metrics.qrels import Qrels
from metrics.spans import Spans

UNJUDGED = "unjudged"
NONRELEVANT = "nonrelevant"
NEGATIVE_READINGS = (UNJUDGED, NONRELEVANT)
GRADES_KEY = "corpus.grades"
NEGATIVE_KEY = "corpus.negative_grades"
RECORDED = ("grades", "negative_grades")  # what a Collection's origin says of its grading, when it has one


def _integer(value: Any) -> int | None:
    """An integer as config gives it (``4``, ``"4"``, ``-1``, ``"-1"``), or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return None
    return None


def gain_table(grades: Mapping[Any, Any] | None) -> dict[int, int] | None:
    """``grades`` as ``{grade: gain}``, integers both; one line naming the key otherwise."""
    if grades is None:
        return None
    if not isinstance(grades, Mapping):
        raise InputError(f"{GRADES_KEY}: expected a mapping of grade to gain, e.g. {{1: 4, 2: 3, 3: 2, 4: 1}}; got "
                         f"{grades!r}")
    table: dict[int, int] = {}
    for grade, gain in grades.items():
        g, v = _integer(grade), _integer(gain)
        if g is None or v is None:
            raise InputError(f"{GRADES_KEY}: grades and gains are integers; got {grade!r}: {gain!r}")
        if g in table:
            raise InputError(f"{GRADES_KEY}: grade {g} is mapped twice")
        table[g] = v
    if not table:
        raise InputError(f"{GRADES_KEY}: the mapping is empty (null reads the grades as they are)")
    return table


@dataclass(frozen=True)
class Grading:
    """How a source's grades become the gains measured: ``table`` maps every grade found (None: as they are), then
    ``negative`` reads what is still negative (``unjudged``, as trec_eval; or ``nonrelevant``: grade 0)."""

    table: dict[int, int] | None = None
    negative: str = UNJUDGED

    @classmethod
    def of(cls, grades: Mapping[Any, Any] | None, negative: str = UNJUDGED) -> Grading:
        """From a source's settings, checked (a bad one is one line naming its key)."""
        if negative not in NEGATIVE_READINGS:
            raise InputError(f"{NEGATIVE_KEY}={negative}: expected {' or '.join(NEGATIVE_READINGS)}")
        return cls(gain_table(grades), negative)

    @property
    def plain(self) -> bool:
        """Grades read as they are: nothing to do."""
        return self.table is None and self.negative == UNJUDGED

    def apply(self, qrels: Qrels, where: str) -> Qrels:
        """The judgments with their grades mapped; a grade the table does not name is one line (every grade must
        have a gain: one left as it is would be measured as a gain nobody chose)."""
        grades = self.mapped(qrels.grades, where)
        if grades is qrels.grades:
            return qrels
        return Qrels(qrels.query_ids, qrels.doc_ids, grades)

    def apply_spans(self, spans: Spans, where: str) -> Spans:
        """Span judgments with their grades mapped as :meth:`apply` maps a document's."""
        grades = self.mapped(spans.grades, where)
        return spans if grades is spans.grades else dataclasses.replace(spans, grades=grades)

    def mapped(self, grades: np.ndarray, where: str) -> np.ndarray:
        """Grades as gains (the same array when nothing changes)."""
        if self.table is not None and len(grades):
            found = np.unique(grades)
            unmapped = [int(g) for g in found if int(g) not in self.table]
            if unmapped:
                counts = ", ".join(f"{g} ({int((grades == g).sum())} judgment(s))" for g in unmapped)
                raise InputError(f"{GRADES_KEY}={{{describe(self.table, ', ', ': ')}}} gives no gain for grade(s) "
                                 f"{counts} of {where}: map each grade found "
                                 f"({', '.join(str(int(g)) for g in found)})")
            keys = np.array(list(self.table), dtype=np.int64)
            gains = np.array(list(self.table.values()), dtype=np.int64)
            order = np.argsort(keys)
            grades = gains[order][np.searchsorted(keys[order], grades)]
        if self.negative == NONRELEVANT:
            grades = np.where(grades < 0, 0, grades)
        return grades

    def record(self) -> dict[str, str]:
        """What a Collection's ``origin`` says of it (nothing when the grades are read as they are)."""
        found = {}
        if self.table is not None:
            found[RECORDED[0]] = describe(self.table)
        if self.negative != UNJUDGED:
            found[RECORDED[1]] = self.negative
        return found


def recorded(origin: Mapping[str, str]) -> str:
    """A Collection's grading in one line (``grades=1:4 2:3 3:2 4:1 -1:-1``), or '' when its grades are as read:
    the tag that says why its judgments' digest is not that of the file (the digest is of the gains measured)."""
    return "; ".join(f"{key}={origin[key]}" for key in RECORDED if key in origin)


def describe(table: Mapping[int, int], between: str = " ", within: str = ":") -> str:
    """``1:4 2:3 3:2 4:1 -1:-1``: a mapping in one short line (a tag, a message)."""
    return between.join(f"{grade}{within}{gain}" for grade, gain in table.items())


class Graded:
    """What every corpus source shares: its ``grades`` and ``negative_grades`` settings (fields each source's
    dataclass declares), checked when the source is made and read as a :class:`Grading`."""

    grades: dict[int, int] | None
    negative_grades: str

    def __post_init__(self) -> None:
        self.grading  # noqa: B018 (checked at construction: a bad setting is one line before any data is read)

    @property
    def grading(self) -> Grading:
        return Grading.of(self.grades, self.negative_grades)
