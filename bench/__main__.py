"""``python -m bench``: rankscope's BM25 and metrics against their peers, side by side, in one run.

Each measurement runs in a fresh process (JIT warm-up and peak memory counted as a user pays them), is
repeated, and the median is kept. Prints a markdown table and writes it to bench/results/RESULTS.md (scratch, not
committed); the committed bench/RESULTS.md, which the guides quote, is replaced only when named: --out bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench import report
from bench.report import run_all

HERE = Path(__file__).resolve().parent


def parse_sizes(text: str) -> list[int]:
    units = {"k": 1_000, "m": 1_000_000}
    out = []
    for part in text.lower().split(","):
        part = part.strip()
        if not part:
            continue
        scale = units.get(part[-1], 1)
        out.append(int(float(part.rstrip("km")) * scale))
    return out


# The peers each part compares with: the bench extra (pip install 'rankscope[bench]', or make bench)
PEERS = {"bm25": ("bm25s", "numba", "rank_bm25"), "metrics": ("pytrec_eval", "ranx")}
EXTRA = "pip install 'rankscope[bench]'"


def missing_peers(bm25: bool, metrics: bool) -> list[str]:
    """The peers the parts asked for need and this environment lacks (looked up, not imported)."""
    import importlib.util

    wanted = [*(PEERS["bm25"] if bm25 else ()), *(PEERS["metrics"] if metrics else ())]
    return [name for name in wanted if importlib.util.find_spec(name) is None]


QUICK_NOTE = ("\n(--quick: a smoke run at small sizes, where the memory targets against bm25s and the metrics target "
              "(set for 10,000 questions) are not expected to be met; docs/performance.md says which targets hold at "
              "which size.)\n")


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--sizes", default="10k,100k,1m", help="synthetic corpus sizes (default: 10k,100k,1m)")
    parser.add_argument("--heavy-sizes", default="10k,100k,1m",
                        help="sizes of the heavy workload (issue 15; default: 10k,100k,1m; '' to skip)")
    parser.add_argument("--duel-rounds", type=int, default=3, help="rounds each system answers in the duels")
    parser.add_argument("--questions", default="1000,10000",
                        help="questions for the end-to-end figure, then for steady-state throughput")
    parser.add_argument("--repeats", type=int, default=3, help="fresh processes per measurement (median kept)")
    parser.add_argument("--repeats-1m", type=int, default=1, help="repeats at 1M documents and more")
    parser.add_argument("--metric-lines", default="1m,5m",
                        help="TREC runs python -m metrics reads against pytrec_eval, in lines (default: 1m,5m; '' to "
                             "skip; python -m bench.metrics_scale runs that part alone)")
    parser.add_argument("--no-scifact", action="store_true", help="skip SciFact (it needs ../shared)")
    parser.add_argument("--no-metrics", action="store_true", help="skip the metric and bootstrap timings")
    parser.add_argument("--no-bm25", action="store_true", help="skip the BM25 timings")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: 10k documents, 200/1000 questions, one repeat, 2,000 metric questions")
    parser.add_argument("--reuse", action="store_true",
                        help="read measurements already in the work folder instead of running them again")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "RESULTS.md",
                        help="where the table goes (default: bench/results/RESULTS.md, not committed; the committed "
                             "bench/RESULTS.md only when named here)")
    parser.add_argument("--work", type=Path, default=HERE / "results", help="scratch folder (corpora, outputs)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = make_parser()
    args = parser.parse_args(argv)
    return run(parser, args)


def run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if args.quick:
        args.sizes, args.questions, args.repeats, args.repeats_1m = "10k", "200,1000", 1, 1
        args.heavy_sizes = "10k"
        args.metric_lines = "100k"
    missing = missing_peers(not args.no_bm25, not args.no_metrics)
    if missing:
        print(f"{parser.prog}: the peers to compare with are not installed ({', '.join(missing)}): {EXTRA}, or "
              f"make bench; --no-bm25 or --no-metrics leaves a part out", file=sys.stderr)
        return 2
    first, steady = (int(x) for x in args.questions.split(","))
    report.REUSE = args.reuse
    table = run_all(
        sizes=[] if args.no_bm25 else parse_sizes(args.sizes),
        first=first,
        steady=steady,
        repeats=args.repeats,
        repeats_large=args.repeats_1m,
        scifact=not (args.no_scifact or args.no_bm25),
        metrics=not args.no_metrics,
        metric_questions=2_000 if args.quick else 10_000,
        work=args.work,
        heavy_sizes=[] if args.no_bm25 else parse_sizes(args.heavy_sizes),
        duel_rounds=args.duel_rounds,
        scale_lines=parse_sizes(args.metric_lines),
    )
    if args.quick:
        table += QUICK_NOTE
    print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(table)
    print(f"\nwritten to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
