"""What the loop reads: the runs a selection names and their rankings (and their rankings of chunks, when they chunked:
``chunks.tsv``), the corpus a run measured (from its stored config; a span pool keeps that config to read the
documents again when it pulls), and qrels versions (logged ones, by digest; or a qrels file), with their spans."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from metrics.chunks import ChunkRun, read_chunks
from metrics.errors import InputError
from metrics.qrels import Qrels
from metrics.run import Run
from metrics.spans import Spans, has_span_header, judgments_digest, read_beir_spans
from metrics.trec import read_qrels, read_trec_run
from pipeline.common.names import (
    CHUNKS_FILE,
    QRELS_BEIR,
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
    stored_file_if_any,
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
    chunks: ChunkRun | None = None  # its ranking of chunks, when its job kept one (chunks.tsv)

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
        chunked = stored_file_if_any(client, run, CHUNKS_FILE, folder)
        found.append(Ranked(run, label, read_trec_run(run_file(client, run, folder)),
                            read_chunks(chunked) if chunked is not None else None))
    return found


def collection_of(client: MlflowClient, run: MlflowRun, folder: Path, base: Path) -> Collection:
    """The corpus ``run`` measured, read again from its stored config (paths relative to ``base``, the folder the
    command starts in); refused when its documents or questions are not the ones the run measured."""
    collection = make_corpus(OmegaConf.create(corpus_config(client, run, folder)), base).load()
    for tag, digest, what in ((TAG_DOCUMENTS_DIGEST, collection.corpus_digest, "documents"),
                              (TAG_QUESTIONS_DIGEST, collection.queries_digest, "questions")):
        if run.data.tags.get(tag) not in (None, digest):
            raise InputError(f"the corpus read from {describe(run)}'s config has other {what} than the run measured "
                             f"(run the command from the folder the run was made in)")
    return collection


def corpus_config(client: MlflowClient, run: MlflowRun, folder: Path) -> dict[str, Any]:
    """The ``corpus`` entry of the run's stored config, as plain data."""
    node = OmegaConf.load(config_file(client, run, folder))
    return OmegaConf.to_container(node.corpus, resolve=True)  # type: ignore[return-value]


def pooled_collection(meta: dict[str, Any]) -> Collection:
    """A span pool's corpus read again as it is now, from the config and folder its pool kept (``pool.json``)."""
    if "corpus_config" not in meta:
        raise InputError(f"the pool {meta.get('name')!r} does not say where its documents are (a pool made before "
                         f"span judging): pool it again")
    return make_corpus(OmegaConf.create(meta["corpus_config"]), Path(meta["base_dir"])).load()


@dataclass
class QrelsVersion:
    """A qrels version: its judgments (and spans, for a span judgment version), digest, and the run that logged it
    (None: read from a file)."""

    qrels: Qrels
    digest: str
    run_id: str | None = None
    source: str = ""
    spans: Spans | None = None


def read_version_file(path: Path) -> QrelsVersion:
    """A qrels file (TREC, BEIR, or BEIR with ``start end`` columns: span judgments)."""
    spans = None
    if path.suffix.lower() != ".trec" and has_span_header(path):
        qrels, spans, _ = read_beir_spans(path)
    else:
        qrels = read_qrels(path)
    return QrelsVersion(qrels, judgments_digest(qrels, spans), None, str(path.resolve()), spans)


def find_version(client: MlflowClient, experiment: str, uri: str, text: str, folder: Path) -> QrelsVersion:
    """``text``: a qrels file (TREC or BEIR, with spans or not), or a logged version's digest (a unique prefix of at
    least 6)."""
    path = Path(text)
    if path.is_file():
        return read_version_file(path)
    if len(text) < 6 or any(c not in "0123456789abcdef" for c in text):
        raise InputError(f"--qrels {text!r}: neither a qrels file nor a version's digest (6 or more hex digits)")
    run = version_run(client, judgments_experiment(client, experiment, uri), text)
    if run is None:
        raise InputError(f"no qrels version {text!r} is logged in experiment {experiment!r} judgments (python -m "
                         f"pipeline.judge pull logs them)")
    beir = stored_file_if_any(client, run, QRELS_BEIR, folder)
    found = read_version_file(beir) if beir is not None and has_span_header(beir) else QrelsVersion(
        read_qrels(version_files(client, run, folder)), "")
    return QrelsVersion(found.qrels, run.data.tags[TAG_QRELS_DIGEST], run.info.run_id, run.info.artifact_uri or "",
                        found.spans)


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
    held = collection.judgments_digest
    if digest and held != digest:
        raise InputError(f"{item.system} was scored with qrels {digest}, which is neither logged as a version nor "
                         f"the judgments its corpus holds now ({held})")
    return QrelsVersion(collection.qrels, held, spans=collection.spans)
