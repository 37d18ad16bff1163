"""Where a pool goes to be graded and where the grades come back from: a Label Studio project (reached, its token
checked, before anything is written) or a sheet filled in a spreadsheet."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pandas as pd

from metrics.errors import InputError
from pipeline.annotation_tools.label_studio import GRADING, HIGHLIGHTING, LabelStudio
from pipeline.annotation_tools.sheet import (
    is_span_sheet,
    pool_of,
    read_sheets,
    read_span_sheets,
    write_sheet,
    write_span_sheet,
)
from pipeline.data.collection import Collection
from pipeline.judge_steps.pooling import Pooled, texts
from pipeline.judge_steps.saved import SavedPool
from pipeline.judge_steps.settings import JUDGING_DIR, LABEL_STUDIO, JudgeSettings
from pipeline.judging_maths.spans import text_digest


class Assessors:
    """``pool --to``: a Label Studio project, a sheet, or nobody (the pool is only saved)."""

    def __init__(self, to: str | None, settings: JudgeSettings) -> None:
        self.to, self.settings = to, settings
        self.studio: LabelStudio | None = None
        self.project: dict[str, Any] = {}
        self.title, self.made = "", False  # the project's title, and whether this command made it
        if to == LABEL_STUDIO:  # reached (and the token checked) before anything is written
            ls = settings.label_studio
            self.studio = LabelStudio(ls.url, ls.token_env, ls.timeout)
            self.studio.request("GET", "/api/current-user/whoami")
        elif to is not None and Path(to).suffix.lower() not in (".csv", ".tsv"):
            raise InputError(f"--to {to}: expected {LABEL_STUDIO} or a sheet's name ending in .csv or .tsv")

    def sheet_name(self) -> str | None:
        """The sheet's name without its suffix, when the pool goes to a sheet."""
        return Path(self.to).stem if self.to and self.to != LABEL_STUDIO else None

    def open_project(self, name: str, collection: Collection, pooled: Pooled) -> dict[str, Any]:
        """The Label Studio project the pool goes to, made if new; what the saved pool remembers of it."""
        if self.studio is None:
            return {}
        self.title = self.settings.label_studio.project or name
        what = "pairs whose evidence to highlight" if pooled.spans else "pairs"
        described = f"rankscope pool {name}: {collection.label}, {len(pooled.to_judge)} {what}"
        self.project, self.made = self.studio.ensure_project(self.title, self.settings.grades, described,
                                                             HIGHLIGHTING if pooled.spans else GRADING)
        return {"label_studio": {"url": self.studio.url, "project": self.title, "project_id": self.project["id"]}}

    def hand_over(self, pooled: Pooled, collection: Collection, folder: Path) -> None:
        """Push the pairs not in the project yet, or write the sheet; say where to judge them and how to go on."""
        questions, documents = texts(collection)
        pairs = pooled.to_judge
        studio = self.studio
        marked: dict[tuple[str, str], list[tuple[int, int]]] = {}
        if pooled.spans:
            for q, d, start, end in pooled.marked[["query_id", "doc_id", "start", "end"]].itertuples(index=False):
                marked.setdefault((q, d), []).append((int(start), int(end)))
        if studio is not None:
            project = self.project
            there = studio.pushed_pairs(project["id"])
            tasks = [{"query_id": q, "doc_id": d, "question": questions.get(q, ""), "document": documents.get(d, ""),
                      "order": i} for i, (q, d) in enumerate(zip(pairs["query_id"], pairs["doc_id"]), 1)
                     if (q, d) not in there]
            if pooled.spans:
                digests = dict(zip(pairs["doc_id"], (text_digest(documents.get(d, "")) for d in pairs["doc_id"])))
                pushed = studio.push_marked(project["id"], [({**t, "doc_digest": digests[t["doc_id"]]},
                                                             marked.get((t["query_id"], t["doc_id"]), []))
                                                            for t in tasks])
            else:
                pushed = studio.push(project["id"], tasks)
            print(f"Label Studio: project {self.title!r} ({'created' if self.made else 'updated'}, id {project['id']}) "
                  f"at {studio.url}: {pushed} task(s) pushed, {len(pairs) - len(tasks)} already there; judge them at "
                  f"{studio.url}/projects/{project['id']}/data, then: python -m pipeline.judge pull --project "
                  f"{self.title!r}")
        elif self.to is not None and pooled.spans:
            sheet = write_span_sheet(Path(self.to), pairs, questions, documents, self.settings.grades, folder, marked)
            print(f"Sheet: {sheet} (one row per pair, in judging order: a row per highlight, its 'start' and 'end' "
                  f"or its 'text', and its 'grade' ({self.settings.grades.low}: not relevant); 'assessor' if several "
                  f"people judge copies), then: python -m pipeline.judge pull --from {sheet}")
        elif self.to is not None:
            sheet = write_sheet(Path(self.to), pairs, questions, documents, self.settings.grades, folder)
            print(f"Sheet: {sheet} (one row per pair, in judging order: fill in 'grade', and 'assessor' if several "
                  f"people grade copies), then: python -m pipeline.judge pull --from {sheet}")


def pool_folder(args: argparse.Namespace, settings: JudgeSettings, base: Path, sheets: list[Path]) -> Path:
    """``pull``'s pool: ``--pool``, else the first sheet's, else the Label Studio project's folder."""
    if args.pool:
        return Path(args.pool)
    if sheets:
        return pool_of(sheets[0])
    if not settings.label_studio.project:
        raise InputError("pull from Label Studio needs --project TITLE (or --pool FOLDER)")
    return base / JUDGING_DIR / settings.label_studio.project


def pool_project(args: argparse.Namespace, settings: JudgeSettings, saved: SavedPool) -> tuple[LabelStudio, dict]:
    """The pool's Label Studio (``--url``, else where it was pushed, else the settings') and its project."""
    url = args.url or (saved.meta.get("label_studio") or {}).get("url") or settings.label_studio.url
    studio = LabelStudio(url, settings.label_studio.token_env, settings.label_studio.timeout)
    return studio, studio.project(saved.project_title(args.project))


def read_grades(args: argparse.Namespace, settings: JudgeSettings, saved: SavedPool, sources: list[str],
                sheets: list[Path]) -> pd.DataFrame:
    """Every annotation of the pool's pairs, from its Label Studio project and the sheets, as one table."""
    frames = []
    if LABEL_STUDIO in sources:
        studio, project = pool_project(args, settings, saved)
        frames.append(studio.annotations(project["id"], settings.grades, saved.keys))
    if sheets:
        frames.append(read_sheets(sheets, saved.keys, settings.grades))
    return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]


def read_marks(args: argparse.Namespace, settings: JudgeSettings, saved: SavedPool, sources: list[str],
               sheets: list[Path]) -> tuple[pd.DataFrame, list[str]]:
    """A span pool's marks (highlights and "not relevant" marks) from its Label Studio project and span sheets, and
    one line per task that could not be read."""
    frames, problems = [], []
    if LABEL_STUDIO in sources:
        studio, project = pool_project(args, settings, saved)
        found, problems = studio.marks(project["id"], settings.grades, saved.keys)
        frames.append(found)
    for sheet in sheets:
        if not is_span_sheet(sheet):
            raise InputError(f"a span pool's sheet has start and end columns, and this one has none (the sheet of "
                             f"another pool? {saved.folder}'s is written by pool --to FILE.csv)", sheet)
    if sheets:
        frames.append(read_span_sheets(sheets, saved.keys, settings.grades))
    return (pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]), problems
