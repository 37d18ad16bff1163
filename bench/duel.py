"""Steady-state throughput of two systems interleaved in one process, so both see the same machine load.

``python -m bench.duel DATA OUT --systems rankscope,bm25s-numba --questions 1000 --rounds 3`` indexes with
both, answers a few questions with each (warm-up: JIT compilation), then alternates rounds of the same
questions and keeps each system's median wall and CPU time. On a shared machine, separate runs minutes apart
can see very different loads; rounds taken turn about cannot.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

from bench.systems import add_common_options, load_texts, make


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.duel")
    add_common_options(parser)
    parser.add_argument("--systems", default="rankscope,bm25s-numba")
    parser.add_argument("--questions", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    docs, questions = load_texts(args.data)
    questions = questions[: args.questions]
    systems = [make(name, args.k1, args.b) for name in args.systems.split(",")]
    for system in systems:
        system.index(docs)
        system.search(questions[:10], args.depth)  # warm-up
    del docs
    wall: dict[str, list[float]] = {s.name: [] for s in systems}
    cpu: dict[str, list[float]] = {s.name: [] for s in systems}
    for _ in range(args.rounds):
        for system in systems:
            w, c = time.perf_counter(), time.process_time()
            system.search(questions, args.depth)
            wall[system.name].append(time.perf_counter() - w)
            cpu[system.name].append(time.process_time() - c)
    report = {name: {"questions": len(questions), "wall_s": statistics.median(wall[name]),
                     "cpu_s": statistics.median(cpu[name])} for name in wall}
    args.out.write_text(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
