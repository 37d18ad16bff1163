"""What the loop reads: the runs a selection names and their rankings, the corpus a run measured (from its stored
config), and qrels versions (logged ones, by digest; or a qrels file)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from omegaconf import OmegaConf

from metrics.errors import InputError
from metrics.qrels import Qrels
from metrics.run import Run
from metrics.trec import read_qrels, read_trec_run
from pipeline.common.names import (
    TAG_DOCUMENTS_DIGEST,
    TAG_QRELS_DIGEST,
    TAG_QUESTIONS_DIGEST,
)
from pipeline.config.build import make_corpus
from pipeline.data.collection import Collection
from pipeline.tracking.client import MlflowClient
from pipeline.tracking.client import Run as MlflowRun
from pipeline.tracking.judgments import (
    config_file,
    judgments_experiment,
    run_file,
    selected_runs,
    system_of,
    version_files,
    version_run,
)
from pipeline.tracking.selectors import describe


@dataclass
class Ranked:
    """A run MLflow holds and its ranking, read back from its ``run.trec``."""

    run: MlflowRun
    system: str
    ranking: Run

    @property
    def run_id(self) -> str:
        return self.run.info.run_id


def ranked_runs(client: MlflowClient, experiment_id: str | None, selectors: list[str], corpus: str | None,
                folder: Path) -> list[Ranked]:
    """The selected runs with their rankings; they must rank the same documents and questions."""
    runs = selected_runs(client, experiment_id, selectors, corpus)
    first = runs[0]
    for run in runs[1:]:
        for tag, what in ((TAG_DOCUMENTS_DIGEST, "documents"), (TAG_QUESTIONS_DIGEST, "questions")):
            if run.data.tags.get(tag) != first.data.tags.get(tag):
                raise InputError(f"{describe(run)} and {describe(first)} ranked different {what}: pool runs of one "
                                 f"corpus at a time (--corpus NAME narrows a selector)")
    names: dict[str, int] = {}
    found = []
    for run in runs:
        system = system_of(run)
        names[system] = names.get(system, 0) + 1
        label = system if names[system] == 1 else f"{system} ({run.info.run_id[:8]})"
        found.append(Ranked(run, label, read_trec_run(run_file(client, run, folder))))
    return found


def collection_of(client: MlflowClient, run: MlflowRun, folder: Path, base: Path) -> Collection:
    """The corpus ``run`` measured, read again from its stored config (paths relative to ``base``, the folder the
    command starts in); refused when its documents or questions are not the ones the run measured."""
    node = OmegaConf.load(config_file(client, run, folder))
    collection = make_corpus(node.corpus, base).load()
    for tag, digest, what in ((TAG_DOCUMENTS_DIGEST, collection.corpus_digest, "documents"),
                              (TAG_QUESTIONS_DIGEST, collection.queries_digest, "questions")):
        if run.data.tags.get(tag) not in (None, digest):
            raise InputError(f"the corpus read from {describe(run)}'s config has other {what} than the run measured "
                             f"(run the command from the folder the run was made in)")
    return collection


@dataclass
class QrelsVersion:
    """A qrels version: its judgments, digest, and the run that logged it (None: read from a file)."""

    qrels: Qrels
    digest: str
    run_id: str | None = None
    source: str = ""


def find_version(client: MlflowClient, experiment: str, uri: str, text: str, folder: Path) -> QrelsVersion:
    """``text``: a qrels file (TREC or BEIR), or a logged version's digest (a unique prefix of at least 6)."""
    path = Path(text)
    if path.is_file():
        qrels = read_qrels(path)
        return QrelsVersion(qrels, qrels.digest(), None, str(path.resolve()))
    if len(text) < 6 or any(c not in "0123456789abcdef" for c in text):
        raise InputError(f"--qrels {text!r}: neither a qrels file nor a version's digest (6 or more hex digits)")
    run = version_run(client, judgments_experiment(client, experiment, uri), text)
    if run is None:
        raise InputError(f"no qrels version {text!r} is logged in experiment {experiment!r} judgments (python -m "
                         f"pipeline.judge pull logs them)")
    qrels = read_qrels(version_files(client, run, folder))
    return QrelsVersion(qrels, run.data.tags[TAG_QRELS_DIGEST], run.info.run_id, run.info.artifact_uri or "")


def scored_with(run: MlflowRun) -> str | None:
    """The digest of the qrels version that scored ``run``."""
    return run.data.tags.get(TAG_QRELS_DIGEST)


def scored_version(client: MlflowClient, experiment: str, uri: str, item: Ranked, digest: str | None, tmp: Path,
                   base: Path) -> QrelsVersion:
    """The version a run was scored with: logged (by its digest), else the corpus's own qrels read again."""
    if digest:
        try:
            return find_version(client, experiment, uri, digest, tmp)
        except InputError:
            pass
    collection = collection_of(client, item.run, tmp, base)
    qrels = collection.qrels
    if digest and qrels.digest() != digest:
        raise InputError(f"{item.system} was scored with qrels {digest}, which is neither logged as a version nor "
                         f"the judgments its corpus holds now ({qrels.digest()})")
    return QrelsVersion(qrels, qrels.digest())
