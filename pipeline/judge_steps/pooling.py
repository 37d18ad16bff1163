"""Pool: the unjudged pairs in the top k of the runs a selection names, in both orders; how far each budget of
judgments gets every system; the pool saved in its folder (``pool.csv``, ``pool.json``, the base version's qrels) for
``pull`` to check the grades against. With a budget (``--budget N``) only the first N pairs of the chosen order are
saved and handed to the assessors.

A span pool (runs that ranked chunks, or a corpus judged with spans) pools the pairs the systems' top chunks point to
(``judging_maths.pool.documents_at_chunks``: judged@k is then of the top k chunks), saves the chunks behind each pair
(``pool_chunks.csv``, marked in the tasks), each pooled document's digest (``pool.csv``'s ``doc_digest``: a
highlight on a document changed since is set aside when pulled), the base version's spans, and where the corpus is
read from (its config and folder), for ``pull`` to check every highlight against the documents as they are then."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd

from metrics.chunks import ChunkRun
from metrics.qrels import Qrels
from metrics.spans import Spans
from pipeline.common.jsonfile import write_json
from pipeline.common.names import POOL_CHUNKS, POOL_FILE, POOL_META
from pipeline.data.collection import Collection
from pipeline.judge_steps.saved import BASE_FILE, write_base, write_whole
from pipeline.judge_steps.settings import JudgeSettings
from pipeline.judge_steps.sources import Ranked
from pipeline.judging_maths.pool import ORDERS, Pool, documents_at_chunks, pool, pooled_chunks
from pipeline.judging_maths.spans import text_digest
from pipeline.reports.text import format_table


@dataclass
class Pooled:
    """The pools of a selection of runs (one per order), with what they were made from."""

    ranked: list[Ranked]
    collection: Collection
    base: Qrels
    pools: dict[str, Pool]
    settings: JudgeSettings
    chunk_runs: dict[str, ChunkRun] | None = None  # a span pool's rankings of chunks, by system
    base_spans: Spans | None = field(default=None, repr=False)

    @property
    def spans(self) -> bool:
        """A span pool: tasks judge evidence spans in whole documents."""
        return self.chunk_runs is not None

    @property
    def chosen(self) -> Pool:
        return self.pools[self.settings.order]

    @cached_property
    def marked(self) -> pd.DataFrame:
        """The chunks behind the pairs to judge (``judging_maths.pool.CHUNK_COLUMNS``)."""
        return pooled_chunks(self.chunk_runs or {}, self.settings.depth, self.to_judge)

    @property
    def to_judge(self) -> pd.DataFrame:
        """The pairs saved and handed to the assessors: the chosen order's first ``budget`` (all without one)."""
        pairs = self.chosen.pairs
        budget = self.settings.budget
        return pairs if budget is None else pairs.head(budget).reset_index(drop=True)


def make_pools(ranked: list[Ranked], collection: Collection, base: Qrels, settings: JudgeSettings,
               base_spans: Spans | None = None) -> Pooled:
    """Both orders' pools. Runs that ranked chunks (any of them), or a corpus judged with spans, make a span pool: the
    pairs their top chunks point to (a run without chunks ranks its documents whole)."""
    chunk_runs = None
    if any(r.chunks is not None for r in ranked) or collection.spans is not None or base_spans is not None:
        lengths = collection.doc_lengths
        chunk_runs = {r.system: r.chunks if r.chunks is not None else ChunkRun.of_documents(r.ranking, lengths)
                      for r in ranked}
        runs = {system: documents_at_chunks(found) for system, found in chunk_runs.items()}
        if base_spans is None:
            base_spans = collection.spans
    else:
        runs = {r.system: r.ranking for r in ranked}
    pools = {order: pool(runs, base, settings.depth, order, collection.query_ids, settings.persistence)
             for order in ORDERS}
    return Pooled(ranked, collection, base, pools, settings, chunk_runs, base_spans)


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
    top = f"top {s.depth} chunks" if pooled.spans else f"top {s.depth}"
    lines = [f"Pool of {len(pooled.ranked)} runs ({', '.join(r.system for r in pooled.ranked)}) on {c.label}: "
             f"{len(chosen)} unjudged pairs in their {top} over {len(c.query_ids)} questions"
             + (f" ({bare} without any judgment)" if bare else "")]
    if pooled.spans:
        lines.append(f"Span pool: each task shows the question and the whole document, its {len(pooled.marked)} "
                     f"pooled chunk(s) marked; assessors highlight the evidence (judged@{s.k} below: the share of "
                     f"the top {s.k} chunks whose document is judged)")
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
    pairs = pooled.to_judge
    if pooled.spans:
        texts = dict(zip(c.doc_ids, c.doc_texts))
        pairs = pairs.assign(doc_digest=[text_digest(texts.get(d, "")) for d in pairs["doc_id"]])
        write_whole(folder / POOL_CHUNKS, pooled.marked.to_csv(index=False))
    base_digest = write_base(folder, pooled.base, pooled.base_spans if pooled.spans else None)
    pairs.to_csv(partial, index=False)
    partial.replace(folder / POOL_FILE)
    s = pooled.settings
    meta = {"name": name, "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "runs": [{"run_id": r.run_id, "system": r.system} for r in pooled.ranked],
            "experiment_id": pooled.ranked[0].run.info.experiment_id,
            "corpus": c.name, "split": c.split, "label": c.label, "documents_digest": c.corpus_digest,
            "questions_digest": c.queries_digest, "base_file": BASE_FILE,
            "base_qrels": base_digest,
            "spans": pooled.spans,
            "depth": s.depth, "order": s.order, "persistence": s.persistence, "pairs": len(pooled.to_judge),
            "pooled": len(chosen), "budget": s.budget,
            "scale": {str(g): m for g, m in s.grades.meanings}, **(extra or {})}
    write_json(folder / POOL_META, meta)
    return folder


def texts(collection: Collection) -> tuple[dict[str, str], dict[str, str]]:
    """Questions and documents by id."""
    return dict(zip(collection.query_ids, collection.query_texts)), dict(zip(collection.doc_ids, collection.doc_texts))
