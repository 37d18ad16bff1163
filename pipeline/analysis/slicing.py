"""Which slice of the questions each question is in (``metrics.slices``): a question field's value as it is, or,
for a number with many values, its tercile; a question without the value in a slice of its own.

- **A field's values** become the slices: ``team`` gives ``billing``, ``data`` ... A number with at most
  :data:`MAX_SLICES` distinct values keeps them (``priority`` 1 to 5); one with more is binned into terciles by value
  (:func:`terciles`), and the binning is said in one line. Text with more distinct values than that is no slicing:
  refused in one line.
- **question_length** is built in: the question's length in word tokens (runs of letters and digits, stop words
  kept: the same count whatever tokenizer a retriever uses), always in terciles.
- **A missing value** (an empty cell, a trace without the tag) is the slice :data:`MISSING`, counted like the others.

The slice each question is in is a label (``billing``, ``8-11``): the per-question table's ``slice:<field>`` column
holds it, so every per-slice figure is a group-by of that table. Pure: lists and numbers in, labels out.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from metrics.errors import InputError

QUESTION_LENGTH = "question_length"  # built in: the question's length in word tokens
MISSING = "(missing)"  # the slice of the questions without a value
MAX_SLICES = 20  # a field with more distinct values: a number is binned into terciles, text is refused
BINS = 3  # terciles
_WORD = re.compile(r"\w+")
_RANGE = re.compile(r"^(-?\d+(?:\.\d+)?(?:e[-+]?\d+)?)(?:(?:-| to )(-?\d+(?:\.\d+)?(?:e[-+]?\d+)?))?$")


def question_length(text: str) -> int:
    """The question's length in word tokens: runs of letters and digits (``\\w+``), stop words kept."""
    return len(_WORD.findall(text))


def missing(value: object) -> bool:
    """An absent value: None, NaN, an empty or blank text."""
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    return isinstance(value, str) and not value.strip()


def as_number(value: object) -> float | None:
    """The value as a finite number (a number, or a text that reads as one), else None; booleans are not numbers."""
    if isinstance(value, bool | np.bool_):
        return None
    if isinstance(value, int | float | np.integer | np.floating):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
    else:
        return None
    return number if math.isfinite(number) else None


def number_text(value: float) -> str:
    """``7``, ``0.25``, ``1.2e+06``: a whole number without decimals, else three significant digits."""
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 else f"{value:.3g}"


def range_text(low: float, high: float) -> str:
    """``8-11``; ``7`` when both ends are one value; ``-3 to -1`` when the range starts below zero."""
    if low == high:
        return number_text(low)
    joiner = " to " if low < 0 else "-"
    return f"{number_text(low)}{joiner}{number_text(high)}"


@dataclass(frozen=True)
class Slicing:
    """How a field slices the questions: each question's slice (aligned with the values given), the slices in the
    order they are shown, and how the values were binned (None: the values are the slices)."""

    name: str
    labels: list[str]
    order: list[str]
    binned: str | None = None

    def counts(self) -> dict[str, int]:
        """Questions per slice, in order."""
        found = {label: 0 for label in self.order}
        for label in self.labels:
            found[label] += 1
        return found


def terciles(values: np.ndarray) -> tuple[np.ndarray, list[tuple[float, float]]]:
    """Each value's tercile (0, 1 or 2) and each tercile's (smallest, largest) value: cut at the 1/3 and 2/3
    quantiles (numpy's linear rule), a value equal to a cut in the lower tercile, so equal values always share one;
    a tercile left empty by ties is dropped (the others numbered on)."""
    cuts = np.quantile(values, [1 / 3, 2 / 3])
    which = np.searchsorted(cuts, values, side="left")  # value <= cut 1: 0; <= cut 2: 1; beyond: 2
    used = sorted(set(which.tolist()))
    renumbered = np.searchsorted(np.array(used), which)
    spans = [(float(values[renumbered == k].min()), float(values[renumbered == k].max())) for k in range(len(used))]
    return renumbered, spans


def slicing(name: str, values: Sequence[object], binned_always: bool = False, unit: str = "") -> Slicing:
    """The slices of ``values`` (one per question): see the module's docstring. ``binned_always``: terciles whatever
    the number of values (``question_length``); ``unit``: what the numbers count, for the binning's line. A text
    field with more than :data:`MAX_SLICES` distinct values is an InputError."""
    absent = [missing(v) for v in values]
    present = [v for v, gone in zip(values, absent) if not gone]
    numbers = [as_number(v) for v in present]
    numeric = bool(present) and all(n is not None for n in numbers)
    distinct = len({str(v).strip() for v in present}) if not numeric else len(set(numbers))
    if numeric and (binned_always or distinct > MAX_SLICES):
        array = np.array(numbers, dtype=np.float64)
        which, spans = terciles(array)
        names = [range_text(low, high) for low, high in spans]
        labels_present = iter([names[k] for k in which])
        labels = [MISSING if gone else next(labels_present) for gone in absent]
        said = f" {unit}" if unit else ""
        binned = (f"{name} ({distinct} distinct values) binned into {len(names)} slices by value, at its terciles: "
                  f"{', '.join(names)}{said}")
        return Slicing(name, labels, [*names, *([MISSING] if any(absent) else [])], binned)
    if not numeric and distinct > MAX_SLICES:
        raise InputError(f"metrics.slices: {name} has {distinct} distinct values among {len(values)} questions: too "
                         f"many to slice by (at most {MAX_SLICES}; a numeric field is binned into terciles)")
    labels = [MISSING if gone else (number_text(as_number(v)) if numeric else str(v).strip())
              for v, gone in zip(values, absent)]
    return Slicing(name, labels, ordered(labels))


def sort_key(label: str) -> tuple[int, float, str]:
    """Slices in reading order: numbers and ranges by their first value, then text (case aside), :data:`MISSING`
    last."""
    if label == MISSING:
        return (2, 0.0, "")
    found = _RANGE.match(label)
    if found:
        return (0, float(found.group(1)), label)
    return (1, 0.0, label.casefold())


def ordered(labels: Iterable[str]) -> list[str]:
    """The distinct labels in reading order (:func:`sort_key`)."""
    return sorted(set(labels), key=sort_key)


def one_question(slicing: Slicing) -> list[str]:
    """The slices that hold a single question: shown, never tested."""
    return [label for label, n in slicing.counts().items() if n == 1]
