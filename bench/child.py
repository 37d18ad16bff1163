"""One system on one corpus, in a fresh process: what a user pays, JIT compilation and peak memory included.

``python -m bench.child SYSTEM DATA OUT --k1 K1 --b B --first N --depth K`` reads DATA (a pickle of
``{"doc_texts": [...], "query_texts": [...]}``), indexes, answers the first N questions (cold: the end-to-end
figure), then all questions again (steady state), and writes timings, peak memory and the rankings to OUT.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time

import numpy as np

from bench.systems import add_common_options, load_texts, make


def rss_bytes() -> int:
    """Resident memory now (Linux /proc), to subtract what the corpus itself occupies."""
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * resource.getpagesize()


def reset_peak() -> None:
    """Forget the peak reached while loading the texts (Linux >= 4.0), so the peak is the system's alone."""
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
    except OSError:
        pass


def peak_bytes() -> int:
    """The peak resident memory since :func:`reset_peak` (VmHWM), else of the whole process."""
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.child")
    parser.add_argument("system")
    add_common_options(parser)
    parser.add_argument("--first", type=int, default=1000)
    args = parser.parse_args(argv)

    docs, questions = load_texts(args.data)
    system = make(args.system, args.k1, args.b)
    reset_peak()
    baseline = rss_bytes()

    start = time.perf_counter()
    system.index(docs)
    indexed = time.perf_counter()
    first_docs, _ = system.search(questions[: args.first], args.depth)
    answered = time.perf_counter()
    steady_questions = questions[: system.max_steady] if system.max_steady else questions
    all_docs, all_scores = system.search(steady_questions, args.depth)
    steady = time.perf_counter()

    np.savez(args.out.with_suffix(".npz"), docs=all_docs.astype(np.int32), scores=all_scores)
    same_first = bool(np.array_equal(first_docs, all_docs[: args.first]))
    report = {
        "system": args.system,
        "index_s": indexed - start,
        "first_s": answered - indexed,
        "first_questions": min(args.first, len(questions)),
        "steady_s": steady - answered,
        "steady_questions": len(steady_questions),
        "peak_bytes": peak_bytes(),
        "baseline_bytes": baseline,
        "repeatable": same_first,
    }
    args.out.write_text(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
