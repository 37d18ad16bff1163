"""From a composed config to the objects a job needs: Collection, Retriever, metric specs, settings.

Pure translation: no MLflow, no printing. Every problem with the config becomes an :class:`InputError` with a
one-line reason, raised before any expensive work starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, is_dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from metrics.errors import InputError
from metrics.evaluate import EvalSettings
from metrics.spec import MetricSpec, metrics_at, parse_metrics
from pipeline.config.schema import (
    BeirCorpus,
    BM25Config,
    CacheConfig,
    DenseConfig,
    HelpdeskCorpus,
    LSAConfig,
    RerankConfig,
    RRFConfig,
    RunFileConfig,
    TextConfig,
    WeightedConfig,
)
from pipeline.data.beir import helpdesk, load_beir
from pipeline.data.collection import Collection
from retrievers import BM25, LSA, RRF, Rerank, Retriever, RunFile, Tokenizer, WeightedSum
from retrievers.base import ScoringRetriever
from retrievers.cache import default_cache_dir, parse_size
from retrievers.text import default_stopwords


def check_config(cfg: DictConfig) -> None:
    """Fail plainly on what Hydra lets through: keys added with ``+`` that no schema knows, missing values."""
    _check_known_keys(cfg, "")
    missing = sorted(OmegaConf.missing_keys(cfg))
    if missing:
        hint = " (e.g. corpus.path=FOLDER)" if "corpus.path" in missing else ""
        raise InputError(f"missing required value(s): {', '.join(missing)}{hint}")
    if "cache" in cfg:
        try:
            parse_size(cfg.cache.limit)
        except ValueError as exc:
            raise InputError(f"cache.limit: {exc}") from None


def _check_known_keys(node: Any, path: str) -> None:
    if not isinstance(node, DictConfig):
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
    p = Path(path).expanduser()
    return p if p.is_absolute() else (base / p).resolve()


def load_collection(corpus: DictConfig, base: Path) -> Collection:
    schema = OmegaConf.get_type(corpus)
    if schema is HelpdeskCorpus:
        return helpdesk()
    if schema is BeirCorpus:
        return load_beir(resolve_path(corpus.path, base), corpus.split, corpus.name, corpus.strict)
    raise InputError(f"corpus config of unknown kind {schema}: use corpus=helpdesk or corpus=beir")


def make_tokenizer(text: DictConfig | TextConfig, base: Path) -> Tokenizer:
    words = text.stopwords
    if words == "default":
        stop = default_stopwords()
    elif words in ("none", "", None):
        stop = frozenset()
    else:
        path = resolve_path(words, base)
        if not path.is_file():
            raise InputError("stop-word file does not exist (text.stopwords)", path)
        stop = frozenset(path.read_text(encoding="utf-8").split())
    return Tokenizer(pattern=text.pattern, lowercase=text.lowercase, stopwords=stop)


def make_retriever(node: DictConfig, tokenizer: Tokenizer, base: Path, where: str = "retriever",
                   cache: DictConfig | CacheConfig | None = None) -> Retriever:
    """Build the retriever a config node describes; fusions and two-stage retrievers build their parts recursively.

    ``cache`` (the config's ``cache`` node) says whether and where dense retrievers keep document embeddings.
    """
    schema = OmegaConf.get_type(node)
    try:
        if schema is DenseConfig:
            return make_dense(node, base, cache or CacheConfig())
        if schema is RerankConfig:
            first = make_retriever(node.first, tokenizer, base, f"{where}.first", cache)
            second = make_retriever(node.second, tokenizer, base, f"{where}.second", cache)
            if not isinstance(second, ScoringRetriever):
                raise InputError(f"{where}.second: the second stage must score documents; {second.name} only "
                                 f"ranks them")
            name = node.name or f"{first.name}->{second.name}"
            return Rerank(first=first, second=second, candidates=node.candidates, name=name)
        if schema is BM25Config:
            return BM25(k1=node.k1, b=node.b, tokenizer=tokenizer, name=node.name)
        if schema is LSAConfig:
            return LSA(dims=node.dims, algorithm=node.algorithm.value, seed=node.seed, tokenizer=tokenizer,
                       name=node.name)
        if schema is RunFileConfig:
            path = resolve_path(node.path, base)
            if not path.is_file():
                raise InputError(f"run file does not exist ({where}.path)", path)
            return RunFile(path=path, name=node.name)
        if schema in (WeightedConfig, RRFConfig):
            components = [make_retriever(c, tokenizer, base, f"{where}.components.{key}", cache)
                          for key, c in node.components.items()]
            if schema is RRFConfig:
                return RRF(components=components, k=node.k, depth=node.depth, name=node.name)
            not_scoring = [c.name for c in components if not isinstance(c, ScoringRetriever)]
            if not_scoring:
                raise InputError(f"{where}: weighted fusion needs score-producing components; "
                                 f"{', '.join(not_scoring)} only ranks (use retriever=rrf to fuse it)")
            weights = None if node.weights is None else list(node.weights)
            return WeightedSum(components=components, alpha=node.alpha, weights=weights, depth=node.depth,
                               name=node.name)
    except ValueError as exc:  # the retrievers' own range checks (k1 < 0, alpha > 1, ...)
        if isinstance(exc, InputError):
            raise
        raise InputError(f"{where}: {exc}") from None
    raise InputError(f"{where}: unknown retriever config {schema}; use one of conf/retriever/")


def make_dense(node: DictConfig, base: Path, cache: DictConfig | CacheConfig):
    """A :class:`retrievers.dense.Dense`; without the ``[dense]`` extra, the one-line install hint (an InputError)."""
    from retrievers.dense import Dense
    from retrievers.encoders import check_available

    model = str(node.model)
    local = resolve_path(model, base)
    if model.endswith(".onnx") or local.exists():  # a file or folder, relative to the launch directory
        model = str(local)
    check_available(model)
    tokenizer = None if node.tokenizer is None else str(resolve_path(node.tokenizer, base))
    root = resolve_path(cache.dir, base) if cache.dir else default_cache_dir()
    return Dense(model=model, max_length=node.max_length, batch_size=node.batch_size, cache=bool(cache.enabled),
                 cache_dir=root / "embeddings", tokenizer=tokenizer, name=node.name)


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


def metric_plan(metrics: DictConfig | Mapping[str, Any]) -> MetricPlan:
    ks = list(metrics["k"])
    if any(int(k) < 1 for k in ks):
        raise InputError(f"metrics.k: cutoffs must be at least 1, got {ks}")
    measures = [str(m) for m in metrics["measures"]]
    show = parse_metrics([str(s) for s in metrics["show"]])
    primary = parse_metrics([str(metrics["primary"])])[0]
    specs = list(dict.fromkeys([*metrics_at(ks, measures), *show, primary]))
    gain, missing = metrics["gain"], metrics["missing"]
    settings = EvalSettings(level=int(metrics["level"]), gain=getattr(gain, "value", gain),
                            missing=getattr(missing, "value", missing))
    boot = metrics["bootstrap"]
    if int(boot["resamples"]) < 1 or not 0.0 < float(boot["confidence"]) < 1.0:
        raise InputError("metrics.bootstrap: resamples must be >= 1 and confidence within (0, 1)")
    method = boot["method"]
    return MetricPlan(specs, show, primary, settings, int(boot["resamples"]), int(boot["seed"]),
                      float(boot["confidence"]), getattr(method, "value", method))


def plain(cfg: DictConfig | ListConfig) -> Any:
    """The resolved config as plain Python (enums as their values), for params and the config artifact."""
    return OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
