"""Metric specs: declared once, parsed from one string form used everywhere (config, CLI, tables, MLflow)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from metrics.errors import InputError

# measure -> (cutoff: "required", "optional" or None, trec_eval's name pattern, or None when trec_eval has none)
MEASURES: dict[str, tuple[str | None, str | None]] = {
    "hit_rate": ("required", "success_{k}"),
    "recall": ("required", "recall_{k}"),
    "precision": ("required", "P_{k}"),
    "ndcg": ("optional", "ndcg_cut_{k}"),
    "mrr": (None, "recip_rank"),
    "map": (None, "map"),
    "r_precision": (None, "Rprec"),
    "bpref": (None, "bpref"),  # trec_eval's bpref: judged relevant above judged non-relevant, unjudged ignored
    "judged": ("required", None),  # ir_measures' Judged@k: the share of the top k that is judged
    # measures of a ranking of chunks against span judgments (metrics.context): at k chunks, or at a token budget
    "span_recall": ("required", None),
    "span_precision": ("required", None),
    "span_iou": ("required", None),
    "span_precision_omega": (None, None),  # the chunking's ceiling: no cutoff
}

OMEGA = "span_precision_omega"  # the one that reads the whole chunking, not the ranking
SPAN_MEASURES = frozenset({"span_recall", "span_precision", "span_iou", OMEGA})
# measures that also take a token budget (``recall@512tok``): the chunks fed until the budget is used
BUDGET_MEASURES = ("recall", "hit_rate", "ndcg", "span_recall", "span_precision", "span_iou")
TOKENS = "tok"  # the unit of a budget: ``recall@512tok``

ALIASES = {"success": "hit_rate", "hit": "hit_rate", "p": "precision", "rr": "mrr", "ap": "map", "rprec": "r_precision"}

# trec_eval names and families -> rankscope measure
TREC_NAMES = {
    "success": "hit_rate",
    "recall": "recall",
    "P": "precision",
    "ndcg_cut": "ndcg",
    "recip_rank": "mrr",
    "map": "map",
    "ndcg": "ndcg",
    "Rprec": "r_precision",
    "bpref": "bpref",
}

# trec_eval's default cutoffs for each family, used when a family is named without any
TREC_DEFAULT_CUTOFFS = {
    "success": (1, 5, 10),
    "recall": (5, 10, 15, 20, 30, 100, 200, 500, 1000),
    "P": (5, 10, 15, 20, 30, 100, 200, 500, 1000),
    "ndcg_cut": (5, 10, 15, 20, 30, 100, 200, 500, 1000),
}

_SPEC = re.compile(r"^([a-z_]+)(?:@(\d+)(tok)?)?$")


@dataclass(frozen=True, order=True)
class MetricSpec:
    """One metric at one cutoff, e.g. ``ndcg@5`` or ``mrr`` (no cutoff: the whole ranking); with ``unit`` "tok" the
    cutoff is a token budget (``recall@512tok``: the chunks fed until 512 tokens are used)."""

    measure: str
    k: int | None = None
    unit: str = ""

    @property
    def name(self) -> str:
        """The name used in code and tables: ``ndcg@5``, ``recall@512tok``."""
        return self.measure if self.k is None else f"{self.measure}@{self.k}{self.unit}"

    @property
    def needs_chunks(self) -> bool:
        """Whether it reads a ranking of chunks (a span measure, or any measure at a token budget)."""
        return self.unit == TOKENS or self.measure in SPAN_MEASURES

    @property
    def mlflow_key(self) -> str:
        """MLflow forbids ``@``: ``ndcg@5`` is logged as ``ndcg_at_5``, ``recall@512tok`` as ``recall_at_512tok``."""
        return self.name.replace("@", "_at_")

    @property
    def trec_name(self) -> str:
        """trec_eval's name (``ndcg_cut_5``); a measure trec_eval lacks (``judged@10``) keeps its own."""
        pattern = MEASURES[self.measure][1]
        if pattern is None or self.unit:
            return self.name
        if self.k is None:
            return "ndcg" if self.measure == "ndcg" else pattern
        return pattern.format(k=self.k)

    def __str__(self) -> str:
        return self.name


