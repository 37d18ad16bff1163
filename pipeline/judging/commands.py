"""The three steps as ``python -m pipeline.judge`` runs them: arguments and settings in, lines out."""

from __future__ import annotations

import argparse
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from metrics.errors import InputError
from metrics.trec import write_trec_run
from pipeline.annotation.label_studio import LabelStudio
from pipeline.annotation.sheet import read_sheets, write_sheet
from pipeline.common.jsonfile import write_json
from pipeline.common.names import (
    CHANGES_TABLE,
    CHANGES_TEXT,
    JUDGE_SHEET,
    PER_QUESTION_FILE,
    POOL_META,
    QRELS_TREC,
    REPORT_FILE,
    RUN_FILE,
    TAG_COMPARE_BASELINE,
    TAG_COMPARE_CANDIDATE,
    TAG_DOCUMENTS_DIGEST,
    TAG_GATE,
    TAG_GATE_REASON,
    TAG_QUESTIONS_DIGEST,
)
from pipeline.common.redact import redact_text
from pipeline.data.collection import combined_digest
from pipeline.decisions.gate import load_settings as gate_settings
from pipeline.judging.pooling import load_pool, make_pools, pool_text, save_pool, texts
from pipeline.judging.pulling import build_version, version_files, version_text, write_version
from pipeline.judging.rescoring import (
    GateAgain,
    Outcome,
    Rescored,
    changes_text,
    gate_again,
    plan_of,
    report_html,
    score_ranking,
    what_changed,
)
from pipeline.judging.settings import JudgeSettings, load_settings
from pipeline.judging.sources import QrelsVersion, collection_of, find_version, ranked_runs, scored_with
from pipeline.judgments.versions import frame, trec_text
from pipeline.reports.html import write_report
from pipeline.tracking import judgments as tracked
from pipeline.tracking.search import search_runs
from pipeline.tracking.store import Store, run_location, tracking_uri

LABEL_STUDIO = "label-studio"
JUDGING_DIR = "judging"


def _settings(args: argparse.Namespace) -> JudgeSettings:
    overrides: dict[str, Any] = {k: getattr(args, k, None) for k in ("depth", "order", "rule")}
    if getattr(args, "budget", None):
        overrides["budgets"] = args.budget
    ls = {k: getattr(args, k, None) for k in ("url", "project")}
    if any(v is not None for v in ls.values()):
        overrides["label_studio"] = {k: v for k, v in ls.items() if v is not None}
    return load_settings(args.judge, overrides)


def _store(args: argparse.Namespace, base: Path) -> tuple[Any, str | None, str]:
    uri = tracking_uri(args.tracking_uri, base)
    client, experiment_id = Store.existing(uri, args.experiment)
    return client, experiment_id, uri


# -- pool -------------------------------------------------------------------------------------------------------


