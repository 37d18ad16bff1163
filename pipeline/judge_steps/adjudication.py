"""An adjudication round: the pairs the merge rule leaves tied (two assessors who differ, always) pushed to a Label
Studio project of their own, each task showing the grades given so far, for a third assessor to settle. The pool
remembers the round (``pool.json``); ``pull`` reads its grades back, and each settles its pair's tie."""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from metrics.errors import InputError
from pipeline.annotation_tools import ANNOTATION_COLUMNS
from pipeline.annotation_tools.label_studio import ADJUDICATING, EARLIER, LabelStudio
from pipeline.annotation_tools.sheet import sheet_texts
from pipeline.common.jsonfile import write_json
from pipeline.common.names import POOL_META
from pipeline.judge_steps.saved import SavedPool
from pipeline.judge_steps.settings import LABEL_STUDIO, JudgeSettings
from pipeline.judging_maths.agreement import KEY, LOWER, merge, tied_pairs

ROUND = "adjudication"  # pool.json's record of the round: its Label Studio project


def round_title(settings: JudgeSettings, saved: SavedPool) -> str:
    """The round's project: the settings' ``adjudication_project``, else the pool's project's title and
    " adjudication"."""
    known = saved.meta.get(ROUND) or {}
    first = saved.project_title()
    return settings.label_studio.adjudication_project or known.get("project") or f"{first} adjudication"


def round_studio(settings: JudgeSettings, saved: SavedPool, url: str | None) -> LabelStudio:
    known = saved.meta.get(ROUND) or saved.meta.get("label_studio") or {}
    ls = settings.label_studio
    return LabelStudio(url or known.get("url") or ls.url, ls.token_env, ls.timeout)


def open_round(settings: JudgeSettings, saved: SavedPool, url: str | None, pool: str, pairs: int,
               interface: str) -> tuple[LabelStudio, str, dict, bool, set[tuple[str, str]]]:
    """The round's Label Studio, its project's title, the project (made if new, with ``interface``), whether it was
    made, and the pairs already pushed to it."""
    studio = round_studio(settings, saved, url)
    title = round_title(settings, saved)
    project, made = studio.ensure_project(title, settings.grades, f"rankscope adjudication of {pool} "
                                          f"{saved.meta['name']}: {pairs} tied pairs", interface)
    return studio, title, project, made, studio.pushed_pairs(project["id"])


def round_project(settings: JudgeSettings, saved: SavedPool, url: str | None) -> tuple[LabelStudio, dict]:
    """The round's Label Studio and its existing project."""
    studio = round_studio(settings, saved, url)
    return studio, studio.project(round_title(settings, saved))


def texts_of(args: argparse.Namespace, settings: JudgeSettings, saved: SavedPool, sources: list[str],
             sheets: list[Path]) -> dict[tuple[str, str], tuple[str, str]]:
    """Each graded pair's question and document, as its assessors read them: from the pool's Label Studio tasks, or
    from the sheets' columns."""
    found: dict[tuple[str, str], tuple[str, str]] = {}
    if LABEL_STUDIO in sources:
        studio = round_studio(settings, saved, args.url)
        project = studio.project(saved.project_title(args.project))
        for task in studio.tasks(project["id"], every=False):
            data = task.get("data") or {}
            found[(str(data.get("query_id")), str(data.get("doc_id")))] = (str(data.get("question", "")),
                                                                           str(data.get("document", "")))
    if sheets:
        found.update(sheet_texts(sheets))
    return found


