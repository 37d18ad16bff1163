"""``python -m bench.chunking``: what chunking costs, and what a sweep over chunk sizes measures.

**Speed.** SciFact's 5,183 documents chunked at 256 tokens by each chunker, against the library's own call on the
same texts in the same process, alternating, ``--repeats`` rounds, medians: ``recursive`` against
semantic-text-splitter's ``TextSplitter.chunk_all_indices``, ``fixed`` against the tokenizer's ``encode_batch`` (the
offsets its windows are cut from), ``sentence`` against NLTK's Punkt ``span_tokenize`` plus the tokenizer counting
each sentence (packing whole sentences by tokens needs both), ``markdown`` against semantic-text-splitter's
``MarkdownSplitter``. rankscope's cut (``pipeline.chunking.chunked``: the library call in
batches, every offset checked, the arrays) is measured apart from its token counting (each chunk's text through the
tokenizer, for budgets and percentiles; a fixed window counts its own). Target: at most 1.3x the library, said for the
cut and for the cut with its counting.

**A sweep** ``chunker.size=128,256,512 retriever=bm25,lsa`` on SciFact stitched into pages of 10 abstracts
(``bench.stitch``): each job's chunking seconds and its ``cache_chunkings_*`` counters, read from the store. Target:
each size chunked once, the second job of a size spending no time chunking (a memo lookup). With ``--figures`` the
sweep's means are printed too (docs/chunking.md quotes them).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.paths import REPO, SCIFACT

if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

SIZE = 256


def library_call(kind: str, chunker, texts: list[str]):
    """What each chunker's library does on its own with the same texts."""
    if kind == "recursive":
        splitter = chunker.splitter()
        return lambda: splitter.chunk_all_indices(texts)
    if kind == "markdown":
        from pipeline.chunking.chunkers import Recursive

        splitter = Recursive(size=chunker.size).splitter("MarkdownSplitter")
        return lambda: splitter.chunk_all_indices(texts)
    if kind == "fixed":
        tokenizer = chunker.tokens().tokenizer
        return lambda: tokenizer.encode_batch(texts, add_special_tokens=False)
    from nltk.tokenize.punkt import PunktSentenceTokenizer

    punkt, tokens = PunktSentenceTokenizer(), chunker.tokens()

    def sentences_counted() -> None:  # the two calls packing whole sentences by tokens is made of
        tokens.count([t[s:e] for t in texts for s, e in punkt.span_tokenize(t)])

    return sentences_counted


def speed(collection, kinds: list[str], repeats: int) -> list[str]:
    """Each chunker against its library, CPU seconds of the process (all its threads: both sides run the libraries'
    Rust threads, and CPU time is what a loaded machine leaves comparable), alternating, medians."""
    from pipeline.chunking.chunked import chunking
    from pipeline.chunking.chunkers import Fixed, Markdown, Recursive, Sentences

    made = {"recursive": Recursive, "fixed": Fixed, "sentence": Sentences, "markdown": Markdown}
    lines = ["| chunker | chunks | library CPU s | rankscope cut CPU s | cut / library | + token count CPU s | "
             "total / library | target (cut) | target (total) |", "|---|---:|---:|---:|---:|---:|---:|---|---|"]
    texts = list(collection.doc_texts)
    for kind in kinds:
        chunker = made[kind](size=SIZE)
        call = library_call(kind, chunker, texts)
        call()  # warm: the tokenizer, the splitter, the module imports
        theirs, cut, count, chunks = [], [], [], 0
        for _ in range(repeats):
            start = time.process_time()
            call()
            theirs.append(time.process_time() - start)
            start = time.process_time()
            found, _ = chunking(collection, chunker, None)
            total = time.process_time() - start
            share = found.seconds / max(found.seconds + found.counting_seconds, 1e-9)  # wall split of the CPU time
            cut.append(total * share)
            count.append(total * (1 - share))
            chunks = len(found.table)
        lib, ours, counted = (statistics.median(x) for x in (theirs, cut, count))
        cut_ok, total_ok = ("met" if ratio <= 1.3 else "**not met**" for ratio in (ours / lib, (ours + counted) / lib))
        lines.append(f"| {kind} {SIZE} tokens | {chunks:,} | {lib:.2f} | {ours:.2f} | {ours / lib:.2f}x | "
                     f"{counted:.2f} | {(ours + counted) / lib:.2f}x | <= 1.3x: {cut_ok} | <= 1.3x: {total_ok} |")
    return lines


