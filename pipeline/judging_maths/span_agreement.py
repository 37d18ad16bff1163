"""Several assessors' highlights: how much they agree, character by character, and one set of spans per pair.

**Agreement.** Each assessor's evidence in a document is the characters they highlighted at the relevance level or
above. For every two assessors of a pair, ``A`` and ``B`` their evidence, the character-level F1 is
``2|A ∩ B| / (|A| + |B|)`` and the IoU (Jaccard) ``|A ∩ B| / |A ∪ B|``: the figures of span-extraction agreement
(Deleger et al. 2012 argue F1 for annotations with no fixed set of units, where kappa is ill-defined). Both are
micro-averaged (summed over every two assessors of every pair both judged, then divided), as scikit-learn's
``f1_score`` and ``jaccard_score`` compute them on the characters laid end to end (checked against them); the mean
IoU per pair says how alike a typical pair's highlights are. Kappa and alpha on each assessor's grade of the
document (the highest of their highlights, 0 for "not relevant") are :mod:`~pipeline.judging_maths.agreement`'s.

**Merging.** Character by character: each character gets, from each assessor of the pair, the grade of their
highlight covering it (the lowest grade where none does), and the rule (``majority`` or ``median``) merges those; a
character the rule leaves tied takes the lower or the higher grade (``ties``), or waits for a third assessor
(``adjudicated``: an adjudicated pair takes the adjudicators' spans). Consecutive characters of one grade above the
lowest make a span; the document's grade is its best span's (the lowest grade: not relevant). With two assessors and
``ties: lower`` the spans are the characters both highlighted, at the lower of their grades: never more evidence, nor
higher, than half of the assessors marked.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import combinations, pairwise

import numpy as np
import pandas as pd

from metrics.errors import InputError
from metrics.spans import Ranges, covered, merged, overlap
from pipeline.judging_maths.agreement import ADJUDICATED, HIGHER, KEY, LOWER, MAJORITY, RULES, TIES, candidates

SPAN_ROWS = ["query_id", "doc_id", "start", "end", "grade"]
MERGED_COLUMNS = [*KEY, "grade", "assessors", "tied", "adjudicated", "open"]
SHOWN = 3  # highlights shown per assessor in a disagreement's row


def _evidence(highlights: pd.DataFrame, level: int) -> dict[tuple[str, str], dict[str, Ranges]]:
    """(question, document) -> assessor -> the merged ranges they highlighted at ``level`` or above."""
    found: dict[tuple[str, str], dict[str, list[tuple[int, int]]]] = {}
    keep = highlights[highlights["grade"] >= level]
    for q, d, who, s, e in zip(keep["query_id"], keep["doc_id"], keep["assessor"], keep["start"], keep["end"]):
        found.setdefault((str(q), str(d)), {}).setdefault(str(who), []).append((int(s), int(e)))
    return {pair: {who: merged(r) for who, r in by.items()} for pair, by in found.items()}


def _judges(assessments: pd.DataFrame) -> dict[tuple[str, str], list[str]]:
    """(question, document) -> the assessors who judged it, in first-judged order."""
    out: dict[tuple[str, str], list[str]] = {}
    for q, d, who in zip(assessments["query_id"], assessments["doc_id"], assessments["assessor"]):
        names = out.setdefault((str(q), str(d)), [])
        if str(who) not in names:
            names.append(str(who))
    return out


def _shown(value: float) -> str:
    return "n/a" if np.isnan(value) else f"{value:.3f}"


@dataclass(frozen=True)
class SpanAgreement:
    """How alike several assessors' highlights are, character by character."""

    assessors: list[str]
    pairs: int  # (question, document) pairs judged by two assessors or more
    highlighted: int  # ... of which some assessor highlighted evidence in
    f1: float  # character-level F1, micro-averaged over every two assessors of every such pair (NaN: no evidence)
    iou: float  # character-level IoU (Jaccard), micro-averaged alike
    mean_iou: float  # the IoU of each highlighted pair (the mean over its every two assessors), averaged over pairs
    pairwise: dict[tuple[str, str], tuple[float, float]] = field(default_factory=dict)  # (F1, IoU) per two assessors
    disagreements: pd.DataFrame = field(default_factory=pd.DataFrame)  # query_id, doc_id, grades, iou, highlights

    def lines(self) -> list[str]:
        """What the terminal and the version's notes say."""
        if self.pairs == 0:
            return ["spans: no document judged by two assessors, no overlap to measure"]
        head = (f"spans: {self.pairs} document(s) judged by two or more, {self.highlighted} with a highlight; "
                f"character-level F1 {_shown(self.f1)}, IoU {_shown(self.iou)} (mean per document "
                f"{_shown(self.mean_iou)})")
        if len(self.assessors) > 2 and self.pairwise:
            head += "; per two assessors: " + ", ".join(f"{a}/{b} F1 {_shown(f)}" for (a, b), (f, _) in
                                                        self.pairwise.items())
        return [head, f"{len(self.disagreements)} document(s) graded or highlighted differently"]


