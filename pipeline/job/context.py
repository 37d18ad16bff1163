"""What a job knows about where it runs, and the hand-off file between a sweep's driver and its jobs.

The driver (a Hydra callback) opens the parent MLflow run and writes ``mlflow_sweep.json`` into the sweep
directory; every job, in the driver's process or in a joblib worker, reads it to nest its run under the parent.
A file rather than an environment variable, so it also records where the sweep's runs went.
"""

from __future__ import annotations

import shlex
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pipeline.common.jsonfile import read_json, write_json
from pipeline.common.names import HANDOFF_FILE


@dataclass(frozen=True)
class JobContext:
    """A job's place: launch directory (relative paths start there), output directory, sweep directory."""

    launch_dir: Path
    output_dir: Path
    sweep_dir: Path | None = None  # None: a single run, not part of a sweep
    job_num: int = 0
    overrides: list[str] = field(default_factory=list)  # this job's command-line overrides
    choices: dict[str, str] = field(default_factory=dict)  # config group -> chosen option


@dataclass(frozen=True)
class SweepHandle:
    """Written by the driver before any job starts: where the jobs log and what varies between them."""

    experiment_id: str
    parent_run_id: str
    varying: list[str]  # override keys swept over ('retriever', 'retriever.k1', ...): they name the systems
    points: list[list[str]] | None = None  # each job's overrides, in job order (None: an optimiser decides them)
    resume: list[str] = field(default_factory=list)  # the command that runs the sweep again in its folder

    def write(self, sweep_dir: Path) -> Path:
        return write_json(sweep_dir / HANDOFF_FILE, asdict(self))

    @classmethod
    def read(cls, sweep_dir: Path) -> SweepHandle | None:
        data = read_json(sweep_dir / HANDOFF_FILE)
        if data is None:
            return None
        return cls(str(data["experiment_id"]), str(data["parent_run_id"]), list(data["varying"]),
                   data.get("points"), list(data.get("resume") or []))

    def resume_command(self) -> str:
        """The resume command as one line a shell reads back (arguments quoted where needed)."""
        return shlex.join(self.resume)


def system_name(retriever_name: str, overrides: list[str], varying: list[str]) -> str:
    """A run's display name: the retriever's name, plus the swept values that tell it apart from its siblings.

    ``BM25`` when only the retriever varies; ``BM25 k1=0.9 b=0.4`` in a parameter grid.
    """
    parts = []
    for override in overrides:
        key, _, value = override.lstrip("+~").partition("=")
        if key in varying and key != "retriever":
            parts.append(f"{key.removeprefix('retriever.')}={short_value(value)}")
    return " ".join([retriever_name, *parts])


def short_value(value: str) -> str:
    """A swept path is named by its last part: ``corpus.path=.../scifact``; a tuner's float by 4 digits."""
    if "/" in value and len(value) > 24:
        return ".../" + value.rstrip("/").rsplit("/", 1)[-1]
    if "." in value and len(value) > 6:
        try:
            return f"{float(value):.4g}"
        except ValueError:
            pass
    return value
