"""What a ranking of chunks feeds a prompt, and what that holds: span metrics at k chunks and token-budget metrics.

**Fed chunks.** At ``k`` (``span_recall@5``): a question's top k chunks. At a token budget (``recall@512tok``): its
chunks in rank order, whole, while their tokens add up to at most the budget; the first chunk that would overflow
it ends the context (it is neither cut to fit nor skipped for a smaller one after it), so a chunk larger than the
budget leaves the context empty. Tokens are counted per chunk as the chunking counted them (``chunks.tsv``'s
``tokens``); overlapping chunks cost their shared tokens twice, as they would in a prompt.

**Span metrics** (Smith and Troynikov, "Evaluating Chunking Strategies for Retrieval", Chroma, 2024), on characters.
``E`` is the question's evidence (:meth:`metrics.spans.Spans.evidence`), ``R`` the union of the fed chunks'
characters, ``|c|`` a fed chunk's length:

- ``span_recall``: ``|E ∩ R| / |E|``;
- ``span_precision``: ``|E ∩ R| / Σ|c|`` (a character fed twice, by overlapping chunks, counts twice below);
- ``span_iou``: ``|E ∩ R| / (Σ|c| + |E \\ R|)``;
- ``span_precision_omega`` (no k): ``|E ∩ H| / |H ∪ E|``, ``H`` the union of every chunk of the chunking that holds
  any evidence: the precision of a retriever that feeds exactly those chunks, the ceiling the chunking sets.

The report's recall sums the evidence's lengths; here overlapping spans count once (the same for disjoint spans).

**Budget metrics** on documents: each document in the context counts once, at its first chunk there.
``recall@Btok`` is the share of the question's relevant documents in the context, ``hit_rate@Btok`` 1 when any is,
``ndcg@Btok`` the DCG of the context's chunks (each gaining its document's grade the first time that document
appears; its later chunks gain nothing) over the ideal DCG of the question's judgments at as many positions as the
context holds chunks (0 for an empty context). ``span_recall@Btok`` (and the other span measures) use the context
as the fed chunks.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from metrics import ranking
from metrics.chunks import ChunkRun, Chunks
from metrics.errors import InputError
from metrics.judged import judge
from metrics.qrels import Qrels
from metrics.run import PAD, Run
from metrics.spans import Ranges, Spans, covered, merged, overlap
from metrics.spec import OMEGA, SPAN_MEASURES, MetricSpec

_REPEAT = "\x00repeat"  # the document axis entry of a document's later chunks in a context: judged nowhere


def fed(chunk_run: ChunkRun, spec: MetricSpec) -> np.ndarray:
    """Which ranked chunks ``spec`` feeds, as a (questions x depth) mask: the top k, or a budget's context."""
    run = chunk_run.run
    valid = run.docs != PAD
    if spec.unit == "tok":
        tokens = chunk_run.field(chunk_run.chunks.tokens, 0)
        if (tokens[valid] < 0).any():
            raise InputError(f"{spec.name} needs each chunk's tokens, which this ranking of chunks does not have")
        return valid & (np.cumsum(np.where(valid, tokens, 0), axis=1) <= spec.k)
    if spec.k is None:
        return valid
    return valid & (np.arange(run.depth) < spec.k)[None, :]


def _span_values(chunk_run: ChunkRun, mask: np.ndarray, evidence: Sequence[dict[str, Ranges]],
                 measure: str) -> np.ndarray:
    """One span measure per question, from the fed chunks ``mask`` selects."""
    chunks, docs = chunk_run.chunks, chunk_run.run.docs
    fed_length = np.where(mask, chunk_run.field(chunks.lengths, 0), 0).sum(axis=1).astype(np.float64)
    out = np.zeros(len(evidence))
    for i, found in enumerate(evidence):
        if not found:
            continue
        total = sum(covered(r) for r in found.values())
        pieces: dict[str, list[tuple[int, int]]] = {}
        for c in docs[i][mask[i]]:
            doc = chunks.doc_ids[c]
            if doc in found:
                pieces.setdefault(doc, []).append((int(chunks.starts[c]), int(chunks.ends[c])))
        inside = sum(overlap(found[d], merged(r)) for d, r in pieces.items())
        if measure == "span_recall":
            out[i] = inside / total
        elif measure == "span_precision":
            out[i] = inside / fed_length[i] if fed_length[i] else 0.0
        else:  # span_iou
            out[i] = inside / (fed_length[i] + total - inside)
    return out


