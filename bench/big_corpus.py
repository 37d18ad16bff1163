"""``python -m bench.big_corpus``: index a 1M-document synthetic corpus with BM25 and rank 10,000 questions.

Reports wall time and memory per stage, and memory per document: what the index holds once built (its sparse
matrices, and the growth of the process's resident memory), and the peak resident memory of the whole run,
checked against ``--budget`` (8 GiB by default; the script exits 1 above it). Questions are ranked through the
pipeline's batches (``pipeline.job.batches``: 1,024 questions at a time, and BM25 ranks 256 at a time inside each),
so ranking memory depends on the batch, not on how many questions there are.

The corpus is the bench's seeded synthetic one (``bench.corpus.synthetic``): words drawn from a Zipf
distribution (exponent 1.07, 200,000 words), document lengths log-normal around 60 words, questions of 3 to 10
words from the same distribution. Frequent words appear in most documents, as in real text, so most questions
match most of the corpus: the hard case for memory.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from bench.paths import REPO

if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

GIB = 2**30


def structure_bytes(*parts: object) -> int:
    """Bytes of the numpy arrays that make up an index: sparse matrices, or objects holding arrays."""
    total = 0
    for part in parts:
        if sp.issparse(part):
            total += part.data.nbytes + part.indices.nbytes + part.indptr.nbytes
        elif part is not None:
            total += sum(v.nbytes for v in vars(part).values() if isinstance(v, np.ndarray))
    return total


def resident() -> int:
    """Current resident memory of this process, bytes."""
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak() -> int:
    """Peak resident memory of this process so far, bytes (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def reset_stage_peak() -> None:
    """Start a new stage's peak (Linux's VmHWM); the whole run's peak (ru_maxrss) is kept."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


def stage_peak() -> int:
    """Peak resident memory since :func:`reset_stage_peak`, bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return peak()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.big_corpus", description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=1_000_000)
    parser.add_argument("--questions", type=int, default=10_000)
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--budget-gib", type=float, default=8.0, help="peak resident memory allowed (GiB)")
    parser.add_argument("--out", type=Path, help="also write the table to this file")
    args = parser.parse_args(argv)

    from bench.corpus import synthetic
    from pipeline.job.batches import rank_in_batches
    from retrievers import BM25

    rows: list[tuple[str, float, int, int]] = []  # stage, seconds, resident after, the stage's peak

    def record(stage: str, started: float) -> None:
        top = stage_peak()
        gc.collect()
        rows.append((stage, time.perf_counter() - started, resident(), top))
        print(f"{stage}: {rows[-1][1]:.1f} s, resident {rows[-1][2] / GIB:.2f} GiB, peak {rows[-1][3] / GIB:.2f} GiB",
              file=sys.stderr, flush=True)
        reset_stage_peak()

    reset_stage_peak()
    start = time.perf_counter()
    corpus = synthetic(args.docs, args.questions)
    record("generate corpus", start)
    before_index = rows[-1][2]

    start = time.perf_counter()
    bm25 = BM25().index(corpus)
    record("index (tokenise + BM25 weights)", start)
    index_bytes = structure_bytes(getattr(bm25, "_by_term", None), getattr(bm25, "_postings", None))
    index_growth = rows[-1][2] - before_index

    start = time.perf_counter()
    run = rank_in_batches(bm25, corpus.query_ids, corpus.query_texts, args.depth, len(corpus.doc_ids))
    record(f"rank {args.questions:,} questions (depth {args.depth})", start)
    ranked = rows[-1][1]
    answered = int((run.lengths > 0).sum())

    worst = max(r[3] for r in rows)  # the stage peaks (resetting them also resets ru_maxrss)
    lines = [
        f"BM25 on a synthetic Zipf corpus: {args.docs:,} documents, {args.questions:,} questions, "
        f"{os.cpu_count()} cores",
        "",
        "| stage | seconds | resident after (GiB) | peak during the stage (GiB) |",
        "|---|---:|---:|---:|",
        *[f"| {stage} | {seconds:.1f} | {now / GIB:.2f} | {top / GIB:.2f} |" for stage, seconds, now, top in rows],
        "",
        f"- index structures (BM25's weights and postings): {index_bytes / args.docs:.0f} bytes per document; "
        f"resident growth while indexing: {index_growth / args.docs:.0f} bytes per document",
        f"- ranking: {args.questions / ranked:.0f} questions/s; {answered:,} questions with at least one result",
        f"- peak resident memory: {worst / GIB:.2f} GiB (budget {args.budget_gib:g} GiB)",
    ]
    table = "\n".join(lines)
    print(table)
    if args.out:
        args.out.write_text(table + "\n", encoding="utf-8")
    return 0 if worst <= args.budget_gib * GIB else 1


if __name__ == "__main__":
    raise SystemExit(main())