def parse_metric(text: str) -> MetricSpec:
    """Parse ``ndcg@5``, ``hit_rate@3``, ``mrr`` ... into a MetricSpec; unknown names fail plainly."""
    m = _SPEC.match(str(text).strip().lower())
    if not m:
        raise InputError(f"cannot read metric {text!r}: expected a name such as 'ndcg@5', 'recall@10' or 'mrr'")
    measure, k, unit = ALIASES.get(m.group(1), m.group(1)), m.group(2), m.group(3) or ""
    if measure not in MEASURES:
        raise InputError(f"unknown metric {text!r}; known: {', '.join(sorted(MEASURES))}")
    if unit:
        if measure not in BUDGET_MEASURES:
            raise InputError(f"metric {text!r}: {measure} takes no token budget; these do: "
                             f"{', '.join(BUDGET_MEASURES)}")
        if int(k) < 1:
            raise InputError(f"metric {text!r}: the token budget must be positive")
        return MetricSpec(measure, int(k), unit)
    cutoff = MEASURES[measure][0]
    if k is None and cutoff == "required":
        raise InputError(f"metric {text!r} needs a cutoff, e.g. '{measure}@5'")
    if k is not None and cutoff is None:
        raise InputError(f"metric {measure!r} takes no cutoff (it reads the whole ranking)")
    if k is not None and int(k) < 1:
        raise InputError(f"metric {text!r}: the cutoff must be at least 1")
    return MetricSpec(measure, None if k is None else int(k))


def parse_metrics(texts: list[str] | tuple[str, ...] | str) -> list[MetricSpec]:
    """Parse several specs (a list, or one comma-separated string), keeping order, dropping repeats."""
    if isinstance(texts, str):
        texts = [t for t in texts.split(",") if t.strip()]
    return list(dict.fromkeys(parse_metric(t) for t in texts))


def metrics_at(cutoffs: list[int], measures: list[str]) -> list[MetricSpec]:
    """Specs for each measure at each cutoff (cutoff-free measures once): the config's ``metrics.k`` form."""
    out: list[MetricSpec] = []
    for measure in measures:
        measure = ALIASES.get(measure, measure)
        if measure not in MEASURES:
            raise InputError(f"unknown metric {measure!r}; known: {', '.join(sorted(MEASURES))}")
        if MEASURES[measure][0] is None:
            out.append(MetricSpec(measure))
        else:
            out.extend(MetricSpec(measure, int(k)) for k in cutoffs)
    return list(dict.fromkeys(out))


def trec_form(text: str) -> tuple[str, str | None] | None:
    """``(family, cutoffs)`` when ``text`` is one of trec_eval's measure forms (``P_5``, ``P.5,10``, ``ndcg_cut``,
    ``map``), ``cutoffs`` being None when none is given; None when it is not a trec_eval name."""
    text = text.strip()
    family, dot, cutoffs = text.partition(".")
    if dot:
        return (family, cutoffs) if family in TREC_NAMES else None
    m = re.match(r"^(.*)_(\d+)$", text)
    if m and m.group(1) in TREC_DEFAULT_CUTOFFS:
        return m.group(1), m.group(2)
    return (text, None) if text in TREC_NAMES else None


def parse_trec_measure(text: str) -> list[MetricSpec]:
    """trec_eval's ``-m`` forms: ``P_5``, ``P.5,10``, ``ndcg_cut`` (default cutoffs), ``map``, ``recip_rank``;
    anything else is read as rankscope names (``ndcg@5``, ``mrr``). Cutoffs come out ascending, without repeats."""
    form = trec_form(text)
    if form is None:
        return parse_metrics(text)
    family, cutoffs = form
    measure = TREC_NAMES[family]
    if family not in TREC_DEFAULT_CUTOFFS:
        if cutoffs is not None:
            raise InputError(f"trec_eval measure {family!r} takes no cutoff")
        return [MetricSpec(measure)]
    if cutoffs is None:
        return [MetricSpec(measure, k) for k in TREC_DEFAULT_CUTOFFS[family]]
    parts = cutoffs.split(",")
    if not all(p.isascii() and p.isdigit() and int(p) >= 1 for p in parts):
        raise InputError(f"cannot read the cutoffs of {text.strip()!r}: expected positive integers, "
                         f"e.g. '{family}.5,10'")
    return [MetricSpec(measure, k) for k in sorted({int(p) for p in parts})]
