"""Label Studio, the one module that talks to it: through its REST API (``Authorization: Token ...``, a legacy API
token), with the standard library's HTTP client. A project per pool: a labeling config showing the question, the
document and the graded scale (each grade's meaning written in), the pool pushed as tasks in judging order, never a
pair twice; the annotations read back by export. An adjudication round is a project of its own whose tasks also show
the grades given so far (:data:`ADJUDICATING`): a project's labeling interface is an :class:`Interface`, the texts it
shows and the control whose annotations are read back.

A span pool's project (:class:`SpanInterface`) shows the question and the whole document: the assessor highlights
the evidence, each highlight labelled with its grade (``Labels`` on ``Text``), or marks the document not relevant;
the chunks the systems ranked are pre-annotated (a prediction of their own ``Labels`` control, :data:`MARKED`) so the
assessor starts there. Its highlights are read back as marks (offsets, the text they cover, the grade), each checked
against the document by :mod:`pipeline.judging_maths.spans`.

The token is read from the environment variable the settings name (``label_studio.token_env``), never from the
command line or a file rankscope writes. Every failure is one line: the server cannot be reached, it refuses the
token, the project does not exist, an annotation grades outside the scale or a pair not in the pool.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from xml.sax.saxutils import quoteattr

import pandas as pd

from metrics.errors import InputError
from pipeline.annotation_tools import ANNOTATION_COLUMNS
from pipeline.judging_maths.scale import Scale
from pipeline.judging_maths.spans import MARK_COLUMNS

GRADE = "grade"  # the labeling config's Choices control: each annotation's grade is under this name
PAGE = 100
EVIDENCE = "evidence"  # a span project's Labels control: each highlight and its grade
MARKED = "marked"  # ... the Labels control of the pre-annotated marks (the pooled chunks), never read back
VERDICT = "verdict"  # ... the Choices control marking a document not relevant
MODEL_VERSION = "rankscope pool"  # the pre-annotations' model version (Label Studio shows a project's own)


@dataclass(frozen=True)
class Interface:
    """A project's labeling interface: the task's texts it shows, in order (the task data's field, its header), then
    one choice per grade of the scale (its meaning shown, the grade itself stored: ``alias``) under :data:`GRADE`."""

    shown: tuple[tuple[str, str], ...] = (("question", "Question"), ("document", "Document"))
    asked: str = "How well does the document answer the question?"

    def config(self, scale: Scale) -> str:
        choices = "\n".join(f"    <Choice value={quoteattr(f'{g}: {m}')} alias={quoteattr(str(g))}/>"
                            for g, m in scale.meanings)
        texts = "".join(f'  <Header value={quoteattr(header)}/>\n  <Text name="{field}" value="${field}"/>\n'
                        for field, header in self.shown)
        return (f'<View>\n{texts}  <Header value={quoteattr(self.asked)}/>\n'
                f'  <Choices name="{GRADE}" toName="document" choice="single-radio" required="true">\n{choices}\n'
                f'  </Choices>\n</View>')


GRADING = Interface()  # a pool's project: the question, the document, the grade
EARLIER = "earlier"  # an adjudication task's field: the grades its assessors gave
ADJUDICATING = Interface((*GRADING.shown, (EARLIER, "Grades given so far (the assessors disagree)")),
                         "Your grade settles it: how well does the document answer the question?")


@dataclass(frozen=True)
class SpanInterface:
    """A span project's labeling interface: the task's texts (``shown``), then the document, whose evidence the assessor
    highlights with one label per grade above the scale's lowest (:data:`EVIDENCE`; the meaning shown, the grade
    first), over pre-annotated marks (:data:`MARKED`, labelled ``mark``), or marks not relevant (:data:`VERDICT`)."""

    shown: tuple[tuple[str, str], ...] = (("question", "Question"),)
    mark: str = "pooled chunk"
    asked: str = ("Highlight the evidence, the characters of the document that answer the question, and label each "
                  "highlight with its grade; the systems' chunks are marked. Or mark the document not relevant.")

    def label(self, scale: Scale, grade: int) -> str:
        """The label a highlight of ``grade`` carries."""
        return f"{grade}: {scale.meaning(grade)}"

    def config(self, scale: Scale) -> str:
        labels = "\n".join(f"    <Label value={quoteattr(self.label(scale, g))} alias={quoteattr(str(g))}/>"
                           for g in scale.grades[1:])
        texts = "".join(f'  <Header value={quoteattr(header)}/>\n  <Text name="{field}" value="${field}"/>\n'
                        for field, header in self.shown)
        low = scale.low
        return (f'<View>\n{texts}  <Header value={quoteattr(self.asked)}/>\n'
                f'  <Labels name="{EVIDENCE}" toName="document">\n{labels}\n  </Labels>\n'
                f'  <Labels name="{MARKED}" toName="document">\n'
                f'    <Label value={quoteattr(self.mark)} background="#c8c8c8"/>\n  </Labels>\n'
                f'  <Header value="Document"/>\n  <Text name="document" value="$document" granularity="symbol"/>\n'
                f'  <Choices name="{VERDICT}" toName="document" choice="single">\n'
                f'    <Choice value={quoteattr(self.label(scale, low))} alias={quoteattr(str(low))}/>\n'
                f'  </Choices>\n</View>')


HIGHLIGHTING = SpanInterface()  # a span pool's project
HIGHLIGHTED = "an assessor's highlight"
ADJUDICATING_SPANS = SpanInterface(
    (*HIGHLIGHTING.shown, (EARLIER, "Highlights given so far (the assessors differ)")), HIGHLIGHTED,
    "Your highlights settle it: highlight the evidence and grade each highlight (the assessors' highlights are "
    "marked), or mark the document not relevant.")


def labeling_config(scale: Scale) -> str:
    """A pool's project's labeling config (:data:`GRADING`)."""
    return GRADING.config(scale)


class LabelStudio:
    """One Label Studio server, as one user (the token's)."""

    def __init__(self, url: str, token_env: str, timeout: float = 30.0) -> None:
        if not url.startswith(("http://", "https://")):
            raise InputError(f"Label Studio URL {url!r}: expected http(s)://HOST:PORT")
        token = os.environ.get(token_env, "").strip()
        if not token:
            raise InputError(f"no Label Studio API token: set the environment variable {token_env} (named by "
                             f"label_studio.token_env) to your token (Account & Settings in Label Studio)")
        self.url, self.token_env, self.timeout = url.rstrip("/"), token_env, timeout
        self._token = token

    # -- requests --------------------------------------------------------------------------------------------------

    def request(self, method: str, path: str, body: Any = None, query: dict[str, Any] | None = None) -> Any:
        """One call of the API, its JSON answer; every failure one InputError line."""
        address = self.url + path + ("?" + urllib.parse.urlencode(query) if query else "")
        data = None if body is None else json.dumps(body).encode("utf-8")
        request = urllib.request.Request(address, data=data, method=method, headers={
            "Authorization": f"Token {self._token}", "Content-Type": "application/json", "Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                text = response.read().decode("utf-8")
        except urllib.error.HTTPError as exc:
            detail = _detail(exc)
            if exc.code in (401, 403):
                raise InputError(f"Label Studio at {self.url} refused the token in {self.token_env} (HTTP "
                                 f"{exc.code}: {detail}): check the token, and that the server accepts legacy "
                                 f"tokens (LABEL_STUDIO_ENABLE_LEGACY_API_TOKEN=true)") from None
            raise InputError(f"Label Studio at {self.url} answered {method} {path} with HTTP {exc.code}: "
                             f"{detail}") from None
        except (TimeoutError, urllib.error.URLError, ConnectionError) as exc:
            reason = getattr(exc, "reason", exc)
            raise InputError(f"Label Studio at {self.url} cannot be reached: {reason}") from None
        return json.loads(text) if text.strip() else None

    # -- projects --------------------------------------------------------------------------------------------------

    def find_project(self, title: str) -> dict[str, Any] | None:
        """The project titled exactly ``title``, or None."""
        page = 1
        while True:
            found = self.request("GET", "/api/projects/", query={"title": title, "page": page, "page_size": PAGE})
            results = found.get("results", []) if isinstance(found, dict) else found
            for project in results:
                if project.get("title") == title:
                    return project
            if not isinstance(found, dict) or not found.get("next"):
                return None
            page += 1

    def project(self, title: str) -> dict[str, Any]:
        """The project titled ``title``; one line when there is none."""
        found = self.find_project(title)
        if found is None:
            raise InputError(f"Label Studio at {self.url} has no project titled {title!r} (pool --to label-studio "
                             f"--project {title!r} makes it)")
        return found

    def ensure_project(self, title: str, scale: Scale, description: str,
                       interface: Interface | SpanInterface = GRADING) -> tuple[dict[str, Any], bool]:
        """The project titled ``title``, made with the interface's labeling config over the scale if new (True), else
        its config brought up to them."""
        config = interface.config(scale)
        found = self.find_project(title)
        if found is None:
            made = self.request("POST", "/api/projects/", {"title": title, "description": description,
                                                           "label_config": config})
            return made, True
        if found.get("label_config") != config:
            found = self.request("PATCH", f"/api/projects/{found['id']}/", {"label_config": config})
        return found, False

    # -- tasks and annotations -------------------------------------------------------------------------------------

    def tasks(self, project_id: int, every: bool = True) -> list[dict[str, Any]]:
        """The project's tasks with their annotations (every task, or only those annotated)."""
        found = self.request("GET", f"/api/projects/{project_id}/export",
                             query={"exportType": "JSON", "download_all_tasks": "true" if every else "false"})
        return list(found or [])

    def pushed_pairs(self, project_id: int) -> set[tuple[str, str]]:
        """The (question, document) pairs the project's tasks hold already."""
        return {(str(t["data"].get("query_id")), str(t["data"].get("doc_id"))) for t in self.tasks(project_id)
                if isinstance(t.get("data"), dict)}

    def push(self, project_id: int, tasks: Sequence[dict[str, Any]], batch: int = 1000) -> int:
        """Import ``tasks`` (each a task's ``data``) in order, in batches; how many were imported."""
        done = 0
        for start in range(0, len(tasks), batch):
            chunk = [{"data": dict(t)} for t in tasks[start:start + batch]]
            answer = self.request("POST", f"/api/projects/{project_id}/import", chunk)
            done += int((answer or {}).get("task_count", len(chunk)))
        return done

    def push_marked(self, project_id: int, tasks: Sequence[tuple[dict[str, Any], Sequence[tuple[int, int]]]],
                    interface: SpanInterface = HIGHLIGHTING, batch: int = 500) -> int:
        """Import span tasks, each ``(data, ranges)``: its data (``document`` among it) and the character ranges to
        pre-annotate as the interface's marks (a prediction per task); how many were imported."""
        done = 0
        for start in range(0, len(tasks), batch):
            chunk = []
            for data, ranges in tasks[start:start + batch]:
                text = str(data.get("document", ""))
                result = [{"id": f"m{i}", "from_name": MARKED, "to_name": "document", "type": "labels",
                           "value": {"start": int(s), "end": int(e), "text": text[int(s):int(e)],
                                     "labels": [interface.mark]}} for i, (s, e) in enumerate(ranges, 1)]
                chunk.append({"data": dict(data),
                              "predictions": [{"model_version": MODEL_VERSION, "result": result}] if result else []})
            answer = self.request("POST", f"/api/projects/{project_id}/import", chunk)
            done += int((answer or {}).get("task_count", len(chunk)))
        return done

    def users(self) -> dict[int, str]:
        """User ids and what names them (email, else username)."""
        found = self.request("GET", "/api/users/")
        users = found.get("results", []) if isinstance(found, dict) else found
        return {int(u["id"]): str(u.get("email") or u.get("username") or u["id"]) for u in users}

    def annotations(self, project_id: int, scale: Scale, pool: set[tuple[str, str]]) -> pd.DataFrame:
        """Every (not cancelled) annotation of the project: question, document, assessor, grade, when. A task that
        is not a pair of the pool, or a grade outside the scale, is one line naming the task."""
        names = self.users()
        rows = []
        for task in self.tasks(project_id, every=False):
            data = task.get("data") or {}
            pair = (str(data.get("query_id")), str(data.get("doc_id")))
            where = f"Label Studio task {task.get('id')}: "
            for annotation in _graded(task.get("annotations") or []):
                if pair not in pool:
                    raise InputError(f"{where}an annotation for question {pair[0]!r} and document {pair[1]!r}, not a "
                                     f"pair of this pool (a task added by hand, or another pool's project): nothing "
                                     f"written")
                value = _grade_of(annotation)
                if value is None:
                    continue
                rows.append((*pair, _assessor(annotation, names), scale.check(value, where),
                             str(annotation.get("updated_at") or annotation.get("created_at") or "")))
        return pd.DataFrame(rows, columns=ANNOTATION_COLUMNS)

    def marks(self, project_id: int, scale: Scale, pool: set[tuple[str, str]]) -> tuple[pd.DataFrame, list[str]]:
        """Every highlight and "not relevant" mark of a span project's (not cancelled) annotations, each assessor's
        latest annotation of a task (``MARK_COLUMNS``, ``where`` naming the task), and one line per task that cannot
        be read (a task without a question). An annotation with neither is not a judgment yet. A task that is not a
        pair of the pool, or a label that is no grade of the scale, is one InputError line naming the task."""
        names = self.users()
        rows, problems = [], []
        for task in self.tasks(project_id, every=False):
            data = task.get("data") or {}
            where = f"Label Studio task {task.get('id')}"
            annotations = _latest(list(_graded(task.get("annotations") or [])), names)
            if not annotations:
                continue
            query, doc = (str(data.get(k) or "").strip() for k in ("query_id", "doc_id"))
            missing = [k for k in ("query_id", "question", "doc_id") if not str(data.get(k) or "").strip()]
            if missing:
                what = "a document" if missing == ["doc_id"] else "a question"
                problems.append(f"{where}: a task without {what} (no {' or '.join(missing)} in its data): its "
                                f"{len(annotations)} annotation(s) not used")
                continue
            if (query, doc) not in pool:
                raise InputError(f"{where}: an annotation for question {query!r} and document {doc!r}, not a pair of "
                                 f"this pool (a task added by hand, or another pool's project): nothing written")
            seen = str(data.get("doc_digest") or "")  # the text the task showed: its digest when pushed
            for assessor, annotation in annotations.items():
                when = str(annotation.get("updated_at") or annotation.get("created_at") or "")
                for region in annotation.get("result") or []:
                    value = region.get("value") or {}
                    if region.get("from_name") == EVIDENCE:
                        label = (value.get("labels") or [""])[0]
                        grade = scale.check(str(label).split(":", 1)[0], f"{where}: ")
                        rows.append((query, doc, assessor, grade, value.get("start"), value.get("end"),
                                     str(value.get("text") or ""), when, where, seen))
                    elif region.get("from_name") == VERDICT and value.get("choices"):
                        grade = scale.check(str(value["choices"][0]).split(":", 1)[0], f"{where}: ")
                        rows.append((query, doc, assessor, grade, None, None, "", when, where, seen))
        return pd.DataFrame(rows, columns=MARK_COLUMNS), problems

    # -- what a test or an assessor's script does --------------------------------------------------------------------

    def annotate(self, task_id: int, grade: int, user_id: int | None = None) -> dict[str, Any]:
        """Grade one task as ``user_id`` (default: the token's user), as the labeling interface would."""
        result = [{"from_name": GRADE, "to_name": "document", "type": "choices",
                   "value": {"choices": [str(grade)]}}]
        body: dict[str, Any] = {"result": result}
        if user_id is not None:
            body["completed_by"] = user_id
        return self.request("POST", f"/api/tasks/{task_id}/annotations/", body)


    def highlight(self, task_id: int, scale: Scale, spans: Sequence[tuple[int, int, int, str]] = (),
                  not_relevant: bool = False, user_id: int | None = None,
                  interface: SpanInterface = HIGHLIGHTING) -> dict[str, Any]:
        """Annotate one span task as ``user_id`` (default: the token's user), as the labeling interface would: each
        ``(start, end, grade, text)`` a highlight labelled with its grade, or the document marked not relevant."""
        result: list[dict[str, Any]] = [
            {"id": f"h{i}", "from_name": EVIDENCE, "to_name": "document", "type": "labels",
             "value": {"start": int(s), "end": int(e), "text": text, "labels": [interface.label(scale, int(g))]}}
            for i, (s, e, g, text) in enumerate(spans, 1)]
        if not_relevant:
            result.append({"id": "v", "from_name": VERDICT, "to_name": "document", "type": "choices",
                           "value": {"choices": [str(scale.low)]}})
        body: dict[str, Any] = {"result": result}
        if user_id is not None:
            body["completed_by"] = user_id
        return self.request("POST", f"/api/tasks/{task_id}/annotations/", body)


def _latest(annotations: list[dict[str, Any]], names: dict[int, str]) -> dict[str, dict[str, Any]]:
    """Each assessor's latest annotation of a task (updated last, then made last)."""
    found: dict[str, dict[str, Any]] = {}
    for annotation in sorted(annotations, key=lambda a: (str(a.get("updated_at") or a.get("created_at") or ""),
                                                         int(a.get("id") or 0))):
        found[_assessor(annotation, names)] = annotation
    return found


def _assessor(annotation: dict[str, Any], names: dict[int, str]) -> str:
    who = annotation.get("completed_by")
    ident = who.get("id") if isinstance(who, dict) else who
    email = who.get("email") if isinstance(who, dict) else None
    return email or (names.get(int(ident), f"user {ident}") if ident is not None else "unknown")


def _graded(annotations: Iterable[dict[str, Any]]) -> Iterable[dict[str, Any]]:
    return (a for a in annotations if not a.get("was_cancelled"))


def _grade_of(annotation: dict[str, Any]) -> str | None:
    for region in annotation.get("result") or []:
        if region.get("from_name") == GRADE:
            choices = (region.get("value") or {}).get("choices") or []
            if choices:
                return str(choices[0])
    return None


def _detail(exc: urllib.error.HTTPError) -> str:
    try:
        body = exc.read().decode("utf-8", "replace")
    except Exception:
        return exc.reason or ""
    try:
        found = json.loads(body)
        text = found.get("detail") or found.get("validation_errors") or found if isinstance(found, dict) else found
    except ValueError:
        text = body
    return " ".join(str(text).split())[:300]