def push_round(args: argparse.Namespace, settings: JudgeSettings, saved: SavedPool, annotations: pd.DataFrame,
               texts: dict[tuple[str, str], tuple[str, str]]) -> str:
    """Push the tied pairs not in the round's project yet (made if new); remember the round in the pool; what to
    say."""
    if annotations.empty:
        raise InputError(f"no pair of the pool in {saved.folder} is graded yet: nothing to adjudicate")
    tied = tied_pairs(annotations, settings.rule)
    if tied.empty:
        return (f"No pair is left tied by the {settings.rule} rule ({len(annotations)} grade(s) of "
                f"{annotations[KEY].drop_duplicates().shape[0]} pair(s)): nothing to adjudicate")
    studio, title, project, made, there = open_round(settings, saved, args.url, "pool", len(tied), ADJUDICATING)
    scale = settings.grades
    tasks = []
    for i, row in enumerate(tied.itertuples(index=False), 1):
        if (row.query_id, row.doc_id) in there:
            continue
        question, document = texts.get((row.query_id, row.doc_id), ("", ""))
        earlier = "; ".join(f"{who} gave {grade}: {scale.meaning(int(grade))}"
                            for who, grade in (part.rsplit("=", 1) for part in row.grades.split(", ")))
        tasks.append({"query_id": row.query_id, "doc_id": row.doc_id, "question": question, "document": document,
                      EARLIER: earlier, "order": i})
    pushed = studio.push(project["id"], tasks)
    return remember_round(saved, studio, title, project, made, len(tied), pushed, len(tied) - len(tasks),
                          f"pair(s) left tied by the {settings.rule} rule", "each shows the grades given so far",
                          "settles them")


def remember_round(saved: SavedPool, studio: LabelStudio, title: str, project: dict, made: bool, pairs: int,
                   pushed: int, there: int, what: str, shown: str, doing: str) -> str:
    """Remember the round in the pool (``pool.json``); the line that says where it is and how to go on."""
    saved.meta[ROUND] = {"url": studio.url, "project": title, "project_id": project["id"], "pairs": pairs}
    write_json(saved.folder / POOL_META, saved.meta)
    first = saved.project_title()
    return (f"Adjudication round: project {title!r} ({'created' if made else 'updated'}, id {project['id']}) at "
            f"{studio.url}: {pairs} {what}, {pushed} task(s) pushed, {there} already there; {shown}. A third "
            f"assessor {doing} at {studio.url}/projects/{project['id']}/data, then: python -m pipeline.judge pull "
            f"--project {first!r}")


def read_round(settings: JudgeSettings, saved: SavedPool, url: str | None = None) -> pd.DataFrame:
    """The round's grades (``ANNOTATION_COLUMNS``; none when the pool has no round), each checked against the pool
    and the scale."""
    if ROUND not in saved.meta:
        return pd.DataFrame(columns=ANNOTATION_COLUMNS)
    studio, project = round_project(settings, saved, url)
    return studio.annotations(project["id"], settings.grades, saved.keys)


def settled(round_grades: pd.DataFrame, rule: str) -> pd.DataFrame:
    """One adjudicated grade per pair (``query_id``, ``doc_id``, ``grade``): several adjudicators of a pair merged by
    the rule, a tie between them to the lower grade."""
    if round_grades.empty:
        return pd.DataFrame(columns=[*KEY, "grade"])
    return merge(round_grades, rule, LOWER)[[*KEY, "grade"]]


def refuse_open(merged: pd.DataFrame, rule: str, command: str) -> None:
    """Under ``ties: adjudicated``, a tied pair nobody has settled yet stops the pull; ``command`` starts the round."""
    waiting = int(merged["open"].sum())
    if waiting:
        raise InputError(f"{waiting} pair(s) left tied by the {rule} rule have no adjudicated grade yet (ties: "
                         f"adjudicated): {command} pushes them to a third assessor (--ties lower settles them by the "
                         f"lower grade); nothing written")


def command_for(saved: SavedPool, sheets: list[Path]) -> str:
    """The command that pushes a pool's ties to an adjudication round, given its grades as pull was."""
    if sheets:
        return "python -m pipeline.judge adjudicate " + " ".join(f"--from {s}" for s in sheets)
    title = saved.project_title()
    return f"python -m pipeline.judge adjudicate --project {title!r}"
