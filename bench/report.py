"""Run every measurement (each in a fresh process), check the rankings agree, and render the markdown table."""

from __future__ import annotations

import json
import os
import pickle
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import numpy as np

from bench.corpus import heavy, synthetic
from bench.paths import REPO, SCIFACT

PEERS = ["bm25s-numpy", "bm25s-numba"]
SMALL_ONLY = {"rank_bm25": 10_000}  # pure-numpy peers that scan every document per question
REL = 1e-5  # bm25s computes in float32
K1, B = 1.2, 0.75
DEPTH = 100


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def label(n: int) -> str:
    return f"{n // 1_000_000}M" if n >= 1_000_000 and n % 1_000_000 == 0 else f"{n // 1000}k"


@dataclass
class Measured:
    """Medians over fresh-process repeats of one system on one corpus, and its agreement with rankscope."""

    system: str
    index_s: float
    first_s: float
    first_questions: int
    steady_s: float
    steady_questions: int
    peak_bytes: float
    own_bytes: float
    agreement: str = ""
    docs: np.ndarray | None = field(default=None, repr=False)
    scores: np.ndarray | None = field(default=None, repr=False)

    @property
    def end_to_end_s(self) -> float:
        return self.index_s + self.first_s

    @property
    def throughput(self) -> float:
        return self.steady_questions / self.steady_s


