"""Where the Hydra configs live: the repository's ``conf/`` in a checkout (or an editable install), else the
copy a built wheel carries inside this package (``setup.py`` puts it there)."""

from __future__ import annotations

from pathlib import Path

REPO_CONF = Path(__file__).resolve().parents[2] / "conf"
PACKAGED_CONF = Path(__file__).resolve().parents[1] / "conf"


def conf_dir(repo: Path = REPO_CONF, packaged: Path = PACKAGED_CONF) -> Path:
    """The repository's configs when they are there (what a developer edits), the packaged copy otherwise."""
    return repo if (repo / "config.yaml").is_file() else packaged


CONF_DIR = conf_dir()
