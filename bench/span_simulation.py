"""The span judging loop with a known answer: stitched SciFact, half of its evidence hidden, a simulated assessor who
highlights it.

1. SciFact's abstracts are stitched into pages (``--per-page`` to a page, ``python -m bench.stitch``): each abstract
   relevant to a test claim is a span of its page. The span judgments of a random half of the judged (claim, page)
   pairs are hidden (seeded); the claims are measured as a team's own files (``corpus=files``, the visible half as
   their judgments: a BEIR qrels file with ``start end`` columns), so a claim whose evidence is all hidden stays in,
   ranked and unjudged.
2. A sweep ranks chunks of three sizes (``--sizes``: recursive chunks of 64, 128 and 256 tokens) with each retriever
   (``--retrievers``: BM25 and LSA by default), each job keeping its ``chunks.tsv``.
3. ``python -m pipeline.judge pool`` pools the pairs the sweep's top 10 chunks point to, to a sheet.
4. The simulated assessor highlights, in each pooled pair, the hidden spans of it (by their text when it occurs once
   in the page, else by offsets) at their grades, and marks every other pair not relevant.
5. ``pull`` makes the span judgment version; ``rescore`` re-scores every chunk size from its ``chunks.tsv``, against
   it and against the full judgments (the known answer).

Last it prints, per system (retriever and chunk size), span recall at a token budget (``--budget``) and at 10
chunks over every test claim with evidence (a claim without evidence in a version scoring 0 there), under the
visible half, the new version and the full judgments, the ordering of the systems under each, and how far each is
from the full value.

``python -m bench.span_simulation FOLDER [--sizes 64,128,256] [--retrievers bm25,lsa] [--per-page 10]`` (docs/judging.md
quotes its figures); ``tests/pipeline/judge_steps/test_span_simulation.py`` runs it with BM25 at two sizes and checks
the moves.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import numpy as np

from bench.judging_simulation import command, parent_of
from bench.paths import SCIFACT

SEED = 45
HEADER = "query-id\tcorpus-id\tscore\tstart\tend\n"


def split(stitched: Path, folder: Path, seed: int = SEED) -> dict[str, Path]:
    """The visible half, the hidden half and the full span judgments of the stitched pages, by (claim, page) pair."""
    rows = [line.split("\t") for line in (stitched / "qrels" / "test.tsv").read_text().splitlines()[1:]
            if line.strip()]
    pairs = list(dict.fromkeys((r[0], r[1]) for r in rows))
    order = np.random.default_rng(seed).permutation(len(pairs))
    hidden = {pairs[i] for i in order[: len(pairs) // 2]}
    files = {"half": folder / "half.tsv", "hidden": folder / "hidden.tsv", "full": folder / "full.tsv"}
    for name, keep in (("half", lambda p: p not in hidden), ("hidden", lambda p: p in hidden),
                       ("full", lambda p: True)):
        files[name].write_text(HEADER + "".join("\t".join(r) + "\n" for r in rows if keep((r[0], r[1]))))
    files.update({"documents": stitched / "corpus.jsonl", "questions": stitched / "queries.jsonl"})
    return files


def corpus_args(files: dict[str, Path]) -> list[str]:
    return ["corpus=files", "corpus.name=scifact_pages", f"corpus.documents.path={files['documents']}",
            "corpus.documents.id=_id", "corpus.documents.text=[text]", f"corpus.questions.path={files['questions']}",
            "corpus.questions.id=_id", "corpus.questions.text=[text]", f"corpus.judgments.path={files['half']}",
            "corpus.judgments.format=qrels"]


def measures(budget: int) -> list[str]:
    primary = f"span_recall@{budget}tok"
    return ["metrics.measures=[recall,ndcg,span_recall,span_precision]", "metrics.k=[5,10]",
            f"metrics.budgets=[{budget // 2},{budget},{budget * 2}]", f"metrics.primary={primary}",
            f"metrics.show=[recall@10,span_recall@10,{primary}]"]


def spans_of(path: Path) -> dict[tuple[str, str], list[tuple[int, int, int]]]:
    found: dict[tuple[str, str], list[tuple[int, int, int]]] = {}
    for line in path.read_text().splitlines()[1:]:
        if line.strip():
            q, d, g, s, e = line.split("\t")
            found.setdefault((q, d), []).append((int(s), int(e), int(g)))
    return found


def assess(sheet: Path, hidden: Path, pages: Path, out: Path) -> tuple[int, int, int]:
    """Fill the sheet as an assessor who knows the hidden half: each hidden span of a pooled pair a row, by its text
    when that occurs once in the page, else by its offsets; every other pair 0. How many pairs, spans and texts."""
    import csv
    import io

    truth = spans_of(hidden)
    texts = {r["_id"]: r["text"] for r in map(json.loads, pages.read_text().splitlines())}
    lines = sheet.read_text(encoding="utf-8").splitlines(keepends=True)
    comments = []
    while lines and lines[0].startswith("#"):
        comments.append(lines.pop(0))
    rows = list(csv.reader(io.StringIO("".join(lines))))
    header, body = rows[0], rows[1:]
    at = {name: header.index(name) for name in ("grade", "start", "end", "text", "assessor")}
    filled, pairs, spans, by_text = [], 0, 0, 0
    for row in body:
        pairs += 1
        found = truth.get((row[1], row[2]))
        if not found:
            filled.append(_set(row, at, grade="0", assessor="simulated"))
            continue
        page = texts[row[2]]
        for start, end, grade in found:
            spans += 1
            if page.count(page[start:end]) == 1 and spans % 2:
                filled.append(_set(row, at, grade=str(grade), text=page[start:end], assessor="simulated"))
                by_text += 1
            else:
                filled.append(_set(row, at, grade=str(grade), start=str(start), end=str(end), assessor="simulated"))
    buffer = io.StringIO()
    csv.writer(buffer).writerows([header, *filled])
    out.write_text("".join(comments) + buffer.getvalue(), encoding="utf-8")
    return pairs, spans, by_text


def _set(row: list[str], at: dict[str, int], **values: str) -> list[str]:
    new = list(row)
    for name, value in values.items():
        new[at[name]] = value
    return new


def known_answer(folder: Path, files: dict[str, Path], version: Path, budget: int) -> str:
    """Span recall per chunk size over every claim with evidence in the full judgments (a claim without evidence in
    a version scoring 0 there), under the visible half, the new version and the full judgments."""
    from scipy.stats import kendalltau

    from metrics.chunks import read_chunks
    from metrics.evaluation import evaluate
    from metrics.spans import read_beir_spans
    from metrics.trec import read_trec_run

    versions = {name: read_beir_spans(path)[:2] for name, path in (("half", files["half"]), ("new", version),
                                                                    ("full", files["full"]))}
    questions = versions["full"][0].relevant_queries(1)
    metrics = [f"span_recall@{budget}tok", "span_recall@10"]
    table: dict[str, dict[str, dict[str, float]]] = {m: {} for m in metrics}
    for job in sorted((folder / "multirun").glob("*/*/[0-9]*"), key=lambda p: int(p.name)):
        params = json.loads((job / "record.json").read_text())["params"]
        size = f"{params['retriever.name']} {params['chunker.size']}"
        run, chunks = read_trec_run(job / "run.trec"), read_chunks(job / "chunks.tsv")
        for name, (qrels, spans) in versions.items():
            found = evaluate(run, qrels, metrics, query_ids=questions, chunks=chunks, spans=spans).per_question
            for metric in metrics:
                table[metric].setdefault(size, {})[name] = float(found[metric].sum()) / len(questions)
    lines = [f"Span recall over all {len(questions)} test claims with evidence (a claim without evidence in a "
             f"version scores 0 there; with evidence: {len(versions['half'][0].relevant_queries(1))} in the half, "
             f"{len(versions['new'][0].relevant_queries(1))} in the new version)"]
    for metric, by_size in table.items():
        sizes = list(by_size)
        lines += ["", f"{metric}:", f"{'system':<11} {'half':>6} {'new':>6} {'full':>6}  {'|half-full|':>11} "
                                    f"{'|new-full|':>10}"]
        for size in sizes:
            v = by_size[size]
            lines.append(f"{size:<11} {v['half']:6.3f} {v['new']:6.3f} {v['full']:6.3f}  "
                         f"{abs(v['half'] - v['full']):11.3f} {abs(v['new'] - v['full']):10.3f}")
        for name in ("half", "new", "full"):
            order = sorted(sizes, key=lambda s: -by_size[s][name])
            tau = kendalltau([by_size[s][name] for s in sizes], [by_size[s]["full"] for s in sizes]).statistic
            lines.append(f"ordering under {name}: {' > '.join(order)} (Kendall's tau with full {tau:.3f})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.span_simulation", description=__doc__.split("\n\n")[0])
    p.add_argument("folder", type=Path)
    p.add_argument("--sizes", default="64,128,256", help="the chunk sizes (tokens) swept")
    p.add_argument("--retrievers", default="bm25,lsa")
    p.add_argument("--per-page", type=int, default=10)
    p.add_argument("--budget", type=int, default=512, help="the token budget span recall is compared at")
    p.add_argument("--scifact", type=Path, default=SCIFACT)
    args = p.parse_args(argv)
    folder = args.folder.resolve()
    folder.mkdir(parents=True, exist_ok=True)
    stitched = folder / "pages"
    if not (stitched / "corpus.jsonl").is_file():
        command(folder, "bench.stitch", "scifact", str(stitched), "--per-page", str(args.per_page), "--scifact",
                str(args.scifact.resolve()))
    files = split(stitched, folder)
    said = command(folder, "pipeline", "-m", *corpus_args(files), "chunker=recursive", f"chunker.size={args.sizes}",
                   f"retriever={args.retrievers}", *measures(args.budget))
    print(said.split("== Sweep")[-1][:3000])
    parent = parent_of(said)
    print(command(folder, "pipeline.judge", "pool", parent, "--to", "to_judge.csv"))
    pairs, spans, by_text = assess(folder / "to_judge.csv", files["hidden"], files["documents"], folder / "judged.csv")
    print(f"simulated assessor: {pairs} pooled pairs judged, {spans} hidden spans highlighted ({by_text} by their "
          f"text, located in the page; the rest by offsets), every other pair marked not relevant")
    pulled = command(folder, "pipeline.judge", "pull", "--from", "judged.csv")
    print(pulled)
    version = re.findall(r"span judgment version ([0-9a-f]{16}) logged", pulled)[-1]
    print(command(folder, "pipeline.judge", "rescore", parent, "--qrels", version))
    print("Against the full judgments (the known answer):")
    print(command(folder, "pipeline.judge", "rescore", parent, "--qrels", str(files["full"])))
    print(known_answer(folder, files, next((folder / "judging").glob(f"*/versions/{version}/qrels.tsv")),
                       args.budget))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
