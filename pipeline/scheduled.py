"""``python -m pipeline.scheduled NAME [OVERRIDES...]``: one scheduled sweep, gated, summarised on one screen.

NAME is an experiment file (``conf/experiment/NAME.yaml``). The command runs

    python -m pipeline -m experiment=NAME gate=default hydra.sweep.dir=ROOT/NAME/DATE \
        ++tags.schedule=NAME ++tags.schedule_date=DATE [OVERRIDES...]

so every run (jobs, parent, the gate's comparison) carries the schedule's name and date, and the sweep folder is
one per schedule and day: started again the same day (a retry after a crash, a second timer firing), it resumes
instead of logging anything twice. It then prints a one-screen summary (also saved as ``scheduled.txt`` in the
sweep folder) and exits with the sweep's status: 0 passed, 1 a regression or a failed job, 2 the gate could
not decide. ROOT is ``--root``, else $RANKSCOPE_SCHEDULE_ROOT, else ``multirun/scheduled`` in the current folder.

cron, systemd and CI examples that call it: ``deploy/`` (docs/compare-gate-schedule.md, "Scheduled sweeps").
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from datetime import date
from pathlib import Path

from pipeline.common.names import GATE_FILE, HANDOFF_FILE, SCHEDULE_FILE, SYSTEMS_FILE
from pipeline.config.paths import CONF_DIR

ROOT_VARIABLE = "RANKSCOPE_SCHEDULE_ROOT"
MAX_SYSTEMS = 10
EXIT_ERROR = 2


def sweep_command(name: str, day: str, sweep_dir: Path, gate: str, overrides: Sequence[str]) -> list[str]:
    """The ``python -m pipeline`` command a schedule runs."""
    command = [sys.executable, "-m", "pipeline", "-m", f"experiment={name}", f"hydra.sweep.dir={sweep_dir}",
               f"++tags.schedule={name}", f"++tags.schedule_date={day}"]  # this interpreter: it has rankscope
    if gate != "none":
        command.append(f"gate={gate}")
    return command + list(overrides)


def summary(name: str, day: str, sweep_dir: Path, status: int) -> str:
    """At most a screen: outcome, where, each system's means (first 10), the gate's line, the parent run."""
    gate_file = sweep_dir / GATE_FILE
    gate = gate_file.read_text(encoding="utf-8").strip() if gate_file.is_file() else "not run"
    started = (sweep_dir / HANDOFF_FILE).is_file()  # the sweep's driver got as far as opening its parent run
    if status == 0:
        word = "OK"
    elif not started:
        word = "NOT STARTED (the sweep stopped before any job ran: the reason is above)"
    elif status == 1:
        word = "REGRESSION" if gate.startswith("REGRESSION") else "FAILED (a job failed or was not logged)"
    elif status in (130, 143):
        word = "INTERRUPTED (resume: run the same command again the same day)"
    else:
        word = "GATE COULD NOT DECIDE" if status == EXIT_ERROR else "FAILED"
    lines = [f"rankscope scheduled sweep {name!r} for {day}: {word} (exit status {status})"]
    if not started:
        return lines[0]
    lines += [f"folder  {sweep_dir}", ""]
    systems = sweep_dir / SYSTEMS_FILE
    if systems.is_file():
        with systems.open(encoding="utf-8") as handle:
            rows = list(csv.reader(handle))
        header, body = rows[0], rows[1:]
        shown = [i for i, h in enumerate(header) if i == 0 or "/" not in h]  # means only, not the bounds
        table = [[header[i] for i in shown]] + [[_three_places(row[i]) for i in shown] for row in body[:MAX_SYSTEMS]]
        widths = [max(len(r[c]) for r in table) for c in range(len(shown))]
        lines += ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
                  for r in table]
        if len(body) > MAX_SYSTEMS:
            lines.append(f"... and {len(body) - MAX_SYSTEMS} more systems (systems.csv)")
    else:
        lines.append("no system finished (see the sweep's output above)")
    lines += ["", f"gate    {gate}"]
    handoff = sweep_dir / HANDOFF_FILE
    if handoff.is_file():
        lines.append(f"mlflow  parent run {json.loads(handoff.read_text(encoding='utf-8'))['parent_run_id']}")
    return "\n".join(lines)


def _three_places(value: str) -> str:
    """A CSV cell as the table shows it: a number to three decimals, anything else as it is."""
    try:
        return f"{float(value):.3f}"
    except ValueError:
        return value


def run_sweep(command: list[str]) -> int:
    """Run the sweep and return its exit status. SIGTERM is passed on to it (it closes its runs and says what it
    saved). Ctrl-C in a terminal reaches it anyway (same process group), so this process first waits for it; a
    SIGINT sent to this process alone (``kill -INT``, a supervisor) is passed on when the sweep is still running a
    second later."""
    process = subprocess.Popen(command)
    signal.signal(signal.SIGTERM, lambda signum, frame: process.send_signal(signum))
    while True:
        try:
            code = process.wait()
            break
        except KeyboardInterrupt:
            try:
                code = process.wait(timeout=INTERRUPT_GRACE_S)
                break
            except subprocess.TimeoutExpired:
                process.send_signal(signal.SIGINT)
            except KeyboardInterrupt:
                continue
    return code if code >= 0 else 128 - code  # killed by a signal: 128 + its number, as a shell says


INTERRUPT_GRACE_S = 1.0  # a sweep that got the terminal's Ctrl-C too ignores further ones well within this


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m pipeline.scheduled", description=__doc__.split("\n\n")[0])
    p.add_argument("name", help="the experiment to run: conf/experiment/NAME.yaml")
    p.add_argument("overrides", nargs="*", help="Hydra overrides added to the sweep (corpus.path=..., ...)")
    p.add_argument("--date", default=None, help="the schedule's date, YYYY-MM-DD (default: today)")
    p.add_argument("--root", type=Path, default=None, help=f"where sweep folders go (default: ${ROOT_VARIABLE}, "
                                                            "else multirun/scheduled)")
    p.add_argument("--gate", default="default", help="conf/gate/ entry, or 'none' for no gate")
    args = p.parse_intermixed_args(argv)  # overrides may come before or after the options
    if not (CONF_DIR / "experiment" / f"{args.name}.yaml").is_file():
        known = ", ".join(sorted(f.stem for f in (CONF_DIR / "experiment").glob("*.yaml")))
        print(f"rankscope scheduled: no experiment {args.name!r} (conf/experiment/ has: {known})", file=sys.stderr)
        return EXIT_ERROR
    if args.gate != "none" and not (CONF_DIR / "gate" / f"{args.gate}.yaml").is_file():
        print(f"rankscope scheduled: no gate settings conf/gate/{args.gate}.yaml", file=sys.stderr)
        return EXIT_ERROR
    try:
        day = date.fromisoformat(args.date).isoformat() if args.date else date.today().isoformat()
    except ValueError:
        print(f"rankscope scheduled: --date {args.date!r} is not YYYY-MM-DD", file=sys.stderr)
        return EXIT_ERROR
    root = args.root or Path(os.environ.get(ROOT_VARIABLE) or Path.cwd() / "multirun" / "scheduled")
    sweep_dir = (root / args.name / day).resolve()
    print(f"rankscope scheduled: {args.name} for {day} in {sweep_dir}", flush=True)
    status = run_sweep(sweep_command(args.name, day, sweep_dir, args.gate, args.overrides))
    text = summary(args.name, day, sweep_dir, status)
    if sweep_dir.is_dir():
        (sweep_dir / SCHEDULE_FILE).write_text(text + "\n", encoding="utf-8")
    print("\n" + text, flush=True)
    return status


if __name__ == "__main__":
    from pipeline.common import interrupts

    interrupts.started()  # stops are handled here, as main() says
    sys.exit(main())
