"""What a job knows about where it runs, and the hand-off file between a sweep's driver and its jobs.

The driver (a Hydra callback) opens the parent MLflow run and writes ``mlflow_sweep.json`` into the sweep
directory; every job, in the driver's process or in a joblib worker, reads it to nest its run under the parent.
A file rather than an environment variable, so it also records where the sweep's runs went.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pipeline.common.jsonfile import read_json, write_json
from pipeline.common.names import HANDOFF_FILE, JOB_LOG_FILE
from pipeline.data.collection import corpus_label


@dataclass(frozen=True)
class JobContext:
    """A job's place: launch directory (relative paths start there), output directory, sweep directory."""

    launch_dir: Path
    output_dir: Path
    sweep_dir: Path | None = None  # None: a single run, not part of a sweep
    job_num: int = 0
    overrides: list[str] = field(default_factory=list)  # this job's command-line overrides
    choices: dict[str, str] = field(default_factory=dict)  # config group -> chosen option
    log_file: Path | None = None  # Hydra's log of the job (None: ``output_dir / JOB_LOG_FILE``)

    @property
    def log(self) -> Path:
        return self.log_file or self.output_dir / JOB_LOG_FILE


@dataclass(frozen=True)
class SweepHandle:
    """Written by the driver before any job starts: where the jobs log and what varies between them."""

    experiment_id: str
    parent_run_id: str
    varying: list[str]  # override keys swept over ('retriever', 'retriever.k1', ...): they name the systems
    points: list[list[str]] | None = None  # each job's overrides, in job order (None: an optimiser decides them)
    resume: list[str] = field(default_factory=list)  # the command that runs the sweep again in its folder
    resumed: bool = True  # False: a new parent run, which holds no job's run yet

    def write(self, sweep_dir: Path) -> Path:
        return write_json(sweep_dir / HANDOFF_FILE, asdict(self))

    @classmethod
    def read(cls, sweep_dir: Path) -> SweepHandle | None:
        data = read_json(sweep_dir / HANDOFF_FILE)
        if data is None:
            return None
        return cls(str(data["experiment_id"]), str(data["parent_run_id"]), list(data["varying"]),
                   data.get("points"), list(data.get("resume") or []), bool(data.get("resumed", True)))

    def resume_command(self) -> str:
        """The resume command as one line a shell reads back (arguments quoted where needed)."""
        return shlex.join(self.resume)


TARGET_KEY = "retriever._target_"
SYSTEM_KEYS = ("retriever.", "retriever@retriever.", "text.", "depth", "chunker")  # overrides that change what a system
# ranks (a chunker: its choice and settings)


def system_name(retriever_name: str, overrides: list[str], varying: list[str],
                defaults: Mapping[str, object] | None = None) -> str:
    """A system's display name: the retriever's name, then every override that changes what it ranks (its settings,
    the tokenizer, the depth) and every other swept value that tells it apart from its siblings. A retriever setting
    given the value its config entry has already (``defaults``: the entry's values by key) changes nothing and is
    left out, so one configuration has one name in every sweep.

    ``BM25`` when only the retriever varies, or for ``k1=1.2 b=0.75`` (bm25.yaml's own); ``BM25 k1=0.9 b=0.4`` in a
    parameter grid or typed on its own.
    """
    parts = []
    for override in overrides:
        key, _, value = override.lstrip("+~").partition("=")
        if key in ("retriever", "retriever.name") or not (key in varying or key.startswith(SYSTEM_KEYS)):
            continue
        if _is_default(key, value, defaults or {}):
            continue
        if key == TARGET_KEY:  # your own class: named only when it varies, by its class name
            if key not in varying:
                continue
            value = value.rsplit(".", 1)[-1]
        shown = key.removeprefix("retriever@").removeprefix("retriever.")
        parts.append(f"{shown}={short_value(unquoted(value))}")
    return " ".join([retriever_name, *parts])


def _is_default(key: str, value: str, defaults: Mapping[str, object]) -> bool:
    """Whether ``retriever.<setting>=value`` gives the setting the value the retriever's entry has."""
    setting = key.removeprefix("retriever.")
    if setting == key or setting not in defaults:
        return False
    try:
        return yaml.safe_load(value) == defaults[setting]
    except yaml.YAMLError:
        return False


def configured_corpus(corpus: Any) -> str:
    """:func:`corpus_label` from a corpus config entry, before the corpus is read (its name, else its folder's)."""
    documents = corpus.get("documents") or {}
    path = corpus.get("path") or documents.get("path") or "corpus"
    name = corpus.get("name") or corpus.get("id") or Path(str(path)).name.split(".")[0]
    return corpus_label(str(name), str(corpus.get("split") or "test"))


def run_name(system: str, corpus: str) -> str:
    """An MLflow run's name: the system and the corpus it was measured on (``BM25 k1=0.9 · scifact``), so two
    corpora's runs of one system never share a name."""
    return f"{system} · {corpus}"


def unquoted(value: str) -> str:
    """A value as Hydra reads it when it is one quoted string (``'http://h/s?ms=20'``): without its quotes."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1].replace("\\" + value[0], value[0])
    return value


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


def config_tags(cfg: Any) -> dict[str, str]:
    """The user's extra tags (``+tags.owner=me``; a scheduled sweep adds its name and date)."""
    return {str(k): str(v) for k, v in (cfg.get("tags") or {}).items()}
