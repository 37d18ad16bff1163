"""The steps as ``python -m pipeline.judge`` runs them (pool, pull, adjudicate, rescore): arguments and settings
in, lines out."""

from __future__ import annotations

import argparse
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from pipeline.common.names import QRELS_TREC
from pipeline.judge_steps.adjudication import command_for, push_round, read_round, refuse_open, texts_of
from pipeline.judge_steps.assessors import Assessors, pool_folder, read_grades
from pipeline.judge_steps.changes_report import changes_text
from pipeline.judge_steps.gates_again import gates_again
from pipeline.judge_steps.pooling import SavedPool, load_pool, make_pools, pool_text, save_pool
from pipeline.judge_steps.pulling import build_version, check_agreement, log_version, version_text, write_version
from pipeline.judge_steps.rescored_log import log_rescoring
from pipeline.judge_steps.rescoring import Outcome, rescore_run, what_changed
from pipeline.judge_steps.settings import JUDGING_DIR, LABEL_STUDIO, JudgeSettings, load_settings
from pipeline.judge_steps.sources import (
    QrelsVersion,
    collection_of,
    find_version,
    ranked_runs,
    scored_version,
    scored_with,
)
from pipeline.tracking.store import Store, run_location, tracking_uri


def _settings(args: argparse.Namespace) -> JudgeSettings:
    """The settings file's values, then the flags' (a bad flag's value named by its flag)."""
    flags = {"depth": "depth", "order": "order", "rule": "rule", "ties": "ties", "budget": "budget",
             "agreement.minimum": "min_agreement", "label_studio.url": "url", "label_studio.project": "project"}
    return load_settings(args.judge, {key: getattr(args, name, None) for key, name in flags.items()})


def _store(args: argparse.Namespace, base: Path) -> tuple[Any, str | None, str]:
    uri = tracking_uri(args.tracking_uri, base)
    client, experiment_id = Store.existing(uri, args.experiment)
    return client, experiment_id, uri


# -- pool -------------------------------------------------------------------------------------------------------


def pool(args: argparse.Namespace, base: Path) -> int:
    settings = _settings(args)
    client, experiment_id, uri = _store(args, base)
    assessors = Assessors(args.to, settings)  # reached before anything is written
    with tempfile.TemporaryDirectory(prefix="rankscope-judge-") as tmp:
        ranked = ranked_runs(client, experiment_id, args.selectors, args.corpus, Path(tmp))
        collection = collection_of(client, ranked[0].run, Path(tmp), base)
        base_qrels = (find_version(client, args.experiment, uri, args.qrels, Path(tmp)).qrels if args.qrels
                      else collection.qrels)
    pooled = make_pools(ranked, collection, base_qrels, settings)
    name = args.name or settings.label_studio.project or assessors.sheet_name() \
        or f"{collection.label.replace('/', '-')}-pool"
    folder = Path(args.out) if args.out else base / JUDGING_DIR / name
    print(pool_text(pooled), flush=True)
    save_pool(folder, pooled, name, assessors.open_project(name, collection, pooled))
    kept, size = len(pooled.to_judge), len(pooled.chosen)
    said = (f"{kept} pairs: the first {kept} of the {size} pooled in {settings.order} order, --budget "
            f"{settings.budget}" if kept < size else f"{kept} pairs, {settings.order} order")
    print(f"\nPool saved in {folder} ({said})")
    assessors.hand_over(pooled, collection, folder)
    return 0


# -- pull -------------------------------------------------------------------------------------------------------


@dataclass
class Graded:
    """What pull and adjudicate read first: the settings, where the grades come from, the pool, the grades."""

    settings: JudgeSettings
    sources: list[str]
    sheets: list[Path]
    saved: SavedPool
    annotations: pd.DataFrame


def _graded(args: argparse.Namespace, base: Path) -> Graded:
    settings = _settings(args)
    sources = args.sources or [LABEL_STUDIO]
    sheets = [Path(s) for s in sources if s != LABEL_STUDIO]
    saved = load_pool(pool_folder(args, settings, base, sheets))
    return Graded(settings, sources, sheets, saved, read_grades(args, settings, saved, sources, sheets))


def pull(args: argparse.Namespace, base: Path) -> int:
    graded = _graded(args, base)
    settings, sheets, saved, annotations = graded.settings, graded.sheets, graded.saved, graded.annotations
    adjudications = read_round(settings, saved, args.url)
    pulled = build_version(saved, annotations, settings.grades, settings.rule, args.override, settings.ties,
                           adjudications)
    command = command_for(saved, sheets)
    refuse_open(pulled.merged, settings.rule, command)
    check_agreement(pulled, settings.agreement.measure, settings.agreement.minimum, args.force, command)
    text = version_text(pulled, saved)
    if not args.no_log:  # the store is checked before any file is written
        client, _, uri = _store(args, base)
    target = write_version(pulled, saved, text)
    print(text)
    print(f"Version files: {target} ({QRELS_TREC}, qrels.tsv, ...)")
    if args.no_log:
        return 0
    experiment_id, run_id = log_version(client, args.experiment, uri, pulled, saved, target)
    v = pulled.version
    print(f"MLflow: qrels version {v.digest} logged as a dataset, {run_location(uri, experiment_id, run_id)}")
    runs = " ".join(r["run_id"] for r in saved.meta["runs"])
    print(f"Re-score: python -m pipeline.judge rescore {runs} --qrels {v.digest}")
    return 0


# -- adjudicate -------------------------------------------------------------------------------------------------


def adjudicate(args: argparse.Namespace, base: Path) -> int:
    g = _graded(args, base)
    print(push_round(args, g.settings, g.saved, g.annotations, texts_of(args, g.settings, g.saved, g.sources,
                                                                        g.sheets)))
    return 0


# -- rescore ----------------------------------------------------------------------------------------------------


def rescore(args: argparse.Namespace, base: Path) -> int:
    client, experiment_id, uri = _store(args, base)
    with tempfile.TemporaryDirectory(prefix="rankscope-judge-") as tmp_name:
        tmp = Path(tmp_name)
        new = find_version(client, args.experiment, uri, args.qrels, tmp)
        ranked = ranked_runs(client, experiment_id, args.selectors, args.corpus, tmp)
        olds: dict[str, QrelsVersion] = {}
        rescored = []
        for item in ranked:
            digest = scored_with(item.run)
            if digest not in olds:
                olds[digest] = scored_version(client, args.experiment, uri, item, digest, tmp, base)
            rescored.append(rescore_run(client, item, olds[digest].qrels, new.qrels, tmp))
        outcome = Outcome(rescored, what_changed(rescored), new.digest, ", ".join(sorted(olds)))
        outcome.gates = gates_again(client, args.gate, rescored)
        text = changes_text(outcome)
        where = log_rescoring(client, args.experiment, uri, outcome, new, tmp, text)
    print(text)
    print(f"\nMLflow: {where}")
    return 0


__all__ = ["adjudicate", "pool", "pull", "rescore"]