def pool(args: argparse.Namespace, base: Path) -> int:
    settings = _settings(args)
    client, experiment_id, uri = _store(args, base)
    to = args.to
    studio = None
    if to == LABEL_STUDIO:  # reached (and the token checked) before anything is written
        studio = LabelStudio(settings.label_studio.url, settings.label_studio.token_env, settings.label_studio.timeout)
        studio.request("GET", "/api/current-user/whoami")
    elif to is not None and Path(to).suffix.lower() not in (".csv", ".tsv"):
        raise InputError(f"--to {to}: expected {LABEL_STUDIO} or a sheet's name ending in .csv or .tsv")
    with tempfile.TemporaryDirectory(prefix="rankscope-judge-") as tmp:
        ranked = ranked_runs(client, experiment_id, args.selectors, args.corpus, Path(tmp))
        collection = collection_of(client, ranked[0].run, Path(tmp), base)
        base_qrels = (find_version(client, args.experiment, uri, args.qrels, Path(tmp)).qrels if args.qrels
                      else collection.qrels)
    pooled = make_pools(ranked, collection, base_qrels, settings)
    name = args.name or settings.label_studio.project or (Path(to).stem if to and to != LABEL_STUDIO else None) \
        or f"{collection.label.replace('/', '-')}-pool"
    folder = Path(args.out) if args.out else base / JUDGING_DIR / name
    print(pool_text(pooled), flush=True)
    extra: dict[str, Any] = {}
    if studio is not None:
        title = settings.label_studio.project or name
        project, made = studio.ensure_project(title, settings.grades, f"rankscope pool {name}: {collection.label}, "
                                                                      f"{len(pooled.chosen)} pairs")
        extra["label_studio"] = {"url": studio.url, "project": title, "project_id": project["id"]}
    save_pool(folder, pooled, name, extra)
    questions, documents = texts(collection)
    pairs = pooled.chosen.pairs
    print(f"\nPool saved in {folder} ({len(pairs)} pairs, {settings.order} order)")
    if studio is not None:
        there = studio.pushed_pairs(project["id"])
        tasks = [{"query_id": q, "doc_id": d, "question": questions.get(q, ""), "document": documents.get(d, ""),
                  "order": i} for i, (q, d) in enumerate(zip(pairs["query_id"], pairs["doc_id"]), 1)
                 if (q, d) not in there]
        pushed = studio.push(project["id"], tasks)
        print(f"Label Studio: project {title!r} ({'created' if made else 'updated'}, id {project['id']}) at "
              f"{studio.url}: {pushed} task(s) pushed, {len(pairs) - len(tasks)} already there; judge them at "
              f"{studio.url}/projects/{project['id']}/data, then: python -m pipeline.judge pull --project {title!r}")
    elif to is not None:
        sheet = write_sheet(Path(to), pairs, questions, documents, settings.grades, folder)
        print(f"Sheet: {sheet} (one row per pair, in judging order: fill in 'grade', and 'assessor' if several people "
              f"grade copies), then: python -m pipeline.judge pull --from {sheet}")
    return 0


# -- pull -------------------------------------------------------------------------------------------------------


