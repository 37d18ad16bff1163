"""Where the code that made a run came from: rankscope's version, the git commit, and uncommitted changes."""

from __future__ import annotations

import functools
import hashlib
import subprocess
from pathlib import Path

from pipeline.common.names import TAG_GIT_COMMIT, TAG_VERSION
from pipeline.tracking.client import MLFLOW_SOURCE_NAME, MLFLOW_SOURCE_TYPE

REPO = Path(__file__).resolve().parents[2]
SOURCES = ("metrics", "retrievers", "pipeline", "conf")  # what decides a result, in a checkout


@functools.lru_cache(maxsize=1)
def provenance_tags() -> dict[str, str]:
    """rankscope's version and, in a git checkout, the commit the code came from."""
    tags = {TAG_VERSION: version(), MLFLOW_SOURCE_NAME: "python -m pipeline", MLFLOW_SOURCE_TYPE: "LOCAL"}
    commit = _git_commit()
    if commit:
        tags[TAG_GIT_COMMIT] = commit
    return tags


def version() -> str:
    try:
        from importlib.metadata import version as installed

        return installed("rankscope")
    except Exception:  # running from a checkout that is not installed
        try:
            import tomllib

            return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
        except Exception:
            return "dev"


def _git_commit() -> str | None:
    if not (REPO / ".git").exists():
        return None
    try:
        out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    commit = out.stdout.strip()
    return commit if out.returncode == 0 and len(commit) == 40 else None


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """rankscope's version, the git commit and, when the checkout has uncommitted changes, a digest of them.

    ``0.1.0+3f2a9c1d0b7e`` or ``0.1.0+3f2a9c1d0b7e.dirty-5e1b...``: a job run on edited code is never mistaken
    for one run on the commit.
    """
    tags = provenance_tags()
    commit = tags.get(TAG_GIT_COMMIT)
    if not commit:
        return tags[TAG_VERSION]
    dirty = _uncommitted_digest()
    return f"{tags[TAG_VERSION]}+{commit[:12]}" + (f".dirty-{dirty}" if dirty else "")


def _uncommitted_digest() -> str | None:
    """A digest of the tracked files' changes against HEAD and of untracked Python/config files, if any."""
    changes = b""
    for args in (["diff", "HEAD", "--", *SOURCES], ["ls-files", "--others", "--exclude-standard", "--", *SOURCES]):
        try:
            out = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, timeout=10, check=False)
        except (OSError, subprocess.SubprocessError):
            return None
        changes += out.stdout
        if args[0] == "ls-files":
            for name in out.stdout.decode(errors="replace").split():
                path = REPO / name
                if path.is_file():
                    changes += path.read_bytes()
    return hashlib.sha256(changes).hexdigest()[:12] if changes else None
