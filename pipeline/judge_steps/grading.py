"""``pull`` and ``adjudicate``: the assessors' work read back (grades, or a span pool's highlights checked against
the documents) into the next version, or the ties it leaves pushed to a third assessor."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from pipeline.common.names import QRELS_TREC
from pipeline.data.collection import Collection
from pipeline.judge_steps.adjudication import command_for, push_round, read_round, refuse_open, texts_of
from pipeline.judge_steps.assessors import pool_folder, read_grades, read_marks
from pipeline.judge_steps.commands import settings_of, store_of
from pipeline.judge_steps.pulling import (
    build_span_version,
    build_version,
    check_agreement,
    log_version,
    version_text,
    write_version,
)
from pipeline.judge_steps.saved import SavedPool, load_pool
from pipeline.judge_steps.settings import LABEL_STUDIO, JudgeSettings
from pipeline.judge_steps.span_marks import checked_marks, pool_documents, push_span_round, read_span_round
from pipeline.judging_maths.spans import Checked
from pipeline.tracking.store import run_location

# -- pull -------------------------------------------------------------------------------------------------------


@dataclass
class Graded:
    """What pull and adjudicate read first: the settings, where the grades come from, the pool, the grades."""

    settings: JudgeSettings
    sources: list[str]
    sheets: list[Path]
    saved: SavedPool
    annotations: pd.DataFrame
    checked: Checked | None = None  # a span pool's marks, checked against its documents
    documents: Collection | None = None  # a span pool's corpus as it is now, read once
    problems: list[str] = field(default_factory=list)  # a span pool's tasks that could not be read


def _graded(args: argparse.Namespace, base: Path) -> Graded:
    settings = settings_of(args)
    sources = args.sources or [LABEL_STUDIO]
    sheets = [Path(s) for s in sources if s != LABEL_STUDIO]
    saved = load_pool(pool_folder(args, settings, base, sheets))
    if saved.spans:
        marks, problems = read_marks(args, settings, saved, sources, sheets)
        documents = pool_documents(saved)
        checked = checked_marks(documents, saved, marks, settings.grades.low)
        return Graded(settings, sources, sheets, saved, checked.assessments, checked, documents, problems)
    return Graded(settings, sources, sheets, saved, read_grades(args, settings, saved, sources, sheets))


def pull(args: argparse.Namespace, base: Path) -> int:
    graded = _graded(args, base)
    settings, sheets, saved, annotations = graded.settings, graded.sheets, graded.saved, graded.annotations
    if graded.checked is not None:
        rounds, said = read_span_round(settings, saved, graded.documents, args.url)
        pulled = build_span_version(saved, graded.checked, graded.problems + said, settings.grades, settings.rule,
                                    args.override, settings.ties, rounds)
    else:
        pulled = build_version(saved, annotations, settings.grades, settings.rule, args.override, settings.ties,
                               read_round(settings, saved, args.url))
    command = command_for(saved, sheets)
    refuse_open(pulled.merged, settings.rule, command)
    check_agreement(pulled, settings.agreement.measure, settings.agreement.minimum, args.force, command)
    text = version_text(pulled, saved)
    if not args.no_log:  # the store is checked before any file is written
        client, _, uri = store_of(args, base)
    target = write_version(pulled, saved, text)
    print(text)
    print(f"Version files: {target} ({QRELS_TREC}, qrels.tsv, ...)")
    if args.no_log:
        return 0
    experiment_id, run_id = log_version(client, args.experiment, uri, pulled, saved, target)
    v = pulled.version
    kind = "span judgment version" if pulled.spans else "qrels version"
    print(f"MLflow: {kind} {v.digest} logged as a dataset, {run_location(uri, experiment_id, run_id)}")
    runs = " ".join(r["run_id"] for r in saved.meta["runs"])
    print(f"Re-score: python -m pipeline.judge rescore {runs} --qrels {v.digest}")
    return 0


# -- adjudicate -------------------------------------------------------------------------------------------------


def adjudicate(args: argparse.Namespace, base: Path) -> int:
    g = _graded(args, base)
    if g.checked is not None:
        print(push_span_round(args, g.settings, g.saved, g.checked, g.documents))
        return 0
    print(push_round(args, g.settings, g.saved, g.annotations, texts_of(args, g.settings, g.saved, g.sources,
                                                                        g.sheets)))
    return 0



__all__ = ["adjudicate", "pull"]
