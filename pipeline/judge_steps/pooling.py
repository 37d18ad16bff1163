"""Pool: the unjudged pairs in the top k of the runs a selection names, in both orders; how far each budget of
judgments gets every system; the pool saved in its folder (``pool.csv``, ``pool.json``, the base version's qrels) for
``pull`` to check the grades against. With a budget (``--budget N``) only the first N pairs of the chosen order are
saved and handed to the assessors."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from metrics.qrels import Qrels
from pipeline.common.jsonfile import read_json, write_json
from pipeline.common.names import POOL_FILE, POOL_META, QRELS_TREC
from pipeline.data.collection import Collection
from pipeline.judge_steps.settings import JudgeSettings
from pipeline.judge_steps.sources import Ranked
from pipeline.judging_maths.pool import ORDERS, Pool, pool
from pipeline.judging_maths.versions import trec_text
from pipeline.reports.text import format_table

BASE_FILE = "base_" + QRELS_TREC  # the version the pool was made against, in the pool's folder


@dataclass
class Pooled:
    """The pools of a selection of runs (one per order), with what they were made from."""

    ranked: list[Ranked]
    collection: Collection
    base: Qrels
    pools: dict[str, Pool]
    settings: JudgeSettings

    @property
    def chosen(self) -> Pool:
        return self.pools[self.settings.order]

    @property
    def to_judge(self) -> pd.DataFrame:
        """The pairs saved and handed to the assessors: the chosen order's first ``budget`` (all without one)."""
        pairs = self.chosen.pairs
        budget = self.settings.budget
        return pairs if budget is None else pairs.head(budget).reset_index(drop=True)


def make_pools(ranked: list[Ranked], collection: Collection, base: Qrels, settings: JudgeSettings) -> Pooled:
    runs = {r.system: r.ranking for r in ranked}
    pools = {order: pool(runs, base, settings.depth, order, collection.query_ids, settings.persistence)
             for order in ORDERS}
    return Pooled(ranked, collection, base, pools, settings)


def budgets_of(settings: JudgeSettings, size: int) -> list[int]:
    """The numbers of judgments judged@k is reported after: the settings' ``budgets``, the budget, the whole pool."""
    budget = set() if settings.budget is None else {settings.budget}
    return sorted({min(b, size) for b in [*settings.budgets, *budget]} | {size})


def pool_text(pooled: Pooled) -> str:
    """What the pool holds and, for each order, judged@k of every system after each budget and the pairs needed for
    judged@k to reach the target for every system."""
    s, c, chosen = pooled.settings, pooled.collection, pooled.chosen
    judged = set(pooled.base.judged_queries())
    bare = sum(q not in judged for q in c.query_ids)
    lines = [f"Pool of {len(pooled.ranked)} runs ({', '.join(r.system for r in pooled.ranked)}) on {c.label}: "
             f"{len(chosen)} unjudged pairs in their top {s.depth} over {len(c.query_ids)} questions"
             + (f" ({bare} without any judgment)" if bare else "")]
    budgets = budgets_of(s, len(chosen))
    for order, found in pooled.pools.items():
        if s.k > found.depth:
            continue
        curve = found.judged_curve(s.k)
        header = ("system", "now", *[f"after {b}" for b in budgets])
        rows = [header, *[(system, *[f"{curve.loc[n, system]:.3f}" for n in [0, *budgets]])
                          for system in found.systems]]
        needed = found.needed(s.target, s.k)
        need = (f"{needed} of the {len(found)} pairs" if needed is not None else
                f"not reached within the pool (depth {found.depth})")
        mark = " (the order pushed)" if order == s.order else ""
        if order == s.order and s.budget is not None and s.budget < len(found):
            mark = f" (the order pushed: its first {s.budget} pairs, --budget {s.budget})"
        lines += ["", f"judged@{s.k} by judgments made, {order} order{mark}:",
                  format_table(rows, align="l" + "r" * (len(header) - 1)),
                  f"pairs to judge for judged@{s.k} >= {s.target} in every system: {need}"]
    return "\n".join(lines)


def save_pool(folder: Path, pooled: Pooled, name: str, extra: dict[str, Any] | None = None) -> Path:
    """The chosen order's pairs to judge (the first ``budget``), what they were pooled from and the base version,
    written whole (each file atomically)."""
    folder.mkdir(parents=True, exist_ok=True)
    chosen, c = pooled.chosen, pooled.collection
    partial = folder / (POOL_FILE + ".partial")
    pooled.to_judge.to_csv(partial, index=False)
    base = folder / BASE_FILE
    base_partial = folder / (BASE_FILE + ".partial")
    base_partial.write_text(trec_text(pooled.base), encoding="utf-8")
    base_partial.replace(base)
    partial.replace(folder / POOL_FILE)
    s = pooled.settings
    meta = {"name": name, "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "runs": [{"run_id": r.run_id, "system": r.system} for r in pooled.ranked],
            "experiment_id": pooled.ranked[0].run.info.experiment_id,
            "corpus": c.name, "split": c.split, "label": c.label, "documents_digest": c.corpus_digest,
            "questions_digest": c.queries_digest, "base_qrels": pooled.base.digest(), "base_file": BASE_FILE,
            "depth": s.depth, "order": s.order, "persistence": s.persistence, "pairs": len(pooled.to_judge),
            "pooled": len(chosen), "budget": s.budget,
            "scale": {str(g): m for g, m in s.grades.meanings}, **(extra or {})}
    write_json(folder / POOL_META, meta)
    return folder


@dataclass
class SavedPool:
    """A pool read back from its folder."""

    folder: Path
    meta: dict[str, Any]
    pairs: pd.DataFrame

    @property
    def keys(self) -> set[tuple[str, str]]:
        return set(zip(self.pairs["query_id"], self.pairs["doc_id"]))

    def base(self) -> Qrels:
        from metrics.trec import read_qrels

        return read_qrels(self.folder / self.meta["base_file"])


def load_pool(folder: Path) -> SavedPool:
    from metrics.errors import InputError

    meta = read_json(folder / POOL_META)
    if meta is None or not (folder / POOL_FILE).is_file():
        raise InputError(f"no pool in {folder} (python -m pipeline.judge pool ... --out {folder} makes one)")
    pairs = pd.read_csv(folder / POOL_FILE, dtype={"query_id": str, "doc_id": str}, keep_default_na=False)
    return SavedPool(folder, meta, pairs)


def texts(collection: Collection) -> tuple[dict[str, str], dict[str, str]]:
    """Questions and documents by id."""
    return dict(zip(collection.query_ids, collection.query_texts)), dict(zip(collection.doc_ids, collection.doc_texts))
