"""From a composed config to what a job needs: the checked config, its corpus source, retriever, metrics plan.

Pure translation: no MLflow, no printing. Every problem with the config becomes an :class:`InputError` with a
one-line reason, raised before any expensive work starts. Retrievers and corpora are built from the class their
entry names (:mod:`pipeline.config.targets`); nothing here knows one retriever from another.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, is_dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf, open_dict

from metrics.errors import InputError
from metrics.evaluation import EvalSettings
from metrics.spec import (
    FRACTION_MEASURES,
    OMEGA,
    SPAN_MEASURES,
    TOKENS,
    MetricSpec,
    metrics_at,
    parse_metric,
    parse_metrics,
)
from pipeline.chunking.chunkers import OURS, OwnChunker, Whole
from pipeline.config import targets
from pipeline.data.sources import CorpusSource
from retrievers.base import BuildContext, Retriever
from retrievers.cache import cache_root, parse_size
from retrievers.external import ExternalSearch
from retrievers.text import Tokenizer, default_stopwords

BUILT = ("corpus", "retriever", "chunker")  # top-level keys whose entries name the class they build


def check_config(cfg: DictConfig) -> DictConfig:
    """Fail plainly on what Hydra lets through (keys added with ``+`` that nothing takes, missing values, values
    of the wrong type for the retriever or corpus class), and return ``cfg`` with its ``corpus`` and ``retriever``
    entries complete: every setting their classes take, typed and defaulted (what the run's params record)."""
    _check_known_keys(cfg, "")
    missing = sorted(OmegaConf.missing_keys(cfg))
    if missing:
        hint = (" (e.g. corpus.path=FOLDER)" if "corpus.path" in missing else
                " (your retriever's class: retriever._target_=MODULE.CLASS)" if "retriever._target_" in missing else "")
        raise InputError(f"missing required value(s): {', '.join(missing)}{hint}")
    with open_dict(cfg):
        for key in BUILT:
            if key == "chunker":
                cfg[key] = checked_chunker(cfg.get(key))
            else:
                cfg[key] = targets.checked(cfg[key], key)
    if "cache" in cfg:
        try:
            parse_size(cfg.cache.limit)
        except ValueError as exc:
            raise InputError(f"cache.limit: {exc}") from None
    if int(cfg.get("depth", 1)) < 1:
        raise InputError(f"depth must be at least 1, got {cfg.depth}")
    return cfg


def _ours(node: Any) -> dict[str, Any]:
    """The keys rankscope reads from a chunker entry (``tokenizer``, ``depth``) that its class does not take itself
    (a user's chunker), with their defaults."""
    params, anything = targets.parameters(targets.target_class(node, "chunker"))
    taken = {p.name for p in params}
    defaults = {f.name: f.default for f in fields(Whole) if f.name in OURS}
    return {k: node.get(k, defaults[k]) for k in OURS if k not in taken and not anything}


def checked_chunker(node: Any) -> DictConfig:
    """The ``chunker`` entry checked against its class, as ``corpus`` and ``retriever`` entries are; ``tokenizer``
    and ``depth`` kept for rankscope when the class (a user's) does not take them. None: ``chunker=none``."""
    if node is None:
        node = OmegaConf.create({targets.TARGET: f"{Whole.__module__}.{Whole.__qualname__}"})
    ours = _ours(node)
    inner = OmegaConf.create({k: v for k, v in _plain_entry(node).items() if k not in ours})
    done = targets.checked(inner, "chunker")
    with open_dict(done):
        for key, value in ours.items():
            done[key] = value
    return done


def _plain_entry(node: Any) -> dict[str, Any]:
    return OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else dict(node)


def make_chunker(node: DictConfig, context: BuildContext) -> Any:
    """The chunker a (checked) ``chunker`` entry describes: a built-in one, or a user's class with ``chunk(text)``
    behind :class:`~pipeline.chunking.chunkers.OwnChunker`."""
    ours = _ours(node)
    inner = OmegaConf.create({k: v for k, v in _plain_entry(node).items() if k not in ours})
    built = targets.build(inner, context, "chunker")
    if callable(getattr(built, "spans_of", None)):
        return built
    if callable(getattr(built, "chunk", None)):
        tokenizer = ours.get("tokenizer", getattr(built, "tokenizer", "minilm"))
        depth = ours.get("depth", getattr(built, "depth", None))
        return OwnChunker(inner=built, name=type(built).__name__, tokenizer=str(tokenizer), depth=depth,
                          _base=context.base)
    raise InputError(f"chunker._target_={node[targets.TARGET]} builds a {type(built).__name__}, which has no "
                     f"chunk(text) method (text in, [(start, end), ...] out)")


def _check_known_keys(node: Any, path: str) -> None:
    if not isinstance(node, DictConfig) or path in BUILT:
        return
    schema = OmegaConf.get_type(node)
    if schema is not None and is_dataclass(schema):
        known = {f.name for f in fields(schema)}
        unknown = [str(k) for k in node if k not in known]
        if unknown:
            where = f"{path}." if path else ""
            raise InputError(f"unknown key(s) {', '.join(where + k for k in unknown)}: {schema.__name__} has "
                             f"{', '.join(sorted(known))}")
    for key in node:
        if OmegaConf.is_missing(node, key):
            continue
        _check_known_keys(node[key], f"{path}.{key}" if path else str(key))


def resolve_path(path: str, base: Path) -> Path:
    """A user-given path: absolute as is, relative to ``base`` (the launch directory) otherwise."""
    return BuildContext(base=base).path(path)


def make_tokenizer(text: Mapping[str, Any], base: Path) -> Tokenizer:
    words = text["stopwords"]
    if words == "default":
        stop = default_stopwords()
    elif words in ("none", "", None):
        stop = frozenset()
    else:
        path = resolve_path(words, base)
        if not path.is_file():
            raise InputError("stop-word file does not exist (text.stopwords)", path)
        stop = frozenset(path.read_text(encoding="utf-8").split())
    return Tokenizer(pattern=text["pattern"], lowercase=text["lowercase"], stopwords=stop)


def _ticker(total: float | None, desc: str, unit: str) -> Any:
    """The job's progress bar (:func:`pipeline.common.progress.ticker`), imported when a retriever first asks."""
    from pipeline.common import progress

    return progress.ticker(total, desc, unit, unit_scale=True)


def build_context(cfg: DictConfig, base: Path, tokenizer: Tokenizer | None = None) -> BuildContext:
    """What retrievers and corpora take from the job: the shared tokenizer, the launch folder, the cache folder."""
    cache = cfg.get("cache") or {}
    return BuildContext(tokenizer=tokenizer or make_tokenizer(cfg.text, base), base=base,
                        cache=bool(cache.get("enabled", True)), cache_dir=cache_root(cache.get("dir"), base),
                        progress=_ticker)


def make_retriever(node: DictConfig, context: BuildContext, where: str = "retriever") -> Retriever:
    """The retriever a (checked) entry describes; fusions and two-stage retrievers build their parts the same way."""
    return targets.build(node, context, where, finish=as_retriever)


def as_retriever(built: Any, name: str | None, node: Any, where: str) -> Retriever:
    """A built-in retriever as built; a user's object with ``search(questions, k)`` behind the checking adapter."""
    if isinstance(built, Retriever):
        return built
    if callable(getattr(built, "search", None)):
        return ExternalSearch(engine=built, name=name or type(built).__name__)
    raise InputError(f"{where}._target_={node[targets.TARGET]} builds a {type(built).__name__}, which has neither "
                     f"search(questions, k) nor rank(query_ids, texts, depth)")


def make_corpus(node: DictConfig, base: Path) -> CorpusSource:
    """The corpus source a (checked) ``corpus`` entry describes."""
    source = targets.build(node, BuildContext(base=base), "corpus")
    if not callable(getattr(source, "load", None)):
        raise InputError(f"corpus._target_={node[targets.TARGET]} builds a {type(source).__name__}, which cannot "
                         f"load() a corpus")
    return source


@dataclass(frozen=True)
class MetricPlan:
    """What to compute (``specs``), what the summary tables show, which metric picks the best system, and how
    intervals are drawn."""

    specs: list[MetricSpec]
    show: list[MetricSpec]
    primary: MetricSpec
    settings: EvalSettings
    resamples: int = 5000
    seed: int = 0
    confidence: float = 0.95
    method: str = "percentile"
    judged_only: bool = False  # also score condensed lists (Sakai's): unjudged documents removed, as trec_eval -J
    slices: tuple[str, ...] = ()  # question fields every figure is also given by slice of (docs/slices.md)

    @property
    def reads_chunks(self) -> bool:
        """Whether a metric reads a ranking of chunks (a span measure, or a token budget's)."""
        return any(s.needs_chunks for s in self.specs)

    @property
    def reads_spans(self) -> bool:
        return any(s.measure in SPAN_MEASURES for s in self.specs)

    @property
    def reads_chunking(self) -> bool:
        """Whether a metric reads every chunk of the documents holding evidence (``span_precision_omega``)."""
        return any(s.measure == OMEGA for s in self.specs)


def follow_cutoffs(spec: MetricSpec, ks: list[int]) -> MetricSpec:
    """``show`` and ``primary`` follow ``metrics.k``: a cutoff the plan does not compute becomes the nearest one it
    does (the larger of two as near), so ``metrics.k=[10]`` shows ``ndcg@10``, not ``ndcg@5``. A fraction
    (``iprec_at_recall@0.10``, ``rbp@0.80``) or a token budget (``recall@512tok``) is not a cutoff: kept as it is."""
    if spec.k is None or spec.unit or spec.k in ks or not ks or spec.measure in FRACTION_MEASURES:
        return spec
    return MetricSpec(spec.measure, min(ks, key=lambda k: (abs(k - spec.k), -k)))


def metric_plan(metrics: DictConfig | Mapping[str, Any]) -> MetricPlan:
    ks = list(metrics["k"])
    if any(int(k) < 1 for k in ks):
        raise InputError(f"metrics.k: cutoffs must be at least 1, got {ks}")
    measures = [str(m) for m in metrics["measures"]]
    show = list(dict.fromkeys(follow_cutoffs(s, ks) for s in parse_metrics([str(s) for s in metrics["show"]])))
    primary = follow_cutoffs(parse_metrics([str(metrics["primary"])])[0], ks)
    if primary not in show:  # the metric that picks the top system is a column of every summary table
        show.append(primary)
    budgets = [int(b) for b in metrics.get("budgets") or []]
    if any(b < 1 for b in budgets):
        raise InputError(f"metrics.budgets: token budgets must be positive, got {budgets}")
    at_budgets = [parse_metric(f"{m}@{b}{TOKENS}") for m in metrics.get("budget_measures") or [] for b in budgets]
    specs = list(dict.fromkeys([*metrics_at(ks, measures), *at_budgets, *show, primary]))
    gain, missing = metrics["gain"], metrics["missing"]
    settings = EvalSettings(level=int(metrics["level"]), gain=getattr(gain, "value", gain),
                            missing=getattr(missing, "value", missing))
    boot = metrics["bootstrap"]
    if int(boot["resamples"]) < 1 or not 0.0 < float(boot["confidence"]) < 1.0:
        raise InputError("metrics.bootstrap: resamples must be >= 1 and confidence within (0, 1)")
    method = boot["method"]
    return MetricPlan(specs, show, primary, settings, int(boot["resamples"]), int(boot["seed"]),
                      float(boot["confidence"]), getattr(method, "value", method),
                      bool(metrics.get("judged_only", False)), slice_names(metrics.get("slices") or []))


def slice_names(names: Any) -> tuple[str, ...]:
    """``metrics.slices``: question fields by name, each once (whether the data has them is the job's to say)."""
    found = [str(n).strip() for n in names]
    if any(not n for n in found):
        raise InputError(f"metrics.slices: a name is empty in {found} (e.g. metrics.slices=[team,question_length])")
    repeated = sorted({n for n in found if found.count(n) > 1})
    if repeated:
        raise InputError(f"metrics.slices: {', '.join(repeated)} named twice")
    return tuple(found)


def flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    """``{'retriever': {'k1': 1.2}}`` -> ``{'retriever.k1': 1.2}``; lists stay whole (``[3, 5, 10]``)."""
    if isinstance(tree, Mapping):
        out: dict[str, Any] = {}
        for key, value in tree.items():
            out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: tree}


def plain(cfg: DictConfig | ListConfig) -> Any:
    """The resolved config as plain Python (enums as their values), for params and the config artifact."""
    return OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
