"""What re-scoring a run that ranked chunks reads beyond its ``run.trec``: its ``chunks.tsv`` (every chunker at once:
each run brings its own), a version's spans with every judgment without offsets as its whole document (the
corpus's document lengths), and, for ``span_precision_omega``, every chunk of the documents holding evidence, cut
again by the run's own chunker (from its stored config; read from the chunk cache when the job left it there)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import OmegaConf

from metrics.chunks import ChunkRun, Chunks
from metrics.errors import InputError
from metrics.qrels import Qrels
from metrics.spans import Spans
from pipeline.common.names import CHUNKS_DIR
from pipeline.config.build import build_context, checked_chunker, make_chunker
from pipeline.data.collection import Collection
from pipeline.judge_steps.rescoring import Rescored, plan_of, score_ranking
from pipeline.judge_steps.sources import QrelsVersion, Ranked, collection_of
from pipeline.tracking import judgments as tracked
from pipeline.tracking.client import MlflowClient


@dataclass
class ChunkInputs:
    """The corpus (read once, from the first run that needs it) and the chunkings cut again, per chunker config."""

    client: MlflowClient
    tmp: Path
    base: Path
    _collection: Collection | None = None
    _chunkings: dict[str, Chunks] = field(default_factory=dict)

    def collection(self, item: Ranked) -> Collection:
        if self._collection is None:
            self._collection = collection_of(self.client, item.run, self.tmp, self.base)
        return self._collection

    def spans(self, item: Ranked, qrels: Qrels, spans: Spans | None) -> Spans:
        """A version's spans plus its judgments without offsets as whole documents (what a job scores with)."""
        return (spans or Spans.empty()).with_documents(qrels, self.collection(item).doc_lengths)

    def chunks(self, item: Ranked) -> ChunkRun:
        """The run's ranking of chunks (its ``chunks.tsv``)."""
        if item.chunks is None:
            raise InputError(f"{item.system} has no stored chunks.tsv: its span and token-budget measures cannot be "
                             f"scored again (a run of a job before chunks were kept? run the job again)")
        return item.chunks

    def chunking(self, item: Ranked, config: Path, evidence: Spans) -> Chunks:
        """Every chunk, by the run's chunker, of the documents ``evidence`` names (the documents whole when the job
        did not chunk)."""
        cfg = OmegaConf.load(config)
        key = OmegaConf.to_yaml(cfg.get("chunker")) if cfg.get("chunker") is not None else ""
        if key not in self._chunkings:
            self._chunkings[key] = self._cut(cfg, self.collection(item))
        table = self._chunkings[key]
        wanted = set(evidence.doc_ids.tolist())
        return table.take(np.flatnonzero([d in wanted for d in table.doc_ids]))

    def _cut(self, cfg: Any, collection: Collection) -> Chunks:
        given = cfg.get("chunker")
        if given is None or str(given.get("_target_", "")).endswith(".Whole"):  # chunker=none: documents whole
            lengths = collection.doc_lengths
            return Chunks.whole(collection.doc_ids, [lengths[d] for d in collection.doc_ids])
        from pipeline.chunking.chunked import chunking  # only a re-scoring of span_precision_omega pays for it

        context = build_context(cfg, self.base)
        found, _ = chunking(collection, make_chunker(checked_chunker(given), context), context.cache_dir / CHUNKS_DIR
                            if context.cache else None)
        return found.table


def rescore_run(client: MlflowClient, item: Ranked, old: QrelsVersion, new: QrelsVersion, tmp: Path,
                inputs: ChunkInputs) -> Rescored:
    """One run's stored ranking scored against the version it was scored with and the new one, with its job's
    metrics, over the questions its job evaluated and those it ranked; span and token-budget measures from its
    ``chunks.tsv`` and each version's spans."""
    config = tracked.config_file(client, item.run, tmp)
    plan = plan_of(config)
    table = tracked.per_question(client, item.run, tmp)
    questions = list(dict.fromkeys([*table.index.astype(str), *item.ranking.query_ids.astype(str)]))
    said = dict(zip(table.index.astype(str), table["question"].astype(str))) if "question" in table else {}
    scored = []
    for version in (old, new):
        chunks = spans = chunking = None
        if plan.reads_chunks:
            chunks = inputs.chunks(item)
        if plan.reads_spans:
            spans = inputs.spans(item, version.qrels, version.spans)
            if plan.reads_chunking:
                chunking = inputs.chunking(item, config, spans)
        scored.append(score_ranking(item.ranking, version.qrels, plan, questions, said, chunks=chunks, spans=spans,
                                    chunking=chunking))
    return Rescored(item, plan, *scored)
