"""The judging loop with a known answer: SciFact test, half of its judgments hidden, a simulated assessor.

1. SciFact's 300 test claims are measured as a team's own files (corpus=files): the corpus, the test claims, and a
   random half of the test qrels (seeded); the other half is hidden. Claims whose every judgment is hidden stay in
   (ranked, unjudged), as a team's questions do.
2. A sweep ranks them (``--retrievers``: BM25, dense and RRF(BM25, dense) by default).
3. ``python -m pipeline.judge pool`` pools the sweep (depth 10), in both orders; its report gives judged@10 after
   each budget.
4. The simulated assessor fills the sheet from the hidden half: a pair in it gets its grade, any other pair 0
   (unjudged pairs count non-relevant, as a TREC assessor's pool does).
5. ``pull`` makes the next qrels version; ``rescore`` scores the sweep against it, and against the full test qrels
   (the known answer). Each system's nDCG@10 should move toward its full-qrels value.

``python -m bench.judging_simulation FOLDER [--retrievers bm25,dense,rrf_dense] [--budget N]`` prints every
command's output and, last, the figures docs/judging.md quotes; ``tests/pipeline/judge_steps/test_simulation.py``
runs it with lexical retrievers and checks the moves.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

from bench.paths import REPO, SCIFACT

SEED = 36


def prepare(scifact: Path, folder: Path, seed: int = SEED) -> dict[str, Path]:
    """The claims, the visible half and the hidden half of the test qrels, in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = [line.rstrip("\n").split("\t") for line in (scifact / "qrels" / "test.tsv").read_text().splitlines()[1:]]
    order = np.random.default_rng(seed).permutation(len(rows))
    hidden = {int(i) for i in order[: len(rows) // 2]}
    files = {"half": folder / "half.tsv", "hidden": folder / "hidden.tsv", "full": folder / "full.tsv",
             "questions": folder / "test_claims.jsonl"}
    for name, keep in (("half", lambda i: i not in hidden), ("hidden", lambda i: i in hidden),
                       ("full", lambda i: True)):
        files[name].write_text("query-id\tcorpus-id\tscore\n" + "".join(
            "\t".join(r) + "\n" for i, r in enumerate(rows) if keep(i)))
    tested = {r[0] for r in rows}
    with (scifact / "queries.jsonl").open() as source, files["questions"].open("w") as out:
        for line in source:
            if json.loads(line)["_id"] in tested:
                out.write(line)
    corpus = next(p for p in (scifact / "corpus.jsonl", scifact / "corpus.jsonl.gz") if p.is_file())
    files["corpus"] = corpus
    return files


def command(folder: Path, module: str, *args: str, env: dict[str, str] | None = None) -> str:
    """Run ``python -m MODULE ARGS`` in ``folder``; its output (it must succeed)."""
    done = subprocess.run([sys.executable, "-m", module, *args], cwd=folder, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})}, timeout=4 * 3600)
    if done.returncode != 0:
        raise SystemExit(f"{module} {' '.join(args)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return done.stdout


def sweep(folder: Path, files: dict[str, Path], retrievers: str, env: dict[str, str] | None = None) -> str:
    return command(folder, "pipeline", "-m", "corpus=files", "corpus.name=scifact_half", "metrics=beir",
                   f"corpus.documents.path={files['corpus']}", "corpus.documents.id=_id",
                   "corpus.documents.text=[title,text]", f"corpus.questions.path={files['questions']}",
                   "corpus.questions.id=_id", "corpus.questions.text=[text]",
                   f"corpus.judgments.path={files['half']}", "corpus.judgments.format=qrels",
                   f"retriever={retrievers}", env=env)


def assess(sheet: Path, hidden: Path, out: Path, budget: int | None = None) -> int:
    """Fill the sheet as an assessor who knows the hidden half (any other pair: 0); the first ``budget`` rows only.
    How many rows were graded."""
    truth = {}
    for line in hidden.read_text().splitlines()[1:]:
        q, d, g = line.split("\t")
        truth[(q, d)] = g
    lines = sheet.read_text(encoding="utf-8").splitlines(keepends=True)
    comments = [line for line in lines if line.startswith("#")]
    rows = list(csv.reader(io.StringIO("".join(line for line in lines if not line.startswith("#")))))
    header, body = rows[0], rows[1:]
    graded = 0
    for row in body[: budget if budget is not None else len(body)]:
        row[header.index("grade")] = truth.get((row[1], row[2]), "0")
        row[header.index("assessor")] = "simulated"
        graded += 1
    buffer = io.StringIO()
    csv.writer(buffer).writerows([header, *body])
    out.write_text("".join(comments) + buffer.getvalue(), encoding="utf-8")
    return graded


def runs_of(folder: Path, parent: str) -> list[str]:
    """The sweep's job runs, in job order."""
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{folder / 'mlflow.db'}")
    runs = client.search_runs([client.get_run(parent).info.experiment_id], f"tags.`mlflow.parentRunId` = '{parent}'")
    return [r.info.run_id for r in sorted(runs, key=lambda r: int(r.data.tags.get("rankscope.job", 0)))]


def known_answer(folder: Path, files: dict[str, Path], version: Path) -> str:
    """nDCG@10 of each system on one set of questions, every test claim (the full qrels judge them all), a claim
    without a relevant judgment in a version scoring 0 there: under the visible half, the new version and the full
    test qrels, and how far each is from the full value.

    One set of questions, because a re-scoring's means follow the house rule (over the questions the version judges
    relevant): the new version judges more claims, and only those some system found a relevant document for in its
    top 10, so its mean over them is above the full-qrels mean (pooling's bias), while here a claim no system found
    scores 0 under both."""
    from metrics.evaluation import evaluate
    from metrics.trec import read_qrels, read_trec_run

    half, new, full = (read_qrels(p) for p in (files["half"], version, files["full"]))
    questions = full.relevant_queries(1)
    lines = [f"nDCG@10 over all {len(questions)} test claims (one without a relevant judgment scores 0; judged "
             f"relevant: {len(half.relevant_queries(1))} in the half, {len(new.relevant_queries(1))} in the new "
             f"version):", f"{'system':<18} {'half':>6} {'new':>6} {'full':>6}  {'|half-full|':>11} {'|new-full|':>10}"]
    for job in sorted((folder / "multirun").glob("*/*/[0-9]*"), key=lambda p: int(p.name)):
        system = json.loads((job / "record.json").read_text())["tags"]["rankscope.system"]
        run = read_trec_run(job / "run.trec")
        value = {}
        for name, qrels in (("half", half), ("new", new), ("full", full)):
            scored = evaluate(run, qrels, ["ndcg@10"], query_ids=questions).per_question["ndcg@10"]
            value[name] = float(scored.sum()) / len(questions)
        lines.append(f"{system:<18} {value['half']:6.3f} {value['new']:6.3f} {value['full']:6.3f}  "
                     f"{abs(value['half'] - value['full']):11.3f} {abs(value['new'] - value['full']):10.3f}")
    return "\n".join(lines)


def parent_of(output: str) -> str:
    return re.findall(r"parent run ([0-9a-f]{32})", output)[-1]


def version_of(output: str) -> str:
    return re.findall(r"qrels version ([0-9a-f]{16}) logged", output)[-1]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.judging_simulation", description=__doc__.split("\n\n")[0])
    p.add_argument("folder", type=Path)
    p.add_argument("--retrievers", default="bm25,dense,rrf_dense")
    p.add_argument("--budget", type=int, help="pool only the first N pairs for the assessor (default: the whole pool)")
    p.add_argument("--scifact", type=Path, default=SCIFACT)
    args = p.parse_args(argv)
    folder = args.folder.resolve()
    files = prepare(args.scifact.resolve(), folder)  # the sweep runs in another folder
    said = sweep(folder, files, args.retrievers)
    print(said.split("== Sweep")[-1][:3000])
    parent = parent_of(said)
    runs = runs_of(folder, parent)
    if len(runs) > 1:  # a gate decided on the half qrels, to be decided again on the new version
        candidate, baseline = runs[-1], runs[0]
        gate = subprocess.run([sys.executable, "-m", "pipeline.gate", candidate, "--baseline", baseline], cwd=folder,
                              capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
        print((gate.stdout + gate.stderr).strip())
    budget = ["--budget", str(args.budget)] if args.budget else []  # judged@10 after 300 is among the report's budgets
    pooled = command(folder, "pipeline.judge", "pool", parent, "--to", "to_judge.csv", *budget)
    print(pooled)
    graded = assess(folder / "to_judge.csv", files["hidden"], folder / "judged.csv", args.budget)
    print(f"simulated assessor: {graded} pairs graded")
    pulled = command(folder, "pipeline.judge", "pull", "--from", "judged.csv")
    print(pulled)
    version = version_of(pulled)
    print(command(folder, "pipeline.judge", "rescore", parent, "--qrels", version))
    print("Against the full test qrels (the known answer):")
    print(command(folder, "pipeline.judge", "rescore", parent, "--qrels", str(files["full"])))
    print(known_answer(folder, files, next((folder / "judging").glob(f"*/versions/{version}/qrels.trec"))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
