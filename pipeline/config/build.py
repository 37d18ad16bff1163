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
from metrics.spec import FRACTION_MEASURES, MetricSpec, metrics_at, parse_metrics
from pipeline.config import targets
from pipeline.data.sources import CorpusSource
from retrievers.base import BuildContext, Retriever
from retrievers.cache import cache_root, parse_size
from retrievers.external import ExternalSearch
from retrievers.text import Tokenizer, default_stopwords

BUILT = ("corpus", "retriever")  # top-level keys whose entries name the class they build


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
            cfg[key] = targets.checked(cfg[key], key)
    if "cache" in cfg:
        try:
            parse_size(cfg.cache.limit)
        except ValueError as exc:
            raise InputError(f"cache.limit: {exc}") from None
    if int(cfg.get("depth", 1)) < 1:
        raise InputError(f"depth must be at least 1, got {cfg.depth}")
    return cfg


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


def follow_cutoffs(spec: MetricSpec, ks: list[int]) -> MetricSpec:
    """``show`` and ``primary`` follow ``metrics.k``: a cutoff the plan does not compute becomes the nearest one it
    does (the larger of two as near), so ``metrics.k=[10]`` shows ``ndcg@10``, not ``ndcg@5``. A fraction
    (``iprec_at_recall@0.10``, ``rbp@0.80``) is not a cutoff: kept as it is."""
    if spec.k is None or spec.k in ks or not ks or spec.measure in FRACTION_MEASURES:
        return spec
    return MetricSpec(spec.measure, min(ks, key=lambda k: (abs(k - spec.k), -k)))


def metric_plan(metrics: DictConfig | Mapping[str, Any]) -> MetricPlan:
    ks = list(metrics["k"])
    if any(int(k) < 1 for k in ks):
        raise InputError(f"metrics.k: cutoffs must be at least 1, got {ks}")
    measures = [str(m) for m in metrics["measures"]]
    show = list(dict.fromkeys(follow_cutoffs(s, ks) for s in parse_metrics([str(s) for s in metrics["show"]])))
    primary = follow_cutoffs(parse_metrics([str(metrics["primary"])])[0], ks)
    specs = list(dict.fromkeys([*metrics_at(ks, measures), *show, primary]))
    gain, missing = metrics["gain"], metrics["missing"]
    settings = EvalSettings(level=int(metrics["level"]), gain=getattr(gain, "value", gain),
                            missing=getattr(missing, "value", missing))
    boot = metrics["bootstrap"]
    if int(boot["resamples"]) < 1 or not 0.0 < float(boot["confidence"]) < 1.0:
        raise InputError("metrics.bootstrap: resamples must be >= 1 and confidence within (0, 1)")
    method = boot["method"]
    return MetricPlan(specs, show, primary, settings, int(boot["resamples"]), int(boot["seed"]),
                      float(boot["confidence"]), getattr(method, "value", method),
                      bool(metrics.get("judged_only", False)))


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