def pull(args: argparse.Namespace, base: Path) -> int:
    settings = _settings(args)
    sources = args.sources or [LABEL_STUDIO]
    sheets = [Path(s) for s in sources if s != LABEL_STUDIO]
    if args.pool:
        folder = Path(args.pool)
    elif sheets:
        from pipeline.annotation.sheet import pool_of

        folder = pool_of(sheets[0])
    else:
        folder = base / JUDGING_DIR / (settings.label_studio.project or "")
        if not settings.label_studio.project:
            raise InputError("pull from Label Studio needs --project TITLE (or --pool FOLDER)")
    saved = load_pool(folder)
    scale = settings.grades
    frames = []
    if LABEL_STUDIO in sources:
        known = saved.meta.get("label_studio") or {}
        url = args.url or known.get("url") or settings.label_studio.url
        title = args.project or known.get("project") or saved.meta["name"]
        studio = LabelStudio(url, settings.label_studio.token_env, settings.label_studio.timeout)
        project = studio.project(title)
        frames.append(studio.annotations(project["id"], scale, saved.keys))
    if sheets:
        frames.append(read_sheets(sheets, saved.keys, scale))
    import pandas as pd

    annotations = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    pulled = build_version(saved, annotations, scale, settings.rule, args.override)
    text = version_text(pulled, saved)
    if not args.no_log:  # the store is checked before any file is written
        client, _, uri = _store(args, base)
    target = write_version(pulled, saved, text)
    print(text)
    print(f"Version files: {target} ({QRELS_TREC}, qrels.tsv, ...)")
    if args.no_log:
        return 0
    experiment_id = tracked.judgments_experiment(client, args.experiment, uri)
    tags = {TAG_DOCUMENTS_DIGEST: saved.meta["documents_digest"], TAG_QUESTIONS_DIGEST: saved.meta["questions_digest"]}
    v = pulled.version
    parent = saved.base()
    if tracked.version_run(client, experiment_id, v.parent_digest) is None:  # the chain starts with the runs' own
        with tempfile.TemporaryDirectory() as tmp:
            first = Path(tmp) / QRELS_TREC
            first.write_text(trec_text(parent), encoding="utf-8")
            tracked.log_version(client, experiment_id, frame(parent), digest=v.parent_digest, parent="",
                                corpus=saved.meta["label"], tags=tags,
                                counts={"judgments": len(parent), "questions": len(parent.judged_queries())},
                                assessors=[], judged_at="", files=[first], source=str(saved.folder))
    counts: dict[str, float] = dict(v.counts())
    if pulled.agreement is not None:
        counts.update({"agreement_alpha": pulled.agreement.alpha, "agreement_exact": pulled.agreement.exact})
        if pulled.agreement.kappa is not None:
            counts.update({"agreement_kappa": pulled.agreement.kappa,
                           "agreement_weighted_kappa": pulled.agreement.weighted_kappa or float("nan")})
    run_id = tracked.log_version(client, experiment_id, frame(v.qrels), digest=v.digest, parent=v.parent_digest,
                                 corpus=saved.meta["label"], tags=tags, counts=counts, assessors=pulled.assessors,
                                 judged_at=pulled.judged_at or datetime.now(UTC).isoformat(timespec="seconds"),
                                 files=version_files(target), source=str(target))
    print(f"MLflow: qrels version {v.digest} logged as a dataset, {run_location(uri, experiment_id, run_id)}")
    runs = " ".join(r["run_id"] for r in saved.meta["runs"])
    print(f"Re-score: python -m pipeline.judge rescore {runs} --qrels {v.digest}")
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
                olds[digest] = _old_version(client, args.experiment, uri, item, digest, tmp, base)
            old = olds[digest]
            plan = plan_of(tracked.config_file(client, item.run, tmp))
            table = tracked.per_question(client, item.run, tmp)
            questions = list(dict.fromkeys([*table.index.astype(str), *item.ranking.query_ids.astype(str)]))
            said = dict(zip(table.index.astype(str), table["question"].astype(str))) if "question" in table else {}
            rescored.append(Rescored(item, plan, score_ranking(item.ranking, old.qrels, plan, questions, said),
                                     score_ranking(item.ranking, new.qrels, plan, questions, said)))
        changed = what_changed(rescored)
        outcome = Outcome(rescored, changed, new.digest, ", ".join(sorted(olds)))
        outcome.gates = _gates(client, args, rescored)
        text = changes_text(outcome)
        where = _log_rescored(client, args, uri, outcome, new, tmp, text)
    print(text)
    print(f"\nMLflow: {where}")
    return 0