def run_child(module: str, args: list[str], out: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    subprocess.run([sys.executable, "-m", module, *args, str(out)], check=True, cwd=REPO, env=env)
    return json.loads(out.read_text())


REUSE = False  # set by --reuse: measurements already in the work folder are read, not run again


def run_or_reuse(module: str, args: list[str], out: Path, what: str) -> dict:
    if REUSE and out.exists():
        log(f"{what}: reusing {out.name}")
        return json.loads(out.read_text())
    log(what)
    return run_child(module, args, out)


def measure(system: str, data: Path, first: int, repeats: int, work: Path) -> Measured:
    from bench.systems import SLOW_PEER_REPEATS

    repeats = min(repeats, SLOW_PEER_REPEATS.get(system, repeats))
    reports = []
    for r in range(repeats):
        out = work / f"{data.stem}-{system}-{r}.json"
        reports.append(run_or_reuse("bench.child", [system, str(data), "--k1", str(K1), "--b", str(B),
                                                    "--first", str(first), "--depth", str(DEPTH)], out,
                                    f"{system} on {data.stem} (repeat {r + 1}/{repeats})"))
    arrays = np.load(out.with_suffix(".npz"))

    def med(key: str) -> float:
        return statistics.median(r[key] for r in reports)

    return Measured(system, med("index_s"), med("first_s"), reports[0]["first_questions"], med("steady_s"),
                    reports[0]["steady_questions"], med("peak_bytes"),
                    statistics.median(r["peak_bytes"] - r["baseline_bytes"] for r in reports),
                    docs=arrays["docs"].astype(np.int64), scores=arrays["scores"])


def agreement(ours: Measured, peer: Measured) -> str:
    """Same top-100 per question, allowing differences only among documents tied with the 100th score."""
    same = ties = differ = 0
    worst = 0.0
    for d1, s1, d2, s2 in zip(ours.docs, ours.scores, peer.docs, peer.scores):
        k1, k2 = d1 >= 0, d2 >= 0
        a, b = dict(zip(d1[k1].tolist(), s1[k1].tolist())), dict(zip(d2[k2].tolist(), s2[k2].tolist()))
        common = a.keys() & b.keys()
        if common:
            worst = max(worst, max(abs(a[d] - b[d]) / max(abs(a[d]), 1e-12) for d in common))
        if a.keys() == b.keys():
            same += 1
            continue
        last = min(a.values()) if a else 0.0
        odd = [a[d] for d in a.keys() - b.keys()] + [b[d] for d in b.keys() - a.keys()]
        full = len(a) == DEPTH
        if full and all(abs(v - last) <= REL * max(abs(last), 1e-12) for v in odd):
            ties += 1
        else:
            differ += 1
    total = same + ties + differ
    verdict = "yes" if differ == 0 else "**no**"
    detail = f"{same}/{total} identical" + (f", {ties} differ only among ties at the 100th" if ties else "")
    detail += f", {differ} differ" if differ else ""
    return f"{verdict} ({detail}; scores within {worst:.1e})"


def pickled(path: Path, what: str, make) -> Path:
    """``path``, holding the texts of the corpus ``make()`` generates (made once, then reused)."""
    if not path.exists():
        log(f"generating {what}")
        s = make()
        with path.open("wb") as handle:
            pickle.dump({"doc_texts": s.doc_texts, "query_texts": s.query_texts}, handle, protocol=5)
    return path


def write_corpus(n: int, questions: int, work: Path) -> Path:
    return pickled(work / f"synthetic-{label(n)}-{questions}q.pkl", f"{label(n)} documents, {questions} questions",
                   lambda: synthetic(n, questions, seed=0))


HEAVY_QUESTIONS = 1_000


def write_heavy(n: int, work: Path) -> Path:
    """The heavy workload (bench.corpus.heavy) at ``n`` documents, with its 1,000 questions."""
    return pickled(work / f"heavy-{label(n)}.pkl", f"the heavy workload: {label(n)} documents, {HEAVY_QUESTIONS} "
                   f"questions", lambda: heavy(n, HEAVY_QUESTIONS, seed=0))


def write_scifact(work: Path) -> Path | None:
    if not SCIFACT.is_dir():
        return None
    from pipeline.data.beir import find_corpus_file, read_jsonl

    path = work / "scifact.pkl"
    if not path.exists():
        docs = [text for _, _, text in read_jsonl(find_corpus_file(SCIFACT), "document")]
        questions = [text for _, _, text in read_jsonl(SCIFACT / "queries.jsonl", "question")]
        with path.open("wb") as handle:
            pickle.dump({"doc_texts": docs, "query_texts": questions}, handle, protocol=5)
    return path


def bm25_rows(name: str, data: Path, n_docs: int, first: int, repeats: int, work: Path,
              slow_peers: bool = True) -> list[Measured]:
    systems = ["rankscope", *PEERS] + [s for s, limit in SMALL_ONLY.items() if slow_peers and n_docs <= limit]
    rows = [measure(s, data, first, repeats, work) for s in systems]
    ours = rows[0]
    ours.agreement = "(reference)"
    for peer in rows[1:]:
        peer.agreement = agreement(ours, peer) if peer.system in PEERS else "n/a (Okapi idf, not Lucene)"
    return rows


DUEL = ["rankscope", "bm25s-numba"]


DUEL_ROUNDS = 3


def duel(data: Path, questions: int, work: Path, rounds: int = DUEL_ROUNDS) -> dict:
    """Steady throughput of rankscope and bm25s-numba taking turns in one process (same machine load)."""
    out = work / f"{data.stem}-duel.json"
    return run_or_reuse("bench.duel", [str(data), "--systems", ",".join(DUEL), "--questions", str(questions),
                                       "--rounds", str(rounds), "--k1", str(K1), "--b", str(B)], out,
                        f"interleaved throughput on {data.stem}")


def duel_table(duels: dict[str, dict]) -> list[str]:
    lines = [
        "| corpus | rankscope q/s (wall) | bm25s-numba q/s (wall) | ratio (wall) | rankscope q/s (CPU) | "
        "bm25s-numba q/s (CPU) | ratio (CPU) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for corpus, d in duels.items():
        ours, theirs = d["rankscope"], d["bm25s-numba"]
        qw, tw = ours["questions"] / ours["wall_s"], theirs["questions"] / theirs["wall_s"]
        qc, tc = ours["questions"] / ours["cpu_s"], theirs["questions"] / theirs["cpu_s"]
        lines.append(f"| {corpus} | {qw:,.0f} | {tw:,.0f} | {qw / tw:.2f} | {qc:,.0f} | {tc:,.0f} | {qc / tc:.2f} |")
    return lines


def heavy_table(results: dict[str, list[Measured]], duels: dict[str, dict]) -> list[str]:
    """One line per size: the interleaved steady ratio, end-to-end ratios, agreement and memory, all one run."""
    lines = [
        "| documents | rankscope q/s (CPU) | bm25s-numba q/s (CPU) | steady ratio (CPU) | steady ratio (wall) "
        "| end-to-end s: rankscope / bm25s-numba / bm25s-numpy | end-to-end lead over bm25s-numba, bm25s-numpy "
        "| same top-100 as bm25s-numba | own peak GiB: rankscope / bm25s-numba / bm25s-numpy |",
        "|---|---:|---:|---:|---:|---|---|---|---|",
    ]
    for corpus, rows in results.items():
        by = {m.system: m for m in rows}
        ours, numba, numpy_ = by["rankscope"], by["bm25s-numba"], by["bm25s-numpy"]
        d = duels[corpus]
        r, b = d["rankscope"], d["bm25s-numba"]
        qc, bc = r["questions"] / r["cpu_s"], b["questions"] / b["cpu_s"]
        wall = b["wall_s"] / r["wall_s"]
        lines.append(
            f"| {corpus} | {qc:,.0f} | {bc:,.0f} | {qc / bc:.2f} | {wall:.2f} | {ours.end_to_end_s:.2f} / "
            f"{numba.end_to_end_s:.2f} / {numpy_.end_to_end_s:.2f} | {numba.end_to_end_s / ours.end_to_end_s:.1f}x, "
            f"{numpy_.end_to_end_s / ours.end_to_end_s:.1f}x | {numba.agreement} | {gib(ours.own_bytes)} / "
            f"{gib(numba.own_bytes)} / {gib(numpy_.own_bytes)} |"
        )
    return lines


def heavy_targets(results: dict[str, list[Measured]], duels: dict[str, dict]) -> list[str]:
    out = []
    for corpus, rows in results.items():
        by = {m.system: m for m in rows}
        d = duels[corpus]
        cpu = d["bm25s-numba"]["cpu_s"] / d["rankscope"]["cpu_s"]
        wall = d["bm25s-numba"]["wall_s"] / d["rankscope"]["wall_s"]
        out.append(f"- heavy {corpus}: steady throughput, interleaved in one process, {cpu:.2f}x bm25s-numba's "
                   f"(CPU), {wall:.2f}x (wall) (target >= 1): {'met' if min(cpu, wall) >= 1 else '**not met**'}")
        fastest = min((by[p] for p in PEERS), key=lambda m: m.end_to_end_s)
        lead = fastest.end_to_end_s / by["rankscope"].end_to_end_s
        out.append(f"- heavy {corpus}: end-to-end {lead:.2f}x faster than the fastest bm25s ({fastest.system}; "
                   f"target 2x): {'met' if lead >= 2 else '**not met**'}")
        same = by["bm25s-numba"].agreement.startswith("yes")
        out.append(f"- heavy {corpus}: same top-100 as bm25s-numba: {'met' if same else '**not met**'}")
    return out


def gib(x: float) -> str:
    return f"{x / 2**30:.2f}"


def bm25_table(results: dict[str, list[Measured]]) -> list[str]:
    lines = [
        "| corpus | system | index s | first questions s | end-to-end s | steady q/s (1 thread) | peak RSS GiB "
        "(own) | same top-100 as rankscope | end-to-end ratio | q/s ratio | own-memory ratio |",
        "|---|---|---:|---:|---:|---:|---:|---|---:|---:|---:|",
    ]
    for corpus, rows in results.items():
        ours = rows[0]
        for m in rows:
            if m is ours:
                ratios = "| | |"
            else:
                ratios = (f"| {ours.end_to_end_s / m.end_to_end_s:.2f} | {ours.throughput / m.throughput:.2f} | "
                          f"{ours.own_bytes / m.own_bytes:.2f}")
            lines.append(
                f"| {corpus} | {m.system} | {m.index_s:.2f} | {m.first_s:.2f} ({m.first_questions}) | "
                f"{m.end_to_end_s:.2f} | {m.throughput:,.0f} | {gib(m.peak_bytes)} ({gib(m.own_bytes)}) | "
                f"{m.agreement} {ratios} |"
            )
    return lines


def metric_rows(questions: int, repeats: int, work: Path) -> tuple[list[str], dict]:
    results, values = {}, {}
    for library in ("rankscope", "pytrec_eval", "ranx"):
        reports = []
        for r in range(repeats):
            out = work / f"metrics-{questions}-{library}-{r}.json"
            reports.append(run_or_reuse("bench.metric_child", [library, "--questions", str(questions)], out,
                                        f"metrics: {library} (repeat {r + 1}/{repeats})"))
        results[library] = {k: statistics.median(x[k] for x in reports) for k in ("cold_s", "warm_s")}
        values[library] = dict(np.load(out.with_suffix(".npz")))
    lines = [
        f"Metric evaluation: {questions:,} questions x 100 results, ndcg@10, recall@100, precision@10, mrr, map "
        "(fresh process each; cold = first call, warm = median of the next 5).",
        "",
        "| library | cold s | warm s | cold ratio (rankscope / peer) | warm ratio "
        "| largest difference from rankscope |",
        "|---|---:|---:|---:|---:|---|",
    ]
    ours = results["rankscope"]
    for library, r in results.items():
        if library == "rankscope":
            lines.append(f"| rankscope | {r['cold_s']:.3f} | {r['warm_s']:.3f} | | | (reference) |")
            continue
        diff = max(float(np.max(np.abs(values[library][m] - values["rankscope"][m]))) for m in values["rankscope"])
        lines.append(f"| {library} | {r['cold_s']:.3f} | {r['warm_s']:.3f} | {ours['cold_s'] / r['cold_s']:.2f} | "
                     f"{ours['warm_s'] / r['warm_s']:.2f} | {diff:.1e} |")
    return lines, {"results": results, "values": values}


def bootstrap_line(questions: int = 10_000, resamples: int = 5_000) -> str:
    from metrics.bootstrap import bootstrap_ci

    times = []
    for seed in range(3):  # another column each time: a column seen before is remembered, not resampled
        values = np.random.default_rng(seed).random(questions)
        start = time.perf_counter()
        bootstrap_ci(values, resamples=resamples)
        times.append(time.perf_counter() - start)
    return (f"Bootstrap: `bootstrap_ci` on {questions:,} questions x {resamples:,} resamples (one metric, another "
            f"column each time): {statistics.median(times):.2f} s (median of 3).")


def targets(results: dict[str, list[Measured]], metrics: dict | None, duels: dict[str, dict]) -> list[str]:
    out = []
    for corpus, d in duels.items():
        if corpus.startswith("1M"):
            ours, theirs = d["rankscope"], d["bm25s-numba"]
            wall, cpu = theirs["wall_s"] / ours["wall_s"], theirs["cpu_s"] / ours["cpu_s"]
            out.append(f"- {corpus}: steady throughput, interleaved in one process, {wall:.2f}x bm25s-numba's "
                       f"(wall), {cpu:.2f}x (CPU) (target >= 1): {'met' if min(wall, cpu) >= 1 else '**not met**'}")
    for corpus, rows in results.items():
        ours, peers = rows[0], [r for r in rows if r.system in PEERS]
        if not peers:
            continue
        fastest = min(peers, key=lambda m: m.end_to_end_s)
        speedup = fastest.end_to_end_s / ours.end_to_end_s
        mark = "met" if speedup >= 2 else "**not met**"
        if corpus.startswith(("100k", "1M")):
            out.append(f"- {corpus}: end-to-end {speedup:.2f}x faster than {fastest.system} (target 2x): {mark}")
        numba = next((r for r in peers if r.system == "bm25s-numba"), None)
        if numba is not None and corpus.startswith("1M"):
            ratio = ours.throughput / numba.throughput
            out.append(f"- {corpus}: steady throughput, separate processes (different loads), {ratio:.2f}x "
                       f"bm25s-numba's")
        lowest = min(peers, key=lambda m: m.own_bytes)
        ratio = ours.own_bytes / lowest.own_bytes
        out.append(f"- {corpus}: own peak memory {ratio:.2f}x the lowest bm25s backend's ({lowest.system}; "
                   f"target <= 1): {'met' if ratio <= 1 else '**not met**'}")
    if metrics:
        r = metrics["results"]
        speed = r["pytrec_eval"]["warm_s"] / r["rankscope"]["warm_s"]
        cold = r["pytrec_eval"]["cold_s"] / r["rankscope"]["cold_s"]
        diff = max(float(np.max(np.abs(metrics["values"]["pytrec_eval"][m] - metrics["values"]["rankscope"][m])))
                   for m in metrics["values"]["rankscope"])
        out.append(f"- metrics: {speed:.1f}x faster than pytrec_eval warm, {cold:.1f}x cold (target 5x), largest "
                   f"difference {diff:.1e}: {'met' if min(speed, cold) >= 5 and diff < 1e-9 else '**not met**'}")
    return out


def machine() -> str:
    versions = []
    for package in ("numpy", "scipy", "bm25s", "numba", "rank_bm25", "pytrec-eval-terrier", "ranx"):
        try:
            versions.append(f"{package} {metadata.version(package)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{package} (absent)")
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} cores, "
            f"load average at the end {load}; " + ", ".join(versions))


