"""Scheduled sweeps: the shipped cron, systemd and CI examples are well-formed, and the cron line runs for real."""

from __future__ import annotations

import configparser
import getpass
import re
import shutil
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest
import yaml
from mlflow import MlflowClient

from tests.pipeline.helpers import cli_env

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
CHECKOUT = "/opt/rankscope"  # where the examples expect the repository
COMMAND = "deploy/run-scheduled.sh nightly"
CRON_RANGES = [(0, 59), (0, 23), (1, 31), (1, 12), (0, 7)]  # minute, hour, day of month, month, day of week
_CRON_ITEM = re.compile(r"^(\*|\d+(-\d+)?)(/\d+)?$")


def cron_field(text: str, low: int, high: int) -> None:
    """One field of a cron schedule: ``*``, ``N``, ``N-M``, each optionally ``/STEP``, comma-separated."""
    for item in text.split(","):
        match = _CRON_ITEM.match(item)
        if not match:
            raise ValueError(f"cron field {text!r}: cannot read {item!r}")
        if match.group(3) and int(match.group(3)[1:]) == 0:
            raise ValueError(f"cron field {text!r}: a step of 0")
        if match.group(1) != "*":
            bounds = [int(x) for x in match.group(1).split("-")]
            if not all(low <= b <= high for b in bounds) or bounds != sorted(bounds):
                raise ValueError(f"cron field {text!r}: outside {low}-{high}")


def cron_schedule(fields: list[str]) -> None:
    if len(fields) != 5:
        raise ValueError(f"a cron schedule has 5 fields, got {len(fields)}")
    for text, (low, high) in zip(fields, CRON_RANGES):
        cron_field(text, low, high)


def crontab(text: str) -> tuple[dict[str, str], list[tuple[list[str], str]]]:
    """A user crontab: environment lines and (schedule, command) entries; a malformed line raises ValueError."""
    env, entries = {}, []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if re.match(r"^[A-Za-z_][A-Za-z0-9_]*\s*=", line):
            key, _, value = line.partition("=")
            env[key.strip()] = value.strip()
            continue
        parts = line.split(None, 5)
        if len(parts) < 6:
            raise ValueError(f"cron line without a command: {line!r}")
        cron_schedule(parts[:5])
        entries.append((parts[:5], parts[5]))
    return env, entries


def test_the_cron_validator_refuses_malformed_lines():
    for bad in ["61 2 * * * cmd", "30 24 * * * cmd", "30 2 * 13 * cmd", "*/0 2 * * * cmd", "30 2 * * cmd",
                "30 2-1 * * * cmd", "30 two * * * cmd"]:
        with pytest.raises(ValueError):
            crontab(bad)
    assert crontab("*/15 1-5,23 1 1,6 0 x y")[1] == [(["*/15", "1-5,23", "1", "1,6", "0"], "x y")]


def test_the_cron_example_runs_the_nightly_schedule_every_night():
    _, entries = crontab((DEPLOY / "cron" / "rankscope-nightly.cron").read_text())
    ((schedule, command),) = entries
    assert schedule == ["30", "2", "*", "*", "*"]
    assert command.startswith(f"{CHECKOUT}/{COMMAND} ")


def test_the_wrapper_is_an_executable_shell_script():
    script = DEPLOY / "run-scheduled.sh"
    assert script.stat().st_mode & 0o111
    assert subprocess.run(["sh", "-n", str(script)], capture_output=True).returncode == 0


def unit(name: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=True, interpolation=None)
    parser.optionxform = str  # systemd keys are case-sensitive
    parser.read_string((DEPLOY / "systemd" / name).read_text())
    return parser