def sweep(scifact: Path, folder: Path, retrievers: str, figures: bool) -> list[str]:
    """The 3-size sweep on stitched SciFact in a fresh store and cache; its jobs' chunking seconds and counters."""
    from mlflow import MlflowClient

    from bench.stitch import scifact_pages

    pages = folder / "scifact_pages"
    scifact_pages(pages, 10, scifact)
    env = {**__import__("os").environ, "PYTHONPATH": str(REPO), "RANKSCOPE_CACHE_DIR": str(folder / "cache")}
    args = [sys.executable, "-m", "pipeline", "-m", "corpus=beir", f"corpus.path={pages}", "corpus.name=scifact_pages",
            "chunker=recursive", "chunker.size=128,256,512", f"retriever={retrievers}", "quiet=true",
            "metrics.k=[10]", "metrics.measures=[recall,ndcg,span_recall,span_precision,span_iou]",
            "metrics.budgets=[256,512,1024,2048]", "metrics.show=[ndcg@10,span_recall@10,span_precision@10,"
            "recall@512tok,span_recall@512tok,recall@2048tok]", "metrics.primary=recall@512tok"]
    done = subprocess.run(args, cwd=folder, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    client = MlflowClient(f"sqlite:///{folder / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("rankscope")
    runs = sorted((r for r in client.search_runs([experiment.experiment_id]) if "mlflow.parentRunId" in r.data.tags),
                  key=lambda r: r.info.start_time)
    lines = ["| job | system | chunking s | computed | reused | chunks |", "|---:|---|---:|---:|---:|---:|"]
    for n, run in enumerate(runs):
        m = run.data.metrics
        lines.append(f"| {n} | {run.data.tags['rankscope.system']} | {m['system/time_chunk_s']:.3f} | "
                     f"{m['system/cache_chunkings_computed']:.0f} | {m['system/cache_chunkings_reused']:.0f} | "
                     f"{m['system/chunks']:,.0f} |")
    computed = sum(r.data.metrics["system/cache_chunkings_computed"] for r in runs)
    lines.append(f"\nchunkings computed: {computed:.0f} for {len(runs)} jobs (target: 3, one per size)")
    if figures:
        lines.append("\n" + done.stdout[done.stdout.find("Mean over questions"):].split("\n\nRank of")[0])
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.chunking", description=__doc__.split("\n\n")[0])
    parser.add_argument("--scifact", type=Path, default=SCIFACT, help="SciFact's BEIR folder (default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--chunkers", default="recursive,fixed,sentence,markdown")
    parser.add_argument("--retrievers", default="bm25,lsa", help="the sweep's retrievers (e.g. bm25,dense)")
    parser.add_argument("--no-sweep", action="store_true")
    parser.add_argument("--figures", action="store_true", help="print the sweep's means too")
    parser.add_argument("--no-speed", action="store_true")
    parser.add_argument("--keep", type=Path, help="run the sweep in this folder and keep it (its report, figures)")
    args = parser.parse_args(argv)
    if not args.scifact.is_dir():
        print(f"bench.chunking: no SciFact folder at {args.scifact} (--scifact PATH, or RANKSCOPE_SCIFACT)",
              file=sys.stderr)
        return 2
    from pipeline.data import load_beir

    if not args.no_speed:
        collection = load_beir(args.scifact, "test")
        print("\n".join(speed(collection, args.chunkers.split(","), args.repeats)))
    if not args.no_sweep:
        folder = args.keep or Path(tempfile.mkdtemp(prefix="rankscope-chunking-"))
        folder.mkdir(parents=True, exist_ok=True)
        try:
            print("\n" + "\n".join(sweep(args.scifact, folder, args.retrievers, args.figures)))
        finally:
            if args.keep is None:
                shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
