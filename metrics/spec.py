"""Metric specs: declared once, parsed from one string form used everywhere (config, CLI, tables, MLflow)."""

from __future__ import annotations

import math
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
        if self.k is not None and self.measure in FRACTION_MEASURES:
            return f"{self.measure}@{fraction(self.k)}"
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
        if self.measure in FRACTION_MEASURES:  # trec_eval prints a persistence as given (rbp_p=0.8)
            defaults, printed = FRACTION_MEASURES[self.measure]
            return printed.format(k=fraction(self.k) if defaults else f"{self.k / 100:g}")
        return pattern.format(k=self.k)

    def __str__(self) -> str:
        return self.name


def parse_metric(text: str) -> MetricSpec:
    """Parse ``ndcg@5``, ``hit_rate@3``, ``mrr`` ... into a MetricSpec; unknown names fail plainly."""
    extra = parse_fraction_metric(text)
    if extra is not None:
        return extra
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
        if measure in FRACTION_MEASURES and FRACTION_MEASURES[measure][0] is not None:  # at trec_eval's defaults
            out.extend(MetricSpec(measure, hundredths(v)) for v in FRACTION_MEASURES[measure][0])
            continue
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
    extra = trec_fraction_form(text)
    if extra is not None:
        return extra
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
    if measure in FRACTION_MEASURES:
        return parse_trec_fractions(text, measure, cutoffs)
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


# --- trec_eval 10.0's other all_trec measures (issue 47): metrics/trec_measures.py computes them ------------------
# A rankscope name is trec_eval's in lower case (infAP is infap, binG bing, relative_P_5 relative_p@5); a measure
# whose parameter is a fraction (a recall level, a multiple of R, rbp's persistence) writes it after '@'
# (iprec_at_recall@0.10, rbp@0.80), kept in hundredths as the spec's k. The counts are metrics too: a job's mean number
# per question.
IPREC_LEVELS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)  # m_iprec_at_recall.c's defaults
RPREC_MULTIPLES = (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0)  # m_Rprec_mult.c's
RBP_PERSISTENCE = 0.9  # m_rbp.c's default p, the one trec_eval 10.0's all_trec prints (its test suite's out.test.a)
TREC_MEASURES: dict[str, tuple[str | None, str | None]] = {
    "num_ret": (None, "num_ret"),
    "num_rel": (None, "num_rel"),
    "num_rel_ret": (None, "num_rel_ret"),
    "num_nonrel_judged_ret": (None, "num_nonrel_judged_ret"),
    "gm_map": (None, "gm_map"),  # a job's gm_map is exp(mean of log(max(AP, 1e-5))), as trec_eval's
    "gm_bpref": (None, "gm_bpref"),
    "infap": (None, "infAP"),
    "iprec_at_recall": ("fraction", "iprec_at_recall"),
    "11pt_avg": (None, "11pt_avg"),
    "rprec_mult": ("fraction", "Rprec_mult"),
    "utility": (None, "utility"),
    "bing": (None, "binG"),
    "g": (None, "G"),
    "ndcg_rel": (None, "ndcg_rel"),
    "rndcg": (None, "Rndcg"),
    "map_cut": ("required", "map_cut_{k}"),
    "relative_p": ("required", "relative_P_{k}"),
    "set_p": (None, "set_P"),
    "set_relative_p": (None, "set_relative_P"),
    "set_recall": (None, "set_recall"),
    "set_map": (None, "set_map"),
    "set_f": (None, "set_F"),
    "rbp": (None, "rbp"),  # persistence 0.9 unless given: rbp@0.80
    "rbp_resid": (None, "rbp_resid"),
    "unj": ("required", "unj_{k}"),
}
MEASURES.update(TREC_MEASURES)
# measure -> (trec_eval's default values, or None when it has one default: rbp's persistence; the printed name)
FRACTION_MEASURES: dict[str, tuple[tuple[float, ...] | None, str]] = {
    "iprec_at_recall": (IPREC_LEVELS, "iprec_at_recall_{k}"),
    "rprec_mult": (RPREC_MULTIPLES, "Rprec_mult_{k}"),
    "rbp": (None, "rbp_p={k}"),
    "rbp_resid": (None, "rbp_resid_p={k}"),
}
GEOMETRIC = frozenset({"gm_map", "gm_bpref"})  # per question the log; the figure is exp of their mean
ALIASES.update({"infap": "infap", "iprec": "iprec_at_recall", "rprec_multiple": "rprec_mult", "bin_g": "bing",
                "relative_precision": "relative_p", "set_precision": "set_p",
                "set_relative_precision": "set_relative_p",
                "rbp_residual": "rbp_resid", "unjudged": "unj"})
