"""A job's config, checked once, and everything it decides: corpus source, retriever, metrics, diagnosis settings.

:meth:`JobPlan.check` is the one place a job's config is checked and turned into objects; a sweep's driver calls it
for every job before any starts (so a bad value in the 7th sweep point stops the command at once), and each job
calls it for itself. A config already checked in this process is not checked again, and a job whose plan the driver
made (:func:`plan_ahead`, jobs run in the driver's process) takes that plan instead of making its own.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from metrics.errors import InputError
from metrics.spec import parse_metric
from pipeline.analysis.diagnosis import DiagnosisSettings
from pipeline.config.build import (
    BUILT,
    MetricPlan,
    build_context,
    check_config,
    flatten,
    make_chunker,
    make_corpus,
    make_retriever,
    metric_plan,
    plain,
)
from pipeline.data.sources import CorpusSource
from retrievers.base import BuildContext, Retriever

_checked: dict[str, dict[str, Any]] = {}  # a config's canonical text -> its completed corpus and retriever entries
# Top-level config keys that say where and how results are recorded, not what is computed.
NOT_COMPUTED = ("tracking", "cache", "study", "gate", "tags", "hydra", "quiet")
NOT_PARAMS = ("gate", "tags")  # how results are judged and labelled, not how they were made


def config_digest(cfg: DictConfig | Mapping[str, Any]) -> str:
    """A digest of the resolved config minus where results go (tracking, cache, study name, gate, tags): two jobs
    with the same digest, corpus and code compute the same thing (a resumed sweep skips the second)."""
    tree = plain(cfg) if isinstance(cfg, DictConfig) else dict(cfg)
    kept = {k: v for k, v in tree.items() if k not in NOT_COMPUTED}
    text = json.dumps(kept, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def run_params(cfg: DictConfig | Mapping[str, Any], choices: Mapping[str, str]) -> dict[str, Any]:
    """A run's params: the flattened resolved config (``retriever.k1``, ``corpus.name`` ...) plus the config options
    chosen (``retriever``: ``bm25``). ``cfg``: the config, or its :func:`plain` tree."""
    tree = plain(cfg) if isinstance(cfg, DictConfig) else cfg
    params = flatten({k: v for k, v in tree.items() if k not in NOT_PARAMS})
    for group, choice in choices.items():
        if "/" not in group and "@" not in group and choice is not None and group != "gate":
            params.setdefault(group, choice)
    return params


def diagnosis_settings(node: Mapping[str, Any], depth: int | None = None) -> DiagnosisSettings:
    """The ``diagnosis`` config as :class:`DiagnosisSettings`; an out-of-range value is an InputError. A setting
    the node lacks (a sweep's config saved before the setting existed, read back by ``sync``) keeps its default."""
    defaults = DiagnosisSettings()
    kinds = {"cutoff": int, "late_limit": int, "duplicate_threshold": float, "duplicate_top_k": int,
             "shingle_size": int, "rare_share": float, "topic_share": float, "context_share": float}
    try:
        return DiagnosisSettings(**{key: kind(node[key]) if key in node else getattr(defaults, key)
                                    for key, kind in kinds.items()}, depth=depth)
    except ValueError as exc:
        raise InputError(f"diagnosis: {exc}") from None


def histogram_metric(node: Mapping[str, Any], plan: MetricPlan) -> str:
    """The metric of the per-run histogram: ``diagnosis.histogram_metric``, else nDCG at the largest cutoff
    computed, else the primary metric. It must be one the job computes."""
    computed = [spec.name for spec in plan.specs]
    chosen = node.get("histogram_metric")
    if chosen:
        name = parse_metric(str(chosen)).name
        if name not in computed:
            raise InputError(f"diagnosis.histogram_metric {chosen!r} is not computed; choose one of "
                             f"{', '.join(computed)}")
        return name
    ndcg = [spec for spec in plan.specs if spec.measure == "ndcg"]
    return max(ndcg, key=lambda s: s.k or 0).name if ndcg else plan.primary.name


def config_key(cfg: DictConfig) -> str:
    """The resolved config but its ``hydra`` node, as canonical text: what a check decides from."""
    return json.dumps({k: v for k, v in plain(cfg).items() if k != "hydra"}, sort_keys=True, default=str)


def checked(cfg: DictConfig, key: str | None = None) -> DictConfig:
    """:func:`pipeline.config.build.check_config`, once per distinct config in this process (``key``: its
    :func:`config_key`, when known)."""
    key = config_key(cfg) if key is None else key
    entries = _checked.get(key)
    if entries is None:
        check_config(cfg)
        _checked[key] = {k: plain(cfg[k]) for k in BUILT}
        return cfg
    with open_dict(cfg):
        for k, value in entries.items():
            cfg[k] = OmegaConf.create(value)
    return cfg


@dataclass
class JobPlan:
    """What one job will do, decided from its config before any data is read."""

    cfg: DictConfig  # the config, its corpus and retriever entries complete (every setting, typed)
    context: BuildContext
    corpus: CorpusSource
    retriever: Retriever
    chunker: Any  # pipeline.chunking's: Whole (no chunking), a built-in chunker or a user's (OwnChunker)
    metrics: MetricPlan
    diagnosis: DiagnosisSettings
    histogram_metric: str
    depth: int
    key: str = ""  # the config_key of the config as given, before its entries were completed

    @cached_property
    def tree(self) -> dict[str, Any]:
        """The config resolved, as plain Python (:func:`plain`): made once for the digest, the params and the
        config file (the config does not change once checked)."""
        return plain(self.cfg)

    @property
    def digest(self) -> str:
        return config_digest(self.tree)

    def params(self, choices: Mapping[str, str]) -> dict[str, Any]:
        return run_params(self.tree, choices)

    @classmethod
    def check(cls, cfg: DictConfig, base: Path) -> JobPlan:
        """Check ``cfg`` and build what it describes; every problem is one :class:`InputError`.

        The plan made ahead for an equal config (:func:`plan_ahead`) is taken instead, once: its ``cfg`` is that
        config, completed as checking this one would complete it (the caller goes on with ``plan.cfg``)."""
        key = config_key(cfg)
        ahead = _ahead.pop((key, str(base)), None)
        if ahead is not None:
            return ahead
        checked(cfg, key)
        metrics = metric_plan(cfg.metrics)
        context = build_context(cfg, base)
        return cls(cfg, context, make_corpus(cfg.corpus, base), make_retriever(cfg.retriever, context),
                   make_chunker(cfg.chunker, context), metrics, diagnosis_settings(cfg.diagnosis),
                   histogram_metric(cfg.diagnosis, metrics), int(cfg.depth), key)

    @property
    def chunked(self) -> bool:
        """Whether the job ranks chunks (a chunker other than ``none``)."""
        return bool(getattr(self.chunker, "chunks_documents", True))


def plan_ahead(plan: JobPlan, base: Path) -> None:
    """Keep a plan the sweep's driver made (checking every job before any starts) for the job of the same config,
    run later in this process: that job's check then costs nothing (7 ms a SciFact job, most of it completing its
    config's entries again). Taken once; what no job takes is dropped with :func:`forget_plans_ahead`."""
    _ahead[(plan.key, str(base))] = plan


def forget_plans_ahead() -> None:
    _ahead.clear()


_ahead: dict[tuple[str, str], JobPlan] = {}  # (config key, base folder) -> a plan made ahead (plan_ahead)
