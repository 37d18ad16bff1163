"""Typed schema of the Hydra configuration, registered in Hydra's ConfigStore as ``rankscope_schema``.

Every YAML file under ``conf/`` is merged into :class:`Config`, so a misspelt key or a value of the wrong type stops
the command before any job starts, with Hydra's own one-line message. ``corpus`` and ``retriever`` are entries that
name the class they build (``_target_``): they are checked against that class itself (:mod:`pipeline.config.targets`),
so adding a retriever needs no schema here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

# -- metrics, text, cache, tracking -----------------------------------------------------------------------------


class Gain(Enum):
    linear = "linear"
    exponential = "exponential"


class Missing(Enum):
    zero = "zero"  # a judged question absent from the run scores 0 (trec_eval -c)
    skip = "skip"  # ... or is left out of the means (trec_eval without -c)


class BootstrapMethod(Enum):
    percentile = "percentile"
    bca = "bca"


@dataclass
class BootstrapConfig:
    resamples: int = 5000
    seed: int = 0
    confidence: float = 0.95
    method: BootstrapMethod = BootstrapMethod.percentile


@dataclass
class MetricsConfig:
    """Each measure at each cutoff ``k`` (cutoff-free measures once), plus the ``show`` columns.

    ``show`` are the columns of the end-of-sweep tables (always computed); ``primary`` picks the best system.
    """

    k: list[int] = field(default_factory=lambda: [3, 5, 10])
    measures: list[str] = field(default_factory=lambda: ["hit_rate", "recall", "mrr", "ndcg"])
    show: list[str] = field(default_factory=lambda: ["hit_rate@3", "recall@5", "mrr", "ndcg@5"])
    primary: str = "ndcg@5"
    level: int = 1
    gain: Gain = Gain.linear
    missing: Missing = Missing.zero
    judged_only: bool = False  # also score condensed lists (unjudged documents removed, trec_eval -J): condensed/*
    budgets: list[int] = field(default_factory=list)  # token budgets (recall@512tok ...): docs/chunking.md
    budget_measures: list[str] = field(default_factory=lambda: ["recall", "hit_rate", "ndcg", "span_recall"])
    bootstrap: BootstrapConfig = field(default_factory=BootstrapConfig)


@dataclass
class TextConfig:
    """retrievers/text.py: how documents and questions become terms (shared by every lexical retriever)."""

    pattern: str = "[a-z0-9]+"
    lowercase: bool = True
    stopwords: str = "default"  # 'default' (docs/helpdesk-reference.md's list), 'none', or a path to a file of words


@dataclass
class CacheConfig:
    """Term counts (retrievers/cache.py, see pipeline/reuse.py) and document embeddings (``<dir>/embeddings``)
    reused across sweep points and processes.

    ``dir`` null: $RANKSCOPE_CACHE_DIR, else $XDG_CACHE_HOME/rankscope, else ~/.cache/rankscope. ``limit``: the
    term-count folder's size cap (oldest-used files go first), e.g. 4GiB or 500MiB. ``enabled=false``: tokenise
    (and encode) in every job.
    """

    enabled: bool = True
    dir: str | None = None
    limit: str = "4GiB"


@dataclass
class TrackingConfig:
    """Where runs go. ``uri`` null: $MLFLOW_TRACKING_URI, else sqlite:///<launch dir>/mlflow.db."""

    uri: str | None = None
    experiment: str = "rankscope"


@dataclass
class GateConfig:
    """conf/gate/: when a candidate counts as a regression against the baseline (pipeline/gate.py).

    It fails only when ``candidate - baseline`` lies entirely below ``-tolerance`` at ``confidence`` (bootstrap
    interval over questions) and the drop is significant (randomisation test, Holm-adjusted over ``metrics``).
    """

    baseline: str = "tag:baseline=true"  # a run selector: run id, run name, tag:KEY=VALUE, best:METRIC, latest
    candidate: str = "best"  # in a sweep: 'best' (by the first gate metric) or a system's name
    metrics: list[str] = field(default_factory=lambda: ["ndcg@10"])
    tolerance: float = 0.01  # the largest acceptable drop
    confidence: float = 0.95
    resamples: int = 5000
    permutations: int = 10000
    seed: int = 0
    adopt_first: bool = True  # no baseline yet: the candidate becomes the baseline and the gate passes
    allow_different_corpus: bool = False


@dataclass
class DiagnosisConfig:
    """pipeline/analysis/diagnosis.py: when a question counts as failing and which failure class applies (see
    docs/diagnosis.md)."""

    cutoff: int = 3  # a question fails when its first relevant document is not in the top `cutoff`
    late_limit: int = 10  # late rank: rank cutoff+1 .. late_limit, or beyond late_limit (within the ranking)
    duplicate_threshold: float = 0.6  # Jaccard similarity of word shingles that makes two documents duplicates
    duplicate_top_k: int = 10  # duplicates are looked for within each ranking's top k
    shingle_size: int = 2  # words per shingle
    rare_share: float = 0.05  # a question term is rare when at most this share of the documents contain it
    topic_share: float = 0.5  # a first result matching this share of the question's weight is on its topic
    context_share: float = 0.02  # a relevant document among this share of the corpus nearest the first result
    histogram_metric: str | None = None  # the per-run histogram's metric; null: nDCG at the largest cutoff


@dataclass
class TuneConfig:
    """Tuning sweeps (``hydra/sweeper=optuna``): trials are scored by ``metrics.primary`` on ``corpus.split``;
    the best configuration is then evaluated once on ``holdout`` (see pipeline/tuning.py).

    Tuning and reporting on the same split is refused unless ``allow_same_split`` (the figure is then optimistic).
    ``baseline``: also evaluate the untuned configuration on both splits, to show what tuning gained on each.
    """

    holdout: str = "test"
    allow_same_split: bool = False
    baseline: bool = True


@dataclass
class Config:
    corpus: Any = MISSING  # an entry of conf/corpus/: _target_ and its settings
    retriever: Any = MISSING  # an entry of conf/retriever/: _target_ and its settings
    chunker: Any = None  # an entry of conf/chunker/ (none: every document one chunk): _target_ and its settings
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    text: TextConfig = field(default_factory=TextConfig)
    cache: CacheConfig = field(default_factory=CacheConfig)
    diagnosis: DiagnosisConfig = field(default_factory=DiagnosisConfig)
    tune: TuneConfig = field(default_factory=TuneConfig)
    depth: int = 100  # ranking depth: how many documents each question's ranking keeps
    study: str | None = None  # a sweep's name (experiment files set it); names the parent MLflow run
    gate: GateConfig | None = None  # gate=default: compare the sweep's best system with the baseline at the end
    tags: dict[str, str] = field(default_factory=dict)  # extra MLflow tags on every run (+tags.owner=me)
    quiet: bool = False  # no progress bars (they are drawn only on a terminal, and only in the driver's process)


def register() -> None:
    """Store the primary schema (``conf/config.yaml`` lists it first in its defaults)."""
    ConfigStore.instance().store(name="rankscope_schema", node=Config)
