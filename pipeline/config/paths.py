"""Where the Hydra configs live: the repository's ``conf/`` in a checkout (or an editable install), else the
copy a built wheel carries inside this package (``setup.py`` puts it there)."""

from __future__ import annotations

import functools
from pathlib import Path

import yaml

from metrics.errors import InputError

REPO_CONF = Path(__file__).resolve().parents[2] / "conf"
PACKAGED_CONF = Path(__file__).resolve().parents[1] / "conf"


def conf_dir(repo: Path = REPO_CONF, packaged: Path = PACKAGED_CONF) -> Path:
    """The repository's configs when they are there (what a developer edits), the packaged copy otherwise."""
    return repo if (repo / "config.yaml").is_file() else packaged


CONF_DIR = conf_dir()


@functools.lru_cache(maxsize=64)
def entry_defaults(group: str, choice: str | None, conf: Path = CONF_DIR) -> dict[str, object]:
    """The top-level values a config entry sets (``conf/retriever/bm25.yaml``: ``{'k1': 1.2, 'b': 0.75, ...}``), by
    key; empty when the entry is not among rankscope's configs (a user's own search path) or unreadable."""
    if not choice:
        return {}
    try:
        found = yaml.safe_load((conf / group / f"{choice}.yaml").read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return {}
    if not isinstance(found, dict):
        return {}
    return {str(k): v for k, v in found.items() if k != "defaults" and not isinstance(v, dict | list)}


def settings_file(name: str, folder: Path, what: str) -> Path:
    """``folder/NAME.yaml``, or ``name`` itself when it is a YAML file's path; when there is none, an InputError
    naming the ``what`` settings the folder has."""
    path = Path(name) if name.endswith((".yaml", ".yml")) else folder / f"{name}.yaml"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in folder.glob("*.yaml")))
        raise InputError(f"no {what} settings {name!r} (conf/{folder.name}/ has: {known})", path)
    return path