def run_all(sizes: list[int], first: int, steady: int, repeats: int, repeats_large: int, scifact: bool,
            metrics: bool, metric_questions: int, work: Path, heavy_sizes: list[int] | None = None,
            duel_rounds: int = DUEL_ROUNDS, scale_lines: list[int] | None = None) -> str:
    work.mkdir(parents=True, exist_ok=True)
    started = time.strftime("%Y-%m-%d %H:%M")
    results: dict[str, list[Measured]] = {}
    if scifact:
        data = write_scifact(work)
        if data is None:
            log(f"SciFact skipped: {SCIFACT} is absent")
        else:
            results["SciFact (5,183 docs, 1,109 q)"] = bm25_rows("scifact", data, 5_183, first, repeats, work)
    duels: dict[str, dict] = {}
    for n in sizes:
        data = write_corpus(n, steady, work)
        reps = repeats_large if n >= 1_000_000 else repeats
        results[f"{label(n)} synthetic"] = bm25_rows(label(n), data, n, first, reps, work)
        if n >= 100_000:
            duels[f"{label(n)} synthetic"] = duel(data, first, work)
    heavy_results: dict[str, list[Measured]] = {}
    heavy_duels: dict[str, dict] = {}
    for n in heavy_sizes or []:
        data = write_heavy(n, work)
        reps = repeats_large if n >= 1_000_000 else repeats
        heavy_results[label(n)] = bm25_rows(f"heavy {label(n)}", data, n, HEAVY_QUESTIONS, reps, work,
                                            slow_peers=False)
        heavy_duels[label(n)] = duel(data, HEAVY_QUESTIONS, work, duel_rounds)
    metric_lines, metric_data = metric_rows(metric_questions, repeats, work) if metrics else ([], None)
    scale = None
    if metrics and scale_lines:  # python -m metrics on TREC runs of millions of lines (issue 47)
        from bench import metrics_scale

        found = metrics_scale.run_scale(scale_lines, repeats, work / "metrics_scale",
                                        metrics_scale.find_trec_eval(None))
        scale = [*metrics_scale.table(found, repeats), ""], metrics_scale.targets(found)

    lines = [
        "# Benchmark results",
        "",
        f"`python -m bench` started {started}; {machine()}.",
        "Medians over fresh processes; times in seconds. Ratios are rankscope / peer (below 1 = rankscope "
        "faster or smaller, except q/s where above 1 = rankscope faster).",
        "",
    ]
    if results:
        lines += [
            f"## BM25: index + top-{DEPTH} (k1 = {K1}, b = {B}, Lucene idf, same tokens for every system)",
            "",
            f"Synthetic corpora: Zipf vocabulary (seeded), first {first:,} questions timed cold (index + first "
            f"questions = end-to-end, JIT compilation included), then all {steady:,} again for steady throughput. "
            "Own memory = peak RSS minus RSS once the texts are loaded.",
            "",
            *bm25_table(results),
            "",
        ]
    if duels:
        lines += [
            f"Steady throughput with both systems in one process, taking turns on the same {first:,} questions "
            "(median of 3 rounds each, after warm-up): the fair comparison on a shared machine.",
            "",
            *duel_table(duels),
            "",
        ]
    if heavy_results:
        lines += [
            "## BM25 on the heavy workload (issue 15)",
            "",
            "A Zipf vocabulary of 50,000 terms with exponent 1.0; document lengths log-normal with mean 60 (sigma "
            "0.5, clipped to 5-600); 1,000 questions of 1 + Poisson(5) terms drawn from the same law; no stop "
            "words (the top term is in about 97% of the documents): `bench.corpus.heavy`, seed 0. Steady "
            f"throughput: both systems in one process, taking turns on the 1,000 questions (median of {duel_rounds} "
            "rounds each after a warm-up), one thread. End-to-end: index + the 1,000 questions cold, in a fresh "
            "process (median of the repeats; JIT compilation included). Top-100 agreement allows differences only "
            "among documents tied with the 100th score (bm25s computes in float32).",
            "",
            *heavy_table(heavy_results, heavy_duels),
            "",
        ]
    if metric_lines:
        lines += ["## Metrics", "", *metric_lines, ""]
    if metrics:
        lines += [bootstrap_line(), ""]
    if scale:
        lines += ["## python -m metrics on large runs (issue 47)", "", *scale[0]]
    lines += ["## Targets", "", *targets(results, metric_data, duels), *heavy_targets(heavy_results, heavy_duels),
              *(scale[1] if scale else []), ""]
    return "\n".join(lines)
