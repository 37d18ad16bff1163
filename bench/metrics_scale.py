"""``python -m bench.metrics_scale``: ``python -m metrics`` on TREC runs of a million lines and more, against
pytrec_eval and trec_eval, end to end (each tool reads the files itself) in fresh processes, taking turns.

The runs are synthetic and seeded (:func:`write_collection`): ``lines / 1000`` questions of 1,000 documents each,
grouped by question and written in rank order as TREC runs are, scores with a few ties; graded judgments (0-3, 10 to
150 per question, a third of them from the question's top 100). Each round runs every tool once on each run, in turn,
so a varying machine load falls on all of them alike; the medians are kept and the ratios are those of one run.

Measured, each as a fresh process: wall time and peak resident memory (``wait4``'s maxrss) of

- ``python -m metrics`` with the five measures (ndcg_cut.10, map, recall.100, recip_rank, P.10), and with
  ``-m all_trec``;
- pytrec_eval: its own ``parse_qrel`` and ``parse_run``, ``RelevanceEvaluator.evaluate`` and the means
  (``compute_aggregated_measure``), the five measures;
- trec_eval (a binary named by ``--trec-eval`` or found on the PATH; skipped when there is none).

Targets (issue 47): rankscope's five-measure time <= 1.0x pytrec_eval's, its peak memory <= 1.5x pytrec_eval's and
about the same at 5M lines as at 1M (it holds a block of questions, not the file), all_trec <= 2x the five measures.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from bench.paths import REPO

FIVE = ["ndcg_cut.10", "map", "recall.100", "recip_rank", "P.10"]
DEPTH = 1000
PYTREC = """
import sys, pytrec_eval
measures = {"ndcg_cut.10", "map", "recall.100", "recip_rank", "P.10"}
with open(sys.argv[1]) as f:
    qrels = pytrec_eval.parse_qrel(f)
with open(sys.argv[2]) as f:
    run = pytrec_eval.parse_run(f)
result = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
for name in sorted(next(iter(result.values()))):
    mean = pytrec_eval.compute_aggregated_measure(name, [q[name] for q in result.values()])
    print(f"{name:<22}\\tall\\t{mean:.4f}")
"""


def label(lines: int) -> str:
    return f"{lines // 1_000_000}M" if lines % 1_000_000 == 0 else f"{lines // 1000}k"


def write_collection(folder: Path, lines: int, seed: int = 0) -> tuple[Path, Path]:
    """A seeded run of ``lines`` lines (1,000 documents a question) and its graded judgments, written once."""
    run, qrels = folder / f"run-{label(lines)}.trec", folder / f"qrels-{label(lines)}.txt"
    if run.is_file() and qrels.is_file():
        return qrels, run
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    questions = max(1, lines // DEPTH)
    judgments = []
    with run.open("w") as handle:
        for q in range(questions):
            docs = rng.choice(8_841_823, size=DEPTH, replace=False)  # MS MARCO's passage ids
            scores = np.round(np.sort(rng.gamma(2.0, 3.0, DEPTH))[::-1] + 10, 3)  # rounding leaves a few ties
            qid = f"{1000 + q}"
            handle.write("".join(f"{qid} Q0 {d} {r} {s} bench\n"
                                 for r, (d, s) in enumerate(zip(docs.tolist(), scores.tolist()), 1)))
            n = int(rng.integers(10, 151))
            top = rng.choice(docs[:100], size=min(n // 3, 100), replace=False)
            others = rng.choice(8_841_823, size=n - len(top), replace=False)
            chosen = list(dict.fromkeys([*top.tolist(), *others.tolist()]))
            grades = rng.choice(4, size=len(chosen), p=[0.5, 0.25, 0.15, 0.1])
            grades[0] = max(int(grades[0]), 1)
            judgments += [f"{qid} 0 {d} {g}\n" for d, g in zip(chosen, grades.tolist())]
    qrels.write_text("".join(judgments))
    return qrels, run


# A Python command run so that it writes its own peak resident memory (VmHWM, its process's alone) when it ends: the
# maxrss wait4 reports for a child counts the memory of the process that forked it
PEAK = """
import atexit, runpy, sys
out, kind, target = sys.argv[1:4]
def peak():
    with open("/proc/self/status") as f:
        kb = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    with open(out, "w") as f:
        f.write(str(kb * 1024))