def test_the_systemd_units_parse_and_the_timer_starts_the_service():
    service, timer = unit("rankscope-nightly.service"), unit("rankscope-nightly.timer")
    assert service["Service"]["Type"] == "oneshot"
    assert service["Service"]["ExecStart"] == f"{CHECKOUT}/{COMMAND}"
    assert service["Service"]["WorkingDirectory"] == CHECKOUT
    assert timer["Timer"]["Unit"] == "rankscope-nightly.service"
    assert timer["Timer"]["OnCalendar"] == "*-*-* 02:30:00" and timer["Timer"]["Persistent"] == "true"
    assert timer["Install"]["WantedBy"] == "timers.target"


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_systemd_verifies_the_units(tmp_path):
    """``systemd-analyze verify`` on copies pointing at this checkout (it checks that ExecStart exists)."""
    for name in ("rankscope-nightly.service", "rankscope-nightly.timer"):
        text = (DEPLOY / "systemd" / name).read_text().replace(CHECKOUT, str(REPO))
        (tmp_path / name).write_text(text.replace("User=rankscope", f"User={getpass.getuser()}"))
    done = subprocess.run(["systemd-analyze", "verify", str(tmp_path / "rankscope-nightly.timer"),
                           str(tmp_path / "rankscope-nightly.service")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    calendar = unit("rankscope-nightly.timer")["Timer"]["OnCalendar"]
    assert subprocess.run(["systemd-analyze", "calendar", calendar], capture_output=True).returncode == 0


def test_the_ci_workflow_is_scheduled_and_runs_the_same_command():
    workflow = yaml.safe_load((DEPLOY / "ci" / "github-nightly.yml").read_text())
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as true
    (schedule,) = triggers["schedule"]
    cron_schedule(schedule["cron"].split())
    steps = workflow["jobs"]["nightly"]["steps"]
    assert any(COMMAND in step.get("run", "") for step in steps)
    assert any(step.get("uses", "").startswith("actions/upload-artifact") for step in steps)


@pytest.mark.slow  # several processes, tens of seconds: CI runs it in make test-slow
def test_the_cron_line_runs_for_real(tmp_path, empty_store, irds_home):
    """The cron entry's command, as cron runs it (``sh -c``), on this checkout: store and folders in tmp_path, SciFact
    from the tests' seeded ir_datasets cache (the nightly preset reads ir_datasets, as on a user's machine)."""
    _, ((_, command),) = crontab((DEPLOY / "cron" / "rankscope-nightly.cron").read_text())
    shutil.copy(empty_store, tmp_path / "mlflow.db")
    env = {**cli_env(tmp_path), "HOME": str(tmp_path), "RANKSCOPE_PYTHON": sys.executable,
           "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}",
           "RANKSCOPE_SCHEDULE_ROOT": str(tmp_path / "scheduled")}
    done = subprocess.run(["sh", "-c", command.replace(CHECKOUT, str(REPO))], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=900)
    log = (tmp_path / "rankscope-nightly.log").read_text()
    assert done.returncode == 0, log[-3000:]
    today = date.today().isoformat()
    summary = log[log.index(f"rankscope scheduled sweep 'nightly' for {today}: OK"):].strip().splitlines()
    assert len(summary) <= 24  # one screen
    assert any(line.startswith("BM25 k1=0.9") for line in summary)
    assert any(line.startswith("gate    PASS: no baseline yet") for line in summary)
    sweep_dir = tmp_path / "scheduled" / "nightly" / today
    assert (sweep_dir / "scheduled.txt").read_text().strip() == "\n".join(summary)
    client = MlflowClient(env["MLFLOW_TRACKING_URI"])
    runs = client.search_runs([client.get_experiment_by_name("rankscope").experiment_id])
    assert sorted(r.data.tags["rankscope.kind"] for r in runs) == ["job", "job", "sweep"]
    assert all(r.data.tags["schedule"] == "nightly" and r.data.tags["schedule_date"] == today for r in runs)
    assert [r.data.params["retriever.k1"] for r in runs if r.data.tags.get("baseline") == "true"] == ["0.9"]


def scheduled(folder: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline.scheduled", *args], cwd=folder, env=cli_env(folder),
                          capture_output=True, text=True, timeout=900)


def test_overrides_may_follow_the_options(launch_dir):
    done = scheduled(launch_dir, "nightly", "--root", str(launch_dir / "s"), "--date", "2026-01-02", "--gate", "none",
                     "corpus=helpdesk", "metrics=default", "retriever.k1=0.9")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "unrecognized arguments" not in done.stderr
    assert "rankscope scheduled sweep 'nightly' for 2026-01-02: OK" in done.stdout


def test_a_config_error_is_told_once_and_names_no_folder_that_was_never_made(launch_dir):
    done = scheduled(launch_dir, "nightly", "--root", str(launch_dir / "s"), "--gate", "none", "retriever.k1=abc")
    assert done.returncode == 1
    assert "retriever.k1: Value 'abc'" in done.stderr
    assert "FAILED (a job failed" not in done.stdout and "NOT STARTED" in done.stdout
    assert "folder" not in done.stdout.split("NOT STARTED", 1)[1]
    assert not (launch_dir / "s").exists() or not any((launch_dir / "s").rglob("mlflow_sweep.json"))


@pytest.mark.slow  # several processes, tens of seconds: CI runs it in make test-slow
def test_a_sigint_sent_to_the_scheduler_alone_stops_the_sweep(launch_dir, scifact_folder):
    # a terminal's Ctrl-C reaches both processes; `kill -INT` (a supervisor) reaches only this one, which then
    # passes it on instead of letting the sweep run to its end and exit 0
    import signal
    import time

    root = launch_dir / "s"
    process = subprocess.Popen([sys.executable, "-m", "pipeline.scheduled", "nightly", "--root", str(root), "--gate",
                                "none", f"corpus.path={scifact_folder}", "retriever.b=0.4,0.6,0.75"],
                               cwd=launch_dir, env=cli_env(launch_dir), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while not any(root.rglob("mlflow_sweep.json")) and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.05)  # the sweep has opened its parent run: its six jobs are starting
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=300)
    assert process.returncode == 130, out[-2000:] + err[-2000:]
    assert "rankscope: stopped by Ctrl-C: " in err and "Traceback" not in err, err[-3000:]
    assert ": INTERRUPTED (resume: run the same command again the same day) (exit status 130)" in out
