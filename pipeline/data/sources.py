"""Where a corpus comes from: the objects ``conf/corpus/*.yaml`` entries build (``_target_``): a BEIR folder, the
embedded help-desk corpus, a public benchmark by name (:class:`Benchmark`); ir_datasets ids
(:class:`pipeline.data.irds.IrDatasets`) and your own files (:class:`pipeline.data.files.OwnFiles`) have modules of
their own.

A source knows its files, its splits and how to load itself; the rest of the pipeline asks it rather than looking
at the config's type: the per-process corpus memo keys on :meth:`files`, a tuning sweep checks :meth:`splits`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar, Protocol

from metrics.errors import InputError
from pipeline.data.beir import find_corpus_file, load_beir
from pipeline.data.collection import Collection
from pipeline.data.grades import UNJUDGED, Graded
from pipeline.data.irds import IrDatasets

HELPDESK_NAME = "helpdesk"
HELPDESK_PAGES_NAME = "helpdesk_pages"


class CorpusSource(Protocol):
    """What a ``conf/corpus`` entry builds."""

    name: str | None
    split: str

    def load(self) -> Collection: ...

    def splits(self) -> list[str]: ...

    def files(self) -> list[Path]: ...

    def with_split(self, split: str) -> CorpusSource: ...


def _shipped_folder(name: str = HELPDESK_NAME) -> Path:
    """A BEIR folder shipped inside the package (``pipeline/data/<name>``)."""
    return Path(str(resources.files("pipeline.data").joinpath(name)))


@dataclass(frozen=True)
class BeirFolder(Graded):
    """A BEIR-layout folder (``corpus.jsonl[.gz]``, ``queries.jsonl``, ``qrels/<split>.tsv``); the questions are
    those judged in ``split``. ``strict``: a judgment naming an unknown document or question stops the job."""

    path: str | Path
    split: str = "test"
    name: str | None = None  # default: the folder's name
    strict: bool = False
    grades: dict[int, int] | None = None  # grade -> gain (pipeline.data.grades); default: as the qrels hold them
    negative_grades: str = UNJUDGED

    @classmethod
    def from_config(cls, context: Any, path: str, **settings: Any) -> BeirFolder:
        """``path`` relative to the folder the command started in."""
        return cls(path=context.path(path), **settings)

    @property
    def folder(self) -> Path:
        return Path(self.path)

    def load(self) -> Collection:
        return load_beir(self.folder, self.split, self.name, self.strict, self.grading)

    def splits(self) -> list[str]:
        qrels = self.folder / "qrels"
        return sorted(p.stem for p in qrels.glob("*.tsv")) if qrels.is_dir() else []

    def files(self) -> list[Path]:
        """The files a load reads (an InputError when one is missing)."""
        return [find_corpus_file(self.folder), self.folder / "queries.jsonl",
                self.folder / "qrels" / f"{self.split}.tsv"]

    def with_split(self, split: str) -> BeirFolder:
        return dataclasses.replace(self, split=split)


@dataclass(frozen=True)
class Helpdesk(Graded):
    """docs/helpdesk-reference.md's 28-document help-desk corpus, embedded in the package (no path needed); one split,
    ``test``."""

    name: str = HELPDESK_NAME
    split: str = "test"
    grades: dict[int, int] | None = None
    negative_grades: str = UNJUDGED
    folder: ClassVar[str] = HELPDESK_NAME  # its folder inside the package

    def _folder(self) -> BeirFolder:
        return BeirFolder(_shipped_folder(self.folder), self.split, self.name, grades=self.grades,
                          negative_grades=self.negative_grades)

    def load(self) -> Collection:
        if self.split != "test":
            raise InputError(f"corpus.split={self.split}: the help-desk corpus has only the 'test' split")
        return self._folder().load()

    def splits(self) -> list[str]:
        return ["test"]

    def files(self) -> list[Path]:
        return self._folder().files()

    def with_split(self, split: str) -> Helpdesk:
        return dataclasses.replace(self, split=split)


@dataclass(frozen=True)
class HelpdeskPages(Helpdesk):
    """The help-desk corpus stitched into four topic pages (Markdown: a section per topic), its judgments turned into
    span judgments of the original sentences (``python -m bench.stitch helpdesk`` makes it): the long-document
    sample chunking is measured on (docs/chunking.md)."""

    name: str = HELPDESK_PAGES_NAME
    folder: ClassVar[str] = HELPDESK_PAGES_NAME


def helpdesk() -> Collection:
    """The embedded default: docs/helpdesk-reference.md's 28-document help-desk corpus, shipped with the package."""
    return Helpdesk().load()


@dataclass(frozen=True)
class Benchmark(Graded):
    """A public benchmark by name (``corpus=scifact``, ``corpus=cranfield``): through ir_datasets (``id``, and
    ``split`` picks its split), or from a local BEIR-layout copy when ``path`` is set (an override, or the
    environment variable the preset names). The same data by either route has the same digests. ``grades`` maps
    the benchmark's own grades to gains on either route (Cranfield's preset: its relevance codes), so a local copy
    holds the grades the dataset does."""

    id: str
    name: str
    split: str = "test"
    path: str | None = None
    strict: bool = False
    grades: dict[int, int] | None = None
    negative_grades: str = UNJUDGED

    @classmethod
    def from_config(cls, context: Any, path: str | None = None, **settings: Any) -> Benchmark:
        """``path`` relative to the folder the command started in."""
        return cls(path=None if path in (None, "") else str(context.path(path)), **settings)

    def route(self) -> CorpusSource:
        """Where it is read from: the local folder when one is named, else ir_datasets."""
        graded = {"grades": self.grades, "negative_grades": self.negative_grades}
        if self.path is not None:
            return BeirFolder(self.path, self.split, self.name, self.strict, **graded)
        return IrDatasets(self.id, self.split, self.name, strict=self.strict, **graded)

    def load(self) -> Collection:
        return self.route().load()

    def splits(self) -> list[str]:
        return self.route().splits()

    def files(self) -> list[Path]:
        return self.route().files()

    def with_split(self, split: str) -> Benchmark:
        return dataclasses.replace(self, split=split)