def _old_version(client: Any, experiment: str, uri: str, item: Any, digest: str | None, tmp: Path,
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


def _gates(client: Any, args: argparse.Namespace, rescored: list[Rescored]) -> list[GateAgain]:
    """Every gate decided on a selected run (it was the candidate), decided again on the new version when its
    baseline is selected too."""
    by_id = {r.ranked.run_id: r for r in rescored}
    experiment = client.get_experiment(rescored[0].ranked.run.info.experiment_id)
    found: list[GateAgain] = []
    recorded = client.get_experiment_by_name(f"{experiment.name} comparisons")  # pipeline.tracking.comparisons'
    if recorded is None:  # no comparison was ever recorded
        return found
    where = recorded.experiment_id
    settings = gate_settings(args.gate)
    for run in search_runs(client, [where], f"tags.`{TAG_GATE}` != ''"):
        tags = run.data.tags
        candidate, baseline = by_id.get(tags.get(TAG_COMPARE_CANDIDATE)), by_id.get(tags.get(TAG_COMPARE_BASELINE))
        if candidate is None or baseline is None:
            continue
        metrics = [m.strip(" '[]") for m in run.data.params.get("metrics", "").split(",") if m.strip(" '[]")]
        metrics = [m for m in metrics if m in candidate.after.table.columns] or [candidate.plan.primary.name]
        before, after = gate_again(candidate.before.table, candidate.after.table, baseline.before.table,
                                   baseline.after.table, metrics, float(settings.tolerance),
                                   float(run.data.params.get("confidence", settings.confidence)),
                                   int(run.data.params.get("resamples", settings.resamples)),
                                   int(run.data.params.get("permutations", settings.permutations)),
                                   int(run.data.params.get("seed", settings.seed)))
        was = tags.get(TAG_GATE_REASON, before)
        found.append(GateAgain(candidate.ranked.system, baseline.ranked.system, was, after))
    return found


def _log_rescored(client: Any, args: argparse.Namespace, uri: str, outcome: Outcome, new: QrelsVersion, tmp: Path,
                  text: str) -> str:
    """A parent run for this re-scoring and a run per system in the version's experiment; runs re-scored before
    against the same version are not logged twice."""
    experiment_id = tracked.rescored_experiment(client, args.experiment, new.digest, uri)
    dataset = tracked.qrels_dataset(frame(new.qrels), outcome.rescored[0].ranked.run.data.tags.get(
        "rankscope.corpus", "corpus"), new.digest, new.source or new.digest, outcome.parent)
    parent = tracked.start_rescore(client, experiment_id, f"re-scored with qrels {new.digest}",
                                   {"rankscope.qrels_digest": new.digest})
    try:
        for r in outcome.rescored:
            done = tracked.rescored_run(client, experiment_id, r.ranked.run_id)
            if done is not None:
                r.run_id, r.reused = done.info.run_id, True
                continue
            folder = tmp / "out" / r.ranked.run_id
            folder.mkdir(parents=True, exist_ok=True)
            r.after.table.to_csv(folder / PER_QUESTION_FILE, index=False)
            write_trec_run(r.ranked.ranking, folder / RUN_FILE)
            tags = r.ranked.run.data.tags
            corpus_digest = combined_digest(tags.get(TAG_DOCUMENTS_DIGEST, ""), tags.get(TAG_QUESTIONS_DIGEST, ""),
                                            new.digest)
            r.run_id = tracked.log_rescored(client, experiment_id, parent, r.ranked.run, digest=new.digest,
                                            qrels_run=new.run_id, corpus_digest=corpus_digest,
                                            metrics=r.after.metrics(r.plan), table=r.after.table,
                                            files=[folder / PER_QUESTION_FILE, folder / RUN_FILE],
                                            qrels_dataset=dataset)
        report = tmp / CHANGES_TEXT
        report.write_text(redact_text(text) + "\n", encoding="utf-8")
        outcome.changes.table.to_csv(tmp / CHANGES_TABLE)
        page = write_report(report_html(outcome, text, {"MLflow": f"experiment {args.experiment} qrels {new.digest}",
                                                        "qrels version": new.digest}), tmp / REPORT_FILE)
        parent.log_files([report, tmp / CHANGES_TABLE, page])
        kept = Path(JUDGING_DIR) / "rescored" / new.digest
        kept.mkdir(parents=True, exist_ok=True)
        for made in (report, tmp / CHANGES_TABLE, page):
            (kept / made.name).write_bytes(made.read_bytes())
    except BaseException as exc:
        parent.finish(error=f"{type(exc).__name__}: {exc}")
        raise
    parent.finish()
    return (f"re-scored runs in experiment {args.experiment} qrels {new.digest}: "
            f"{run_location(uri, experiment_id, parent.run_id)}\nReport (open in a browser): "
            f"{(kept / REPORT_FILE).resolve()}")


__all__ = ["JUDGE_SHEET", "POOL_META", "pool", "pull", "rescore", "write_json"]