def span_agreement(highlights: pd.DataFrame, assessments: pd.DataFrame, level: int = 1) -> SpanAgreement:
    """The agreement of the assessors of ``assessments`` (one grade per pair and assessor) on their ``highlights``
    (``HIGHLIGHT_COLUMNS`` of :mod:`~pipeline.judging_maths.spans`), evidence at ``level`` or above."""
    evidence = _evidence(highlights, level)
    judges = _judges(assessments)
    grades = {(str(q), str(d), str(w)): int(g) for q, d, w, g in zip(assessments["query_id"], assessments["doc_id"],
                                                                    assessments["assessor"], assessments["grade"])}
    names = list(dict.fromkeys(str(a) for a in assessments["assessor"]))
    inside = total = union = 0
    per_two: dict[tuple[str, str], list[int]] = {}
    ious, rows = [], []
    shared = highlighted = 0
    for pair, who in judges.items():
        if len(who) < 2:
            continue
        shared += 1
        found = evidence.get(pair, {})
        pair_ious = []
        for a, b in combinations(who, 2):
            ra, rb = found.get(a, []), found.get(b, [])
            both = overlap(ra, rb)
            size = covered(ra) + covered(rb)
            inside, total, union = inside + both, total + size, union + size - both
            key = (a, b) if names.index(a) < names.index(b) else (b, a)
            counts = per_two.setdefault(key, [0, 0, 0])
            counts[0], counts[1], counts[2] = counts[0] + both, counts[1] + size, counts[2] + size - both
            if size:
                pair_ious.append(both / (size - both))
        if found:
            highlighted += 1
            ious.append(float(np.mean(pair_ious)) if pair_ious else 1.0)
        given = [grades[(*pair, w)] for w in who]
        alike = len(set(given)) == 1 and len({tuple(found.get(w, [])) for w in who}) == 1
        if not alike:
            rows.append((*pair, ", ".join(f"{w}={g}" for w, g in zip(who, given)),
                         float(np.mean(pair_ious)) if pair_ious else float("nan"),
                         "; ".join(f"{w}={_ranges(found.get(w, []))}" for w in who)))
    f1 = 2 * inside / total if total else float("nan")
    iou = inside / union if union else float("nan")
    pairwise = {k: (2 * c[0] / c[1] if c[1] else float("nan"), c[0] / c[2] if c[2] else float("nan"))
                for k, c in per_two.items()}
    table = pd.DataFrame(rows, columns=[*KEY, "grades", "iou", "highlights"])
    table = table.sort_values("iou", kind="stable", na_position="first").reset_index(drop=True)
    return SpanAgreement(names, shared, highlighted, f1, iou, float(np.mean(ious)) if ious else float("nan"),
                         pairwise, table)


def _ranges(ranges: Ranges) -> str:
    if not ranges:
        return "none"
    shown = " ".join(f"{s}:{e}" for s, e in ranges[:SHOWN])
    return shown + (f" (+{len(ranges) - SHOWN})" if len(ranges) > SHOWN else "")


def _graded(highlights: pd.DataFrame) -> dict[tuple[str, str], dict[str, list[tuple[int, int, int]]]]:
    out: dict[tuple[str, str], dict[str, list[tuple[int, int, int]]]] = {}
    for q, d, w, s, e, g in zip(highlights["query_id"], highlights["doc_id"], highlights["assessor"],
                                highlights["start"], highlights["end"], highlights["grade"]):
        out.setdefault((str(q), str(d)), {}).setdefault(str(w), []).append((int(s), int(e), int(g)))
    return out


