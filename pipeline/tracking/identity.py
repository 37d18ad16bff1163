"""What makes two jobs the same computation: config digest, corpus digest and code version.

A resumed sweep skips a job whose result MLflow already holds (a FINISHED run with the same three tags under the
same parent); anything else (a changed config, refreshed data, other code) is computed again.
"""

from __future__ import annotations

import functools
import hashlib
import json
import subprocess
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig

from pipeline.config.build import plain
from pipeline.tracking.runs import REPO, TAG_CORPUS_DIGEST, provenance_tags

TAG_CONFIG_DIGEST = "rankscope.config_digest"
TAG_CODE_VERSION = "rankscope.code_version"

# Top-level config keys that say where and how results are recorded, not what is computed.
NOT_COMPUTED = ("tracking", "cache", "study", "gate", "tags")


@dataclass(frozen=True)
class Identity:
    config_digest: str
    corpus_digest: str
    code_version: str

    def tags(self) -> dict[str, str]:
        return {TAG_CONFIG_DIGEST: self.config_digest, TAG_CORPUS_DIGEST: self.corpus_digest,
                TAG_CODE_VERSION: self.code_version}

    @classmethod
    def from_tags(cls, tags: dict[str, str]) -> Identity | None:
        try:
            return cls(tags[TAG_CONFIG_DIGEST], tags[TAG_CORPUS_DIGEST], tags[TAG_CODE_VERSION])
        except KeyError:
            return None


def config_digest(cfg: DictConfig | dict[str, Any]) -> str:
    """A digest of the resolved config minus where results go (tracking, cache, study name, gate, tags)."""
    tree = plain(cfg) if isinstance(cfg, DictConfig) else dict(cfg)
    kept = {k: v for k, v in tree.items() if k not in NOT_COMPUTED and k != "hydra"}
    text = json.dumps(kept, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """rankscope's version, the git commit and, when the checkout has uncommitted changes, a digest of them.

    ``0.1.0+3f2a9c1d0b7e`` or ``0.1.0+3f2a9c1d0b7e.dirty-5e1b...``: a job run on edited code is never mistaken
    for one run on the commit.
    """
    tags = provenance_tags()
    version = tags.get("rankscope.version", "dev")
    commit = tags.get("mlflow.source.git.commit")
    if not commit:
        return version
    dirty = _uncommitted_digest()
    return f"{version}+{commit[:12]}" + (f".dirty-{dirty}" if dirty else "")


def _uncommitted_digest() -> str | None:
    """A digest of the tracked files' changes against HEAD and of untracked Python/config files, if any."""
    changes = b""
    for args in (["diff", "HEAD", "--", "metrics", "retrievers", "pipeline", "conf"],
                 ["ls-files", "--others", "--exclude-standard", "--", "metrics", "retrievers", "pipeline", "conf"]):
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
