"""Label Studio, the one module that talks to it: through its REST API (``Authorization: Token ...``, a legacy API
token), with the standard library's HTTP client. A project per pool: a labeling config showing the question, the
document and the graded scale (each grade's meaning written in), the pool pushed as tasks in judging order, never a
pair twice; the annotations read back by export. An adjudication round is a project of its own whose tasks also show
the grades given so far (:data:`ADJUDICATING`): a project's labeling interface is an :class:`Interface`, the texts it
shows and the control whose annotations are read back.

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

GRADE = "grade"  # the labeling config's Choices control: each annotation's grade is under this name
PAGE = 100


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
                       interface: Interface = GRADING) -> tuple[dict[str, Any], bool]:
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
                who = annotation.get("completed_by")
                ident = who.get("id") if isinstance(who, dict) else who
                email = who.get("email") if isinstance(who, dict) else None
                assessor = email or (names.get(int(ident), f"user {ident}") if ident is not None else "unknown")
                rows.append((*pair, assessor, scale.check(value, where),
                             str(annotation.get("updated_at") or annotation.get("created_at") or "")))
        return pd.DataFrame(rows, columns=ANNOTATION_COLUMNS)

    # -- what a test or an assessor's script does --------------------------------------------------------------------

    def annotate(self, task_id: int, grade: int, user_id: int | None = None) -> dict[str, Any]:
        """Grade one task as ``user_id`` (default: the token's user), as the labeling interface would."""
        result = [{"from_name": GRADE, "to_name": "document", "type": "choices",
                   "value": {"choices": [str(grade)]}}]
        body: dict[str, Any] = {"result": result}
        if user_id is not None:
            body["completed_by"] = user_id
        return self.request("POST", f"/api/tasks/{task_id}/annotations/", body)


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