def _merge_pair(ranges: dict[str, list[tuple[int, int, int]]], who: list[str], rule: str, ties: str, low: int
                ) -> tuple[list[tuple[int, int, int]], bool]:
    """One pair's merged spans (start, end, grade) and whether the rule left any character tied."""
    cuts = sorted({p for spans in ranges.values() for s, e, _ in spans for p in (s, e)})
    out: list[tuple[int, int, int]] = []
    tied = False
    for left, right in pairwise(cuts):
        given = np.sort(np.array([next((g for s, e, g in ranges.get(w, []) if s <= left and right <= e), low)
                                  for w in who], dtype=np.int64))
        if (given == low).all():
            continue
        found = candidates(given, rule)
        tied = tied or len(found) > 1
        grade = int(found[-1] if ties == HIGHER else found[0])
        if grade <= low:
            continue
        if out and out[-1][1] == left and out[-1][2] == grade:
            out[-1] = (out[-1][0], right, grade)
        else:
            out.append((left, right, grade))
    return out, tied


def merge_spans(highlights: pd.DataFrame, assessments: pd.DataFrame, rule: str = MAJORITY, ties: str = LOWER,
                low: int = 0, adjudicated: tuple[pd.DataFrame, pd.DataFrame] | None = None
                ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One set of spans per pair, merged character by character (see the module), and each pair's grade (its best
    span's; ``low`` without one). ``adjudicated``: a third assessor's (highlights, assessments), which settle a tied
    pair they judged. Returns the pairs (``MERGED_COLUMNS``, as :func:`~pipeline.judging_maths.agreement.merge`) and
    the spans (``SPAN_ROWS``), pairs in first-judged order."""
    if rule not in RULES:
        raise InputError(f"merge rule {rule!r}: expected one of {', '.join(RULES)}")
    if ties not in TIES:
        raise InputError(f"ties {ties!r}: expected one of {', '.join(TIES)}")
    graded = _graded(highlights)
    settled: dict[tuple[str, str], list[tuple[int, int, int]]] = {}
    if adjudicated is not None and len(adjudicated[1]):
        round_graded, round_judges = _graded(adjudicated[0]), _judges(adjudicated[1])
        for pair, who in round_judges.items():
            settled[pair] = _merge_pair(round_graded.get(pair, {}), who, rule, LOWER, low)[0]
    rows, spans = [], []
    for pair, who in _judges(assessments).items():
        found, tied = _merge_pair(graded.get(pair, {}), who, rule, LOWER if ties == ADJUDICATED else ties, low)
        settles = tied and pair in settled
        if settles:
            found = settled[pair]
        spans.extend((*pair, s, e, g) for s, e, g in found)
        rows.append((*pair, max((g for _, _, g in found), default=low), len(who), tied, settles,
                     tied and not settles and ties == ADJUDICATED))
    return (pd.DataFrame(rows, columns=MERGED_COLUMNS),
            pd.DataFrame(spans, columns=SPAN_ROWS).astype({"start": "int64", "end": "int64", "grade": "int64"}))


def tied_span_pairs(highlights: pd.DataFrame, assessments: pd.DataFrame, rule: str = MAJORITY, low: int = 0
                    ) -> list[tuple[str, str]]:
    """The pairs whose characters the rule leaves tied somewhere: what an adjudication round asks a third assessor
    to settle."""
    merged_pairs, _ = merge_spans(highlights, assessments, rule, LOWER, low)
    return [(q, d) for q, d, t in zip(merged_pairs["query_id"], merged_pairs["doc_id"], merged_pairs["tied"]) if t]


def by_assessor(highlights: pd.DataFrame, pairs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """Each pair's highlights, by assessor, as a line (``ann=12:40 (2); bob=none``)."""
    graded = _graded(highlights)
    return {pair: "; ".join(f"{w}=" + " ".join(f"{s}:{e} ({g})" for s, e, g in r) for w, r in graded.get(pair, {})
                            .items()) for pair in pairs}
