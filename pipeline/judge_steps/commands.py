"""The steps as ``python -m pipeline.judge`` runs them: arguments and settings in, lines out. ``pool`` and
``rescore`` here; ``pull`` and ``adjudicate`` (which read the assessors' work) in :mod:`.grading`."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

from pipeline.judge_steps.assessors import Assessors
from pipeline.judge_steps.changes_report import changes_text
from pipeline.judge_steps.chunk_scoring import ChunkInputs, rescore_run
from pipeline.judge_steps.gates_again import gates_again
from pipeline.judge_steps.pooling import make_pools, pool_text, save_pool
from pipeline.judge_steps.rescored_log import log_rescoring
from pipeline.judge_steps.rescoring import Outcome, what_changed
from pipeline.judge_steps.settings import JUDGING_DIR, JudgeSettings, load_settings
from pipeline.judge_steps.sources import (
    QrelsVersion,
    collection_of,
    corpus_config,
    find_version,
    ranked_runs,
    scored_version,
    scored_with,
)
from pipeline.tracking.store import Store, tracking_uri


def settings_of(args: argparse.Namespace) -> JudgeSettings:
    """The settings file's values, then the flags' (a bad flag's value named by its flag)."""
    flags = {"depth": "depth", "order": "order", "rule": "rule", "ties": "ties", "budget": "budget",
             "agreement.minimum": "min_agreement", "label_studio.url": "url", "label_studio.project": "project"}
    return load_settings(args.judge, {key: getattr(args, name, None) for key, name in flags.items()})


def store_of(args: argparse.Namespace, base: Path) -> tuple[Any, str | None, str]:
    """The MLflow store the flags name: its client, the runs' experiment's id, its URI."""
    uri = tracking_uri(args.tracking_uri, base)
    client, experiment_id = Store.existing(uri, args.experiment)
    return client, experiment_id, uri


# -- pool -------------------------------------------------------------------------------------------------------


def pool(args: argparse.Namespace, base: Path) -> int:
    settings = settings_of(args)
    client, experiment_id, uri = store_of(args, base)
    assessors = Assessors(args.to, settings)  # reached before anything is written
    with tempfile.TemporaryDirectory(prefix="rankscope-judge-") as tmp:
        ranked = ranked_runs(client, experiment_id, args.selectors, args.corpus, Path(tmp))
        collection = collection_of(client, ranked[0].run, Path(tmp), base)
        given = find_version(client, args.experiment, uri, args.qrels, Path(tmp)) if args.qrels else None
        where = {"corpus_config": corpus_config(client, ranked[0].run, Path(tmp)), "base_dir": str(base.resolve())}
    pooled = make_pools(ranked, collection, given.qrels if given else collection.qrels, settings,
                        given.spans if given else None)
    name = args.name or settings.label_studio.project or assessors.sheet_name() \
        or f"{collection.label.replace('/', '-')}-pool"
    folder = Path(args.out) if args.out else base / JUDGING_DIR / name
    print(pool_text(pooled), flush=True)
    save_pool(folder, pooled, name, {**assessors.open_project(name, collection, pooled),
                                     **(where if pooled.spans else {})})
    kept, size = len(pooled.to_judge), len(pooled.chosen)
    said = (f"{kept} pairs: the first {kept} of the {size} pooled in {settings.order} order, --budget "
            f"{settings.budget}" if kept < size else f"{kept} pairs, {settings.order} order")
    print(f"\nPool saved in {folder} ({said})")
    assessors.hand_over(pooled, collection, folder)
    return 0


# -- rescore ----------------------------------------------------------------------------------------------------


def rescore(args: argparse.Namespace, base: Path) -> int:
    client, experiment_id, uri = store_of(args, base)
    with tempfile.TemporaryDirectory(prefix="rankscope-judge-") as tmp_name:
        tmp = Path(tmp_name)
        new = find_version(client, args.experiment, uri, args.qrels, tmp)
        ranked = ranked_runs(client, experiment_id, args.selectors, args.corpus, tmp)
        olds: dict[str, QrelsVersion] = {}
        inputs = ChunkInputs(client, tmp, base)
        rescored = []
        for item in ranked:
            digest = scored_with(item.run)
            if digest not in olds:
                olds[digest] = scored_version(client, args.experiment, uri, item, digest, tmp, base)
            rescored.append(rescore_run(client, item, olds[digest], new, tmp, inputs))
        outcome = Outcome(rescored, what_changed(rescored), new.digest, ", ".join(sorted(olds)))
        outcome.gates = gates_again(client, args.gate, rescored)
        text = changes_text(outcome)
        where = log_rescoring(client, args.experiment, uri, outcome, new, tmp, text)
    print(text)
    print(f"\nMLflow: {where}")
    return 0


__all__ = ["pool", "rescore", "settings_of", "store_of"]
