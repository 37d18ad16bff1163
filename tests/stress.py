"""``make test-stress`` (``python -m tests.stress``): the default suite, and every test that stops a process, run again
and again beside CPU-busy loops, as on a loaded laptop or a shared CI runner. A test that passes alone but fails
under load depends on timing; this is how to find it before a user does.

- ``--suite-runs N`` (5): the default suite (``python -m pytest -q``), N times;
- ``--stop-runs M`` (20): the tests that kill, interrupt or stop a process, M times: those whose test function or
  one of its fixtures sends a signal (``send_signal``, ``os.kill``, ``killpg``, ``.kill()``, ``.terminate()``, a
  ``SIGINT``/``SIGTERM``/``SIGKILL``) or stops a sweep at a chosen job (``stop_after``);
- ``--busy B`` (2): CPU-busy loops beside them the whole time (``yes > /dev/null``).

Prints one line per run (passed, failed, seconds, the load average) and a summary with every failed test's id, and
writes them to ``--out`` (default ``stress.md`` in the working folder). Exit status 1 if any run failed.

Also a pytest plugin (``-p tests.stress``): with ``RANKSCOPE_STRESS=stops`` set, it keeps only the stopping tests
(collected once; each run then names them, so that only their files are collected).
"""

from __future__ import annotations

import argparse
import inspect
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SELECT = "RANKSCOPE_STRESS"
STOPS = re.compile(r"send_signal|os\.kill\(|killpg|\.kill\(\)|\.terminate\(\)|SIG(?:INT|TERM|KILL)\b|stop_after\(")


def _source(function: Any) -> str:
    try:
        return inspect.getsource(function)
    except (OSError, TypeError):
        return ""


def stops_a_process(item: Any) -> bool:
    """Whether the test, or one of the fixtures it uses, stops a process (see the module's docstring)."""
    sources = [_source(getattr(item, "function", None))]
    info = getattr(item, "_fixtureinfo", None)
    for definitions in (info.name2fixturedefs.values() if info is not None else ()):
        sources += [_source(definition.func) for definition in definitions]
    return any(STOPS.search(text) for text in sources)


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    """With ``RANKSCOPE_STRESS=stops``: only the tests that stop a process."""
    if os.environ.get(SELECT) != "stops":
        return
    kept = [item for item in items if stops_a_process(item)]
    dropped = [item for item in items if item not in kept]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = kept


@dataclass
class Outcome:
    kind: str
    number: int
    status: int
    passed: int
    failed: int
    seconds: float
    load: str
    failures: list[str] = field(default_factory=list)

    def line(self) -> str:
        return (f"| {self.kind} | {self.number} | {self.passed} | {self.failed} | {self.seconds:.0f} | {self.load} | "
                f"{' '.join(self.failures) or '-'} |")


SUMMARY = re.compile(r"(\d+) (passed|failed|error|errors)\b")


def run_pytest(kind: str, number: int, extra: list[str], env: dict[str, str], log: Path) -> Outcome:
    start = time.monotonic()
    with log.open("w", encoding="utf-8") as out:
        status = subprocess.call([sys.executable, "-m", "pytest", "-q", "-rfE", *extra], cwd=REPO, env=env,
                                 stdout=out, stderr=subprocess.STDOUT)
    seconds = time.monotonic() - start
    text = log.read_text(encoding="utf-8", errors="replace")
    last = text.strip().splitlines()[-1] if text.strip() else ""
    counts = {word: int(n) for n, word in SUMMARY.findall(last)}
    failures = sorted({line.split()[1] for line in text.splitlines() if line.startswith(("FAILED ", "ERROR "))})
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    return Outcome(kind, number, status, counts.get("passed", 0),
                   counts.get("failed", 0) + counts.get("error", 0) + counts.get("errors", 0), seconds, load, failures)


def stopping_tests(env: dict[str, str], extra: list[str]) -> list[str]:
    """The node ids of the tests that stop a process, collected once: each run then collects only their files."""
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "--collect-only", "-p", "tests.stress", *extra],
                          cwd=REPO, env={**env, SELECT: "stops"}, capture_output=True, text=True, check=False)
    return [line for line in done.stdout.splitlines() if "::" in line and not line.startswith(" ")]


def busy_loops(count: int) -> list[subprocess.Popen]:
    """``count`` processes that keep a core busy each: ``yes > /dev/null`` (a Python loop where there is no yes)."""
    command = ["yes"] if shutil.which("yes") else [sys.executable, "-c", "while True: pass"]
    return [subprocess.Popen(command, stdout=subprocess.DEVNULL) for _ in range(count)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.stress", description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite-runs", type=int, default=5, help="runs of the default suite (default 5)")
    parser.add_argument("--stop-runs", type=int, default=20, help="runs of the stopping tests (default 20)")
    parser.add_argument("--busy", type=int, default=2, help="CPU-busy loops beside them (default 2)")
    parser.add_argument("--out", type=Path, default=Path("stress.md"), help="where the table goes (stress.md)")
    parser.add_argument("--logs", type=Path, default=None, help="keep each run's pytest output here (a folder)")
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments, after --")
    args = parser.parse_args(argv)
    logs = args.logs or Path(os.environ.get("TMPDIR", "/tmp")) / f"rankscope-stress-{os.getpid()}"
    logs.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    stops = stopping_tests(env, args.pytest_args) if args.stop_runs else []
    if args.stop_runs and not stops:
        print(f"{parser.prog}: no test that stops a process was found", file=sys.stderr)
        return 2
    plan = [("suite", i, []) for i in range(1, args.suite_runs + 1)]
    plan += [("stops", i, stops) for i in range(1, args.stop_runs + 1)]
    header = (f"Stress: {args.busy} busy loop(s) beside, {args.suite_runs} run(s) of the default suite, "
              f"{args.stop_runs} of the {len(stops)} tests that stop a process (load averages: 1, 5, 15 min, at each "
              f"run's end)\n\n"
              "| tests | run | passed | failed | seconds | load | failed tests |\n|---|---:|---:|---:|---:|---|---|")
    print(header, flush=True)
    outcomes: list[Outcome] = []
    stopped = False
    loops = busy_loops(args.busy)
    try:
        for kind, number, extra in plan:
            outcome = run_pytest(kind, number, [*args.pytest_args, *extra], env, logs / f"{kind}-{number}.log")
            outcomes.append(outcome)
            print(outcome.line(), flush=True)
    except KeyboardInterrupt:
        stopped = True
        print("stopped by Ctrl-C: the table holds the runs that ended", file=sys.stderr)
    finally:
        for loop in loops:
            loop.terminate()
            loop.wait()
    failed = [o for o in outcomes if o.status != 0]
    summary = []
    for kind in ("suite", "stops"):
        runs = [o for o in outcomes if o.kind == kind]
        if runs:
            bad = [o for o in runs if o.status != 0]
            summary.append(f"{kind}: {len(runs)} run(s), {len(bad)} failed, {sum(o.passed for o in runs)} tests "
                           f"passed, {sum(o.failed for o in runs)} failed; "
                           f"{sum(o.seconds for o in runs) / len(runs):.0f} s a run")
    text = "\n".join([header, *(o.line() for o in outcomes), "", *summary, f"pytest output: {logs}"]) + "\n"
    args.out.write_text(text, encoding="utf-8")
    print("\n" + "\n".join(summary) + f"\n(written to {args.out}; pytest output in {logs})", flush=True)
    return 130 if stopped else 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
