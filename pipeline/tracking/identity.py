"""What makes two jobs the same computation: config digest, corpus digest and code version.

A resumed sweep skips a job whose result MLflow already holds (a FINISHED run with the same three tags under the
same parent); anything else (a changed config, refreshed data, other code) is computed again.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.common.names import TAG_CODE_VERSION, TAG_CONFIG_DIGEST, TAG_CORPUS_DIGEST


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