def omega(chunking: Chunks, evidence: Sequence[dict[str, Ranges]]) -> np.ndarray:
    """``span_precision_omega`` per question: how precise feeding exactly the chunks that hold evidence would be."""
    import pandas as pd

    wanted = {d for found in evidence for d in found}
    keep = np.fromiter((d in wanted for d in chunking.doc_ids), dtype=bool, count=len(chunking))
    by_doc: dict[str, list[tuple[int, int]]] = {}
    frame = pd.DataFrame({"doc": chunking.doc_ids[keep], "start": chunking.starts[keep], "end": chunking.ends[keep]})
    for doc, group in frame.groupby("doc", sort=False):
        by_doc[str(doc)] = list(zip(group["start"].tolist(), group["end"].tolist()))
    out = np.zeros(len(evidence))
    for i, found in enumerate(evidence):
        inside = union = 0
        for doc, ranges in found.items():
            holding = merged([c for c in by_doc.get(doc, []) if overlap(ranges, [c]) > 0])
            shared = overlap(ranges, holding)
            inside += shared
            union += covered(holding) + covered(ranges) - shared
        out[i] = inside / union if union else 0.0
    return out


def context_run(chunk_run: ChunkRun, mask: np.ndarray) -> Run:
    """The fed chunks as a ranking of documents by chunk position: a document at its first fed chunk, its later fed
    chunks naming no judged document, positions after the context empty."""
    run = chunk_run.run
    codes, vocab = chunk_run.doc_vocab
    n_q, width = run.docs.shape
    doc = np.where(mask, codes[np.maximum(run.docs, 0)], -1)
    first = np.zeros(n_q * width, dtype=bool)
    if mask.any():
        key = np.where(mask, np.arange(n_q, dtype=np.int64)[:, None] * (len(vocab) + 1) + doc + 1, -1).ravel()
        _, where = np.unique(key, return_index=True)
        first[where] = True
    first = first.reshape(n_q, width) & mask
    cells = np.where(first, doc, np.where(mask, len(vocab), PAD))
    axis = np.append(vocab, _REPEAT).astype(object)
    return Run(run.query_ids, axis, cells, np.where(mask, run.scores, np.nan), run.name)


def _budget_values(ctx: Run, n_fed: np.ndarray, qrels: Qrels, query_ids: list[str], measure: str, level: int,
                   gain: str) -> np.ndarray:
    joined = judge(ctx, qrels, query_ids)
    rel = joined.relevant(level)
    if measure == "recall":
        return ranking.recall(rel, joined.n_relevant(level), None)
    if measure == "hit_rate":
        return (rel.count() > 0).astype(np.float64)
    hits, ideal = joined.gains(gain)
    ideal = ideal.where(ideal.cols < n_fed[ideal.rows])
    return ranking.ndcg(hits, ideal, None)


def chunk_values(chunk_run: ChunkRun, qrels: Qrels, spans: Spans | None, specs: Sequence[MetricSpec],
                 query_ids: list[str], level: int, gain: str, chunking: Chunks | None = None) -> dict[str, np.ndarray]:
    """Every chunk measure of ``specs`` (span measures and budget measures) per question of ``query_ids``."""
    rows = chunk_run.rows(query_ids)
    evidence: list[dict[str, Ranges]] = []
    if any(s.measure in SPAN_MEASURES for s in specs):
        if spans is None:
            names = ", ".join(s.name for s in specs if s.measure in SPAN_MEASURES)
            raise InputError(f"{names}: span metrics need span judgments (python -m metrics: --spans spans.tsv)")
        found = spans.evidence(level)
        evidence = [found.get(q, {}) for q in query_ids]
    out: dict[str, np.ndarray] = {}
    for spec in specs:
        if spec.measure == OMEGA:
            if chunking is None:
                raise InputError(f"{spec.name} needs the whole chunking, not only the ranked chunks "
                                 f"(python -m metrics: --chunking chunking.tsv)")
            out[spec.name] = omega(chunking, evidence)
            continue
        mask = fed(rows, spec)
        if spec.measure in SPAN_MEASURES:
            out[spec.name] = _span_values(rows, mask, evidence, spec.measure)
        else:
            out[spec.name] = _budget_values(context_run(rows, mask), mask.sum(axis=1), qrels, query_ids,
                                            spec.measure, level, gain)
    return out
