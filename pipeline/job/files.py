"""The files a job writes into its folder: the resolved config (secrets masked), the per-question CSV, the TREC run,
the metric means, the notes and what the retriever keeps. The slow ones are made by picklable functions, so that
another process can write them."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from metrics.chunks import chunk_table_bytes, chunks_bytes
from metrics.spans import spans_bytes
from metrics.trec import trec_run_bytes
from pipeline.common.names import (
    CHUNKING_FILE,
    CHUNKS_FILE,
    CONFIG_FILE,
    MEANS_FILE,
    NOTES_FILE,
    PER_QUESTION_FILE,
    RUN_FILE,
    SPANS_FILE,
)
from pipeline.common.redact import redact_text, redact_tree
from pipeline.config.hydra_internals import yaml_text
from pipeline.job.results import JobResult


def write_results(result: JobResult, out_dir: Path) -> list[Path]:
    """The job's files: resolved config (secrets masked), per-question CSV, TREC run, metric means; the notes, one
    line per kind, when there are any; the files the retriever keeps (``traces.csv``). Only the notes and the
    retriever's files are written here: the caller hands the others to another process (:func:`files_beside`)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    files = [out_dir / CONFIG_FILE, out_dir / PER_QUESTION_FILE, out_dir / RUN_FILE, out_dir / MEANS_FILE]
    if (chunked := result.chunked) is not None:
        files.extend(out_dir / name for name, part in ((CHUNKS_FILE, chunked.chunks), (SPANS_FILE, chunked.spans),
                                                       (CHUNKING_FILE, chunked.table)) if part is not None)
    if notes := result.note_lines():
        files.append(out_dir / NOTES_FILE)
        files[-1].write_text("".join(f"{redact_text(note)}\n" for note in notes), encoding="utf-8")
    for name, content in result.kept.items():
        files.append(out_dir / name)
        files[-1].write_bytes(content)
    return files


def files_beside(result: JobResult, table: pd.DataFrame, config: dict,
                 out_dir: Path) -> dict[Path, Callable[[], bytes]]:
    """The makers of the job's files that take time to format: the per-question CSV (of ``table``, the result's
    table with its secrets masked) and the run file (about 80 ms of a SciFact job), the config and the means (8 ms);
    each a picklable function giving the file's bytes, so that another process can write it."""
    makers = {out_dir / PER_QUESTION_FILE: functools.partial(_csv_bytes, table),
              out_dir / RUN_FILE: functools.partial(trec_run_bytes, result.run, _tag(result.system)),
              out_dir / CONFIG_FILE: functools.partial(_config_bytes, config),
              out_dir / MEANS_FILE: functools.partial(_means_bytes, result.means_frame())}
    chunked = result.chunked
    if chunked is not None and chunked.chunks is not None:
        makers[out_dir / CHUNKS_FILE] = functools.partial(chunks_bytes, chunked.chunks)
    if chunked is not None and chunked.spans is not None:
        makers[out_dir / SPANS_FILE] = functools.partial(spans_bytes, chunked.spans)
    if chunked is not None and chunked.table is not None:
        makers[out_dir / CHUNKING_FILE] = functools.partial(chunk_table_bytes, chunked.table)
    return makers


def _csv_bytes(table: pd.DataFrame) -> bytes:
    return table.to_csv(index=False).encode("utf-8")


def _means_bytes(means: pd.DataFrame) -> bytes:
    return means.to_csv().encode("utf-8")


def _config_bytes(tree: dict) -> bytes:
    """The resolved config (:func:`pipeline.config.build.plain`) as YAML, secrets masked."""
    return yaml_text(redact_tree(tree)).encode("utf-8")


def _tag(system: str) -> str:
    """A TREC run tag is one whitespace-free token."""
    return "_".join(system.split()) or "rankscope"