atexit.register(peak)
sys.argv = [target, *sys.argv[4:]]
if kind == "module":
    runpy.run_module(target, run_name="__main__", alter_sys=True)
else:
    runpy.run_path(target, run_name="__main__")
"""


def measure(command: list[str], out: Path) -> dict[str, float]:
    """Wall time, CPU time and peak resident memory of one fresh process (its stdout kept in ``out``); a Python
    command (``[python, -m, module, ...]`` or ``[python, script, ...]``) reports its own peak."""
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    peak_file = out.with_suffix(".peak")
    peak_file.unlink(missing_ok=True)
    if command[0] == sys.executable:
        kind, target, rest = (("module", command[2], command[3:]) if command[1] == "-m" else
                              ("path", command[1], command[2:]))
        command = [sys.executable, "-c", PEAK, str(peak_file), kind, target, *rest]
    with out.open("w") as handle:
        start = time.perf_counter()
        process = subprocess.Popen(command, stdout=handle, stderr=subprocess.PIPE, cwd=REPO, env=env)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode:
        raise RuntimeError(f"{' '.join(command)} failed: {process.stderr.read().decode()[-500:]}")
    process.stderr.close()
    peak = int(peak_file.read_text()) if peak_file.is_file() else usage.ru_maxrss * 1024  # a binary: an upper bound
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "peak_bytes": peak}


def commands(qrels: Path, run: Path, trec_eval: str | None, work: Path) -> dict[str, list[str]]:
    five = [a for m in FIVE for a in ("-m", m)]
    script = work / "pytrec_end_to_end.py"
    script.write_text(PYTREC)
    out = {
        "rankscope": [sys.executable, "-m", "metrics", *five, str(qrels), str(run)],
        "rankscope all_trec": [sys.executable, "-m", "metrics", "-m", "all_trec", str(qrels), str(run)],
        "pytrec_eval": [sys.executable, str(script), str(qrels), str(run)],
    }
    if trec_eval:
        out["trec_eval"] = [trec_eval, *five, str(qrels), str(run)]
    return out


def same_means(outputs: dict[str, Path]) -> str:
    """Whether the tools print the same five means (4 decimals)."""
    def means(path: Path) -> dict[str, str]:
        return {line.split("\t")[0].strip(): line.split("\t")[2].strip() for line in path.read_text().splitlines()
                if line.split("\t")[0].strip() in {"ndcg_cut_10", "map", "recall_100", "recip_rank", "P_10"}}
    reference = means(outputs["pytrec_eval"])
    differ = [tool for tool in ("rankscope", "trec_eval") if tool in outputs and means(outputs[tool]) != reference]
    return "yes" if not differ else f"**no** ({', '.join(differ)} differ from pytrec_eval)"


def run_scale(sizes: list[int], repeats: int, work: Path, trec_eval: str | None) -> dict:
    results: dict[str, dict] = {}
    for lines in sizes:
        qrels, run = write_collection(work, lines)
        tools = commands(qrels, run, trec_eval, work)
        found: dict[str, list[dict]] = {tool: [] for tool in tools}
        outputs = {tool: work / f"out-{label(lines)}-{tool.replace(' ', '-')}.txt" for tool in tools}
        for r in range(repeats):
            for tool, command in tools.items():  # taking turns: the same load for every tool
                print(f"[{time.strftime('%H:%M:%S')}] {label(lines)}: {tool} (round {r + 1}/{repeats})",
                      file=sys.stderr, flush=True)
                found[tool].append(measure(command, outputs[tool]))
        results[label(lines)] = {
            "lines": sum(1 for _ in run.open("rb")), "run_bytes": run.stat().st_size,
            "same_means": same_means(outputs),
            "tools": {tool: {key: statistics.median(m[key] for m in runs) for key in runs[0]}
                      for tool, runs in found.items()},
            "rounds": found,
        }
    return results


def table(results: dict, repeats: int) -> list[str]:
    lines = [
        f"`python -m metrics` end to end on synthetic TREC runs (1,000 documents a question, graded judgments), fresh "
        f"processes taking turns, medians of {repeats} rounds; ratios are rankscope / peer.",
        "",
        "| run | tool | wall s | CPU s | peak MiB | wall ratio | peak ratio | same five means |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for size, r in results.items():
        ours = r["tools"]["rankscope"]
        for tool, m in r["tools"].items():
            ratio = "" if tool.startswith("rankscope") else (
                f"{ours['wall_s'] / m['wall_s']:.2f} | {ours['peak_bytes'] / m['peak_bytes']:.2f}")
            ratio = ratio or (f"{m['wall_s'] / ours['wall_s']:.2f} (of the five) | "
                              f"{m['peak_bytes'] / ours['peak_bytes']:.2f}" if tool != "rankscope" else " | ")
            lines.append(f"| {size} ({r['lines']:,} lines, {r['run_bytes'] / 2**20:.0f} MiB) | {tool} | "
                         f"{m['wall_s']:.2f} | {m['cpu_s']:.2f} | {m['peak_bytes'] / 2**20:.0f} | {ratio} | "
                         f"{r['same_means'] if tool == 'rankscope' else ''} |")
    return lines


def targets(results: dict) -> list[str]:
    out = []
    for size, r in results.items():
        t = r["tools"]
        wall = t["rankscope"]["wall_s"] / t["pytrec_eval"]["wall_s"]
        peak = t["rankscope"]["peak_bytes"] / t["pytrec_eval"]["peak_bytes"]
        if r["lines"] < 1_000_000:  # below, start-up (numpy's and pyarrow's imports) is most of the time and memory
            out.append(f"- {size}: five measures {wall:.2f}x pytrec_eval's end-to-end time, peak memory {peak:.2f}x "
                       f"(the targets are for runs of 1M lines and more)")
            continue
        out.append(f"- {size}: five measures {wall:.2f}x pytrec_eval's end-to-end time (target <= 1.0): "
                   f"{'met' if wall <= 1.0 else '**not met**'}; peak memory {peak:.2f}x (target <= 1.5): "
                   f"{'met' if peak <= 1.5 else '**not met**'}")
        every = t["rankscope all_trec"]["wall_s"] / t["rankscope"]["wall_s"]
        out.append(f"- {size}: -m all_trec {every:.2f}x the five measures' time (target <= 2): "
                   f"{'met' if every <= 2 else '**not met**'}")
    sizes = list(results)
    if len(sizes) > 1:
        small, large = results[sizes[0]]["tools"], results[sizes[-1]]["tools"]
        ours = large["rankscope"]["peak_bytes"] / small["rankscope"]["peak_bytes"]
        theirs = large["pytrec_eval"]["peak_bytes"] / small["pytrec_eval"]["peak_bytes"]
        out.append(f"- peak memory from {sizes[0]} to {sizes[-1]} lines: rankscope x{ours:.2f}, pytrec_eval "
                   f"x{theirs:.2f} (rankscope holds a block of questions, not the file)")
    return out


def find_trec_eval(named: str | None) -> str | None:
    if named:
        return named
    return shutil.which("trec_eval")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.metrics_scale", description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", default="1m,5m", help="run sizes in lines (default: 1m,5m)")
    parser.add_argument("--repeats", type=int, default=3, help="rounds; medians are kept (default: 3)")
    parser.add_argument("--trec-eval", help="a trec_eval binary to compare with (default: trec_eval on the PATH)")
    parser.add_argument("--work", type=Path, default=REPO / "bench" / "results" / "metrics_scale",
                        help="where the runs are written (once) and the outputs kept")
    parser.add_argument("--out", type=Path, help="also write the table here")
    args = parser.parse_args(argv)
    from bench.__main__ import parse_sizes

    results = run_scale(parse_sizes(args.lines), args.repeats, args.work, find_trec_eval(args.trec_eval))
    text = "\n".join([*table(results, args.repeats), "", *targets(results), ""])
    print(text)
    (args.work / "results.json").write_text(json.dumps(results, indent=1))
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