TREC_NAMES.update({pattern.split("_{")[0]: measure for measure, (_, pattern) in TREC_MEASURES.items()
                   if pattern is not None and not measure.startswith("num_")})
TREC_DEFAULT_CUTOFFS.update({"map_cut": TREC_DEFAULT_CUTOFFS["P"], "relative_P": TREC_DEFAULT_CUTOFFS["P"],
                             "unj": (5, 10, 20)})
_FRACTION_SPEC = re.compile(r"^([a-z0-9_]+)(?:@(\d*\.?\d+))?$")
_TREC_FRACTION = re.compile(r"^(iprec_at_recall|Rprec_mult)_(\d*\.\d+)$")
_TREC_PERSISTENCE = re.compile(r"^(rbp|rbp_resid)_(p=.+)$")  # the name trec_eval prints for rbp.p=0.8


def hundredths(value: float | str) -> int:
    """A fraction as the whole number of hundredths a spec keeps; one finer than that is refused."""
    number = float(value)
    kept = round(number * 100)
    if not math.isfinite(number) or abs(number * 100 - kept) > 1e-6:
        raise InputError(f"{value!r}: give at most two decimals")
    return kept


def fraction(k: int) -> str:
    """The fraction a spec keeps in hundredths, as its name shows it: 0.10, 0.80, 2.00."""
    return f"{k / 100:.2f}"


def parse_fraction_metric(text: str) -> MetricSpec | None:
    """``iprec_at_recall@0.10``, ``rprec_mult@1.20``, ``rbp``, ``rbp@0.80``, ``11pt_avg``: a spec; None for any
    other name (read by :func:`parse_metric`)."""
    m = _FRACTION_SPEC.match(str(text).strip().lower())
    if not m:
        return None
    measure = ALIASES.get(m.group(1), m.group(1))
    if measure == "11pt_avg" and m.group(2) is None:
        return MetricSpec(measure)
    if measure not in FRACTION_MEASURES:
        return None
    defaults, _ = FRACTION_MEASURES[measure]
    if m.group(2) is None:
        if defaults is not None:
            example = f"{measure}@{defaults[1]:.2f}"
            raise InputError(f"metric {text!r} needs a value, e.g. '{example}' (trec_eval's: "
                             f"{', '.join(f'{v:.2f}' for v in defaults)})")
        return MetricSpec(measure)
    try:
        k = hundredths(m.group(2))
    except InputError as err:
        raise InputError(f"metric {text!r}: {err}") from None
    if measure.startswith("rbp"):
        if not 0 < k < 100:
            raise InputError(f"metric {text!r}: rbp's persistence is between 0 and 1, e.g. '{measure}@0.80'")
        return MetricSpec(measure, None if k == hundredths(RBP_PERSISTENCE) else k)
    return MetricSpec(measure, k)


def trec_fraction_form(text: str) -> tuple[str, str | None] | None:
    """trec_eval's forms of the fraction measures (``iprec_at_recall_0.10``, ``iprec_at_recall.0.1,0.5``,
    ``Rprec_mult``, ``rbp``, ``rbp.p=0.8``, ``rbp_p=0.8``) as ``(family, values)``; None for any other text."""
    m = _TREC_FRACTION.match(text) or _TREC_PERSISTENCE.match(text)
    if m:
        return m.group(1), m.group(2)
    family, dot, values = text.partition(".")
    if family in ("iprec_at_recall", "Rprec_mult", "rbp", "rbp_resid"):
        return family, values if dot else None
    return None


def parse_trec_fractions(text: str, measure: str, values: str | None) -> list[MetricSpec]:
    """The specs of a fraction measure's trec_eval form: trec_eval's defaults when no value is given."""
    defaults, _ = FRACTION_MEASURES[measure]
    if values is None:
        return [MetricSpec(measure)] if defaults is None else [MetricSpec(measure, hundredths(v)) for v in defaults]
    if defaults is None:  # rbp.p=0.8
        name, equals, value = values.partition("=")
        if name != "p" or not equals:
            raise InputError(f"cannot read {text.strip()!r}: rankscope takes rbp's persistence only, e.g. "
                             f"'{measure.replace('_resid', '')}.p=0.8'")
        return [parse_metric(f"{measure}@{value}")]
    try:
        return [MetricSpec(measure, k) for k in sorted({hundredths(v) for v in values.split(",")})]
    except (InputError, ValueError):
        raise InputError(f"cannot read the values of {text.strip()!r}: expected fractions, e.g. "
                         f"'{TREC_MEASURES[measure][1]}.0.1,0.5'") from None
