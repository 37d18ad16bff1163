"""``python -m bench.irds_load``: a 1M-document collection loaded and indexed through ir_datasets, against the same
documents read as a BEIR folder.

The documents are the bench's seeded synthetic corpus (``bench.corpus.synthetic``), written once as a BEIR folder
(``corpus.jsonl``, ``queries.jsonl``, ``qrels/test.tsv``). ir_datasets reads the same three files as a dataset
registered with its own classes (``JsonlDocs``, ``JsonlQueries``, ``BeirQrels`` over ``LocalDownload`` s), so the
two routes differ only in the library between the files and rankscope. Each measurement is a fresh child process
that loads the collection (``pipeline.data``) and indexes it with BM25, then reports its load and index seconds and
its peak resident memory; the routes alternate, ``--repeats`` rounds, medians reported.

A third route is what a BEIR dataset registered in ir_datasets itself does (``beir/scifact`` ...): its documents go
through ir_datasets' docstore (``BeirDocs``), built on first use and read from it afterwards; measured too, first use
and warm, for the record.

Targets: ir_datasets' time at most 1.5x the BEIR folder's; its peak memory within 10% of it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.paths import REPO

if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

DATASET = "rankscope-bench/synthetic"  # the jsonl route's id
DOCSTORE_DATASET = "rankscope-bench/docstore"  # the docstore route's id (ir_datasets' own BEIR classes)
ROUTES = ("beir", "irds")
GIB = 2**30


def write_folder(folder: Path, docs: int, questions: int) -> None:
    """The synthetic corpus as a BEIR folder; every question judged (one relevant document each)."""
    from bench.corpus import synthetic

    corpus = synthetic(docs, questions)
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    with (folder / "corpus.jsonl").open("w", encoding="utf-8") as handle:
        for ident, text in zip(corpus.doc_ids, corpus.doc_texts):
            handle.write(json.dumps({"_id": ident, "title": "", "text": text}) + "\n")
    with (folder / "queries.jsonl").open("w", encoding="utf-8") as handle:
        for ident, text in zip(corpus.query_ids, corpus.query_texts):
            handle.write(json.dumps({"_id": ident, "text": text}) + "\n")
    with (folder / "qrels" / "test.tsv").open("w", encoding="utf-8") as handle:
        handle.write("query-id\tcorpus-id\tscore\n")
        step = max(1, docs // max(1, questions))
        for i, ident in enumerate(corpus.query_ids):
            handle.write(f"{ident}\t{corpus.doc_ids[(i * step) % docs]}\t1\n")


def register(folder: Path) -> None:
    """The folder's files as ir_datasets datasets, made of ir_datasets' own classes."""
    import ir_datasets
    from ir_datasets.datasets.base import Dataset
    from ir_datasets.datasets.beir import BeirDocs, BeirQrels, BeirTitleDoc
    from ir_datasets.formats import GenericQuery, JsonlDocs, JsonlQueries
    from ir_datasets.util.download import LocalDownload

    queries = JsonlQueries(LocalDownload(folder / "queries.jsonl"), query_cls=GenericQuery,
                           mapping={"query_id": "_id", "text": "text"})
    qrels = BeirQrels(LocalDownload(folder / "qrels" / "test.tsv"), qrels_defs={})
    docs = JsonlDocs(LocalDownload(folder / "corpus.jsonl"), doc_cls=BeirTitleDoc,
                     mapping={"doc_id": "_id", "text": "text", "title": "title"},
                     docstore_path=str(folder / "never-built.pklz4"))
    ir_datasets.registry.register(DATASET, Dataset(docs, queries, qrels))
    stored = BeirDocs("rankscope-bench-docstore", LocalDownload(folder / "corpus.jsonl"), BeirTitleDoc)
    ir_datasets.registry.register(DOCSTORE_DATASET, Dataset(stored, queries, qrels))


def child(route: str, folder: Path) -> dict[str, float | str]:
    """Load and index by one route, in this process; what it took."""
    from pipeline.data import IrDatasets, load_beir
    from retrievers import BM25

    start, start_cpu = time.perf_counter(), time.process_time()
    if route == "beir":
        collection = load_beir(folder, "test")
    else:
        register(folder)
        collection = IrDatasets(DATASET if route == "irds" else DOCSTORE_DATASET).load()
    loaded, loaded_cpu = time.perf_counter(), time.process_time()
    BM25().index(collection)
    done, done_cpu = time.perf_counter(), time.process_time()
    return {"route": route, "load_s": loaded - start, "index_s": done - loaded, "total_s": done - start,
            "load_cpu_s": loaded_cpu - start_cpu, "index_cpu_s": done_cpu - loaded_cpu, "cpu_s": done_cpu - start_cpu,
            "peak_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "digest": collection.digest,
            "documents": len(collection.doc_ids)}


def measure(route: str, folder: Path, home: Path) -> dict:
    env = {**os.environ, "IR_DATASETS_HOME": str(home), "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "bench.irds_load", "--child", route, "--folder", str(folder)],
                          env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{route} child failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.irds_load", description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=1_000_000)
    parser.add_argument("--questions", type=int, default=1_000)
    parser.add_argument("--repeats", type=int, default=3, help="rounds of the two routes, alternating")
    parser.add_argument("--docstore", action="store_true", help="also time ir_datasets' docstore route")
    parser.add_argument("--out", type=Path, help="also write the table to this file")
    parser.add_argument("--child", choices=[*ROUTES, "docstore"], help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.folder)))
        return 0

    work = Path(tempfile.mkdtemp(prefix="rankscope-irds-bench-"))
    try:
        folder, home = work / "collection", work / "ir_datasets"
        start = time.perf_counter()
        write_folder(folder, args.docs, args.questions)
        print(f"wrote {args.docs:,} documents in {time.perf_counter() - start:.0f} s "
              f"({(folder / 'corpus.jsonl').stat().st_size / 2**20:.0f} MiB)", file=sys.stderr, flush=True)
        results: dict[str, list[dict]] = {route: [] for route in ROUTES}
        for round_ in range(args.repeats):
            for route in ROUTES if round_ % 2 == 0 else reversed(ROUTES):
                results[route].append(measure(route, folder, home))
                r = results[route][-1]
                print(f"round {round_ + 1} {route}: load {r['load_s']:.1f} s ({r['load_cpu_s']:.1f} s CPU), index "
                      f"{r['index_s']:.1f} s ({r['index_cpu_s']:.1f} s CPU), peak {r['peak_bytes'] / GIB:.2f} GiB",
                      file=sys.stderr, flush=True)
        docstore = [measure("docstore", folder, home) for _ in range(2)] if args.docstore else []
        table = report(args, results, docstore)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(table)
    if args.out:
        args.out.write_text(table + "\n", encoding="utf-8")
    return 0


def report(args: argparse.Namespace, results: dict[str, list[dict]], docstore: list[dict]) -> str:
    def median(route: str, key: str) -> float:
        return statistics.median(r[key] for r in results[route])

    digests = {r["digest"] for rs in results.values() for r in rs} | {r["digest"] for r in docstore}
    cpu_ratio = median("irds", "cpu_s") / median("beir", "cpu_s")
    wall_ratio = median("irds", "total_s") / median("beir", "total_s")
    memory_ratio = median("irds", "peak_bytes") / median("beir", "peak_bytes")

    def row(label: str, r: dict) -> str:
        return (f"| {label} | {r['load_s']:.1f} ({r['load_cpu_s']:.1f}) | {r['index_s']:.1f} ({r['index_cpu_s']:.1f}) "
                f"| {r['total_s']:.1f} ({r['cpu_s']:.1f}) | {r['peak_bytes'] / GIB:.2f} |")

    medians = {route: {k: median(route, k) for k in results[route][0] if k.endswith(("_s", "_bytes"))}
               for route in ROUTES}
    rows = [row("BEIR folder", medians["beir"]), row("ir_datasets (JsonlDocs)", medians["irds"])]
    rows += [row(f"ir_datasets docstore ({'first use' if i == 0 else 'warm'})", r) for i, r in enumerate(docstore)]
    return "\n".join([
        f"Load + BM25 index of {args.docs:,} synthetic documents, {args.questions:,} questions ({os.cpu_count()} "
        f"cores; medians of {args.repeats} rounds, routes alternating, each in a fresh process)",
        "",
        "| route | load, s (CPU s) | index, s (CPU s) | total, s (CPU s) | peak resident (GiB) |",
        "|---|---:|---:|---:|---:|",
        *rows,
        "",
        f"- ir_datasets / BEIR folder, CPU time: {cpu_ratio:.2f}x, wall time: {wall_ratio:.2f}x (target <= 1.5x: "
        f"{'met' if max(cpu_ratio, wall_ratio) <= 1.5 else 'met in CPU time' if cpu_ratio <= 1.5 else 'NOT met'})",
        f"- ir_datasets / BEIR folder, peak memory: {memory_ratio:.3f}x (target within 10%: "
        f"{'met' if abs(memory_ratio - 1) <= 0.10 else 'NOT met'})",
        f"- every route read the same data: {'yes' if len(digests) == 1 else 'NO: digests ' + ', '.join(digests)}",
    ])


if __name__ == "__main__":
    raise SystemExit(main())
