"""A search service over HTTP as your own retriever: ``retriever=http retriever.url=http://HOST:PORT/PATH``.

:class:`HttpSearch` speaks the ``search(questions, k)`` protocol of :mod:`retrievers.external`, so the same adapter
checks what it returns (unknown ids dropped and reported, more than ``k`` cut, trec_eval's order). For each
question it POSTs a JSON body (default ``{"query": TEXT, "k": K}``) and reads a JSON answer (default: a list of
``{"id": ..., "score": ...}``, best first). The body is a template: a string ``"{query}"`` or ``"{k}"`` anywhere in
it becomes the question's text or the depth (``"{k}"`` alone becomes a number); ``hits``, ``id`` and ``score`` are
dotted paths into the answer and into each hit, so an Elasticsearch or OpenSearch ``_search`` endpoint works by
config alone (``conf/retriever/elasticsearch.yaml``: ``hits.hits``, ``_id``, ``_score``).

- ``concurrency`` requests at a time; each waits ``timeout`` seconds; a connection error, a timeout, a 5xx or a
  429 is tried again ``retries`` times, after ``backoff``, then twice that, and so on.
- ``headers`` maps a header's name to the name of the environment variable that holds its value (an API key
  stays out of the config, and so out of every param, tag and log). Credentials in the URL
  (``http://user:password@host``) are sent as HTTP basic authentication and masked wherever the URL is shown.
- An answer that is not JSON, has the wrong shape or a score that is not a finite number stops the job with one
  line naming the question, the URL and the first 200 characters of the answer; so does any other 4xx, and a
  service still unreachable after the retries.

Only the standard library (``urllib``, ``concurrent.futures``): nothing to install.
"""

from __future__ import annotations

import base64
import http.client
import json
import math
import os
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from retrievers.external import BadAnswer

DEFAULT_BODY = {"query": "{query}", "k": "{k}"}
ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")  # what a header's value in the config must be: a variable's name
_PLACEHOLDER = re.compile(r"\{(query|k)\}")
MASK = "***"


def masked_url(url: str) -> str:
    """``url`` with the password (or a lone token) of its user information replaced by ``***``."""
    parts = urllib.parse.urlsplit(url)
    userinfo, at, host = parts.netloc.rpartition("@")
    if not at:
        return url
    user, colon, _ = userinfo.partition(":")
    shown = f"{user}:{MASK}" if colon else MASK
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{shown}@{host}"))


def fill(template: Any, query: str, k: int) -> Any:
    """The request body for one question: ``"{k}"`` alone becomes the number k, ``"{query}"`` the question's text;
    inside a longer string both are replaced as text."""
    if isinstance(template, str):
        if template == "{k}":
            return k
        return _PLACEHOLDER.sub(lambda m: query if m.group(1) == "query" else str(k), template)
    if isinstance(template, dict):
        return {key: fill(value, query, k) for key, value in template.items()}
    if isinstance(template, list | tuple):
        return [fill(value, query, k) for value in template]
    return template


def at_path(node: Any, path: str) -> Any:
    """The value at a dotted ``path`` (``hits.hits``, ``_source.doc_id``; a number indexes a list); ``""`` is the
    node itself. Raises KeyError naming the first step that is missing."""
    for step in path.split(".") if path else ():
        if isinstance(node, dict) and step in node:
            node = node[step]
        elif isinstance(node, list) and step.isdigit() and int(step) < len(node):
            node = node[int(step)]
        else:
            raise KeyError(step)
    return node


class Unreachable(Exception):
    """No answer, or one worth asking again for (5xx, 429)."""


@dataclass(repr=False)
class HttpSearch:
    """One JSON request per question to ``url``; see the module's docstring."""

    url: str
    body: dict[str, Any] | None = None  # None: {"query": "{query}", "k": "{k}"}
    hits: str = ""  # where the list of hits is in the answer ("": the answer is the list)
    id: str = "id"  # where a hit's document id is
    score: str = "score"  # where a hit's score is
    headers: dict[str, str] = field(default_factory=dict)  # header name -> environment variable holding its value
    concurrency: int = 8
    timeout: float = 30.0
    retries: int = 3
    backoff: float = 0.5
    name: str = "http"
    _send: dict[str, str] = field(default_factory=dict, init=False, repr=False)  # header values: never shown
    _target: str = field(default="", init=False, repr=False)  # the URL without its credentials

    def __post_init__(self) -> None:
        parts = urllib.parse.urlsplit(str(self.url))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"url must be http://HOST[:PORT]/PATH or https://..., got {masked_url(str(self.url))!r}")
        for key, low in (("concurrency", 1), ("retries", 0)):
            if int(getattr(self, key)) < low:
                raise ValueError(f"{key} must be at least {low}, got {getattr(self, key)}")
        if not self.timeout > 0 or not self.backoff >= 0:
            raise ValueError(f"timeout must be > 0 and backoff >= 0, got {self.timeout} and {self.backoff}")
        if not self.id:
            raise ValueError("id: give the path of the document id inside a hit (e.g. id or _id)")
        self._send = {"Content-Type": "application/json", "Accept": "application/json"}
        if parts.username is not None:  # user:password@ in the URL: basic authentication, the URL sent without it
            user = urllib.parse.unquote(parts.username)
            password = urllib.parse.unquote(parts.password or "")
            token = base64.b64encode(f"{user}:{password}".encode()).decode()
            self._send["Authorization"] = f"Basic {token}"
        for header, variable in (self.headers or {}).items():
            self._send[str(header)] = self._from_environment(str(header), variable)
        self._target = urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))

    @staticmethod
    def _from_environment(header: str, variable: Any) -> str:
        """A header's value, read from the environment variable the config names (the value itself is never
        echoed: a config that holds a key instead of a name must not print it)."""
        if not isinstance(variable, str) or not ENV_NAME.fullmatch(variable):
            raise ValueError(f"headers.{header} must name the environment variable that holds the header's value "
                             f"(upper-case letters, digits and _), not the value itself")
        value = os.environ.get(variable)
        if value is None:
            raise ValueError(f"headers.{header}: environment variable {variable} is not set")
        return value

    def __repr__(self) -> str:
        return f"HttpSearch({self.describe()!r}, name={self.name!r})"

    def describe(self) -> str:
        """How messages name this engine: its URL, credentials masked."""
        return masked_url(str(self.url))

    def search(self, questions: list[str], k: int) -> list[list[tuple[str, float]]]:
        """Each question's (id, score) pairs, in the order the service gave them."""
        if self.concurrency == 1 or len(questions) <= 1:
            return [self._ask(i, text, k) for i, text in enumerate(questions)]
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(questions))) as pool:
            futures = [pool.submit(self._ask, i, text, k) for i, text in enumerate(questions)]
            try:
                return [future.result() for future in futures]  # the first failure by position is the one told
            except BaseException:
                pool.shutdown(wait=False, cancel_futures=True)
                raise

    def _ask(self, position: int, text: str, k: int) -> list[tuple[str, float]]:
        payload = json.dumps(fill(DEFAULT_BODY if self.body is None else self.body, text, k)).encode()
        answer = self._post(position, text, payload)
        return self._read(position, text, answer)

    def _post(self, position: int, text: str, payload: bytes) -> str:
        """The answer's text; tried again on connection errors, timeouts, 5xx and 429."""
        attempts = int(self.retries) + 1
        for attempt in range(attempts):
            try:
                return self._once(position, text, payload)
            except Unreachable as exc:
                if attempt + 1 == attempts:
                    raise BadAnswer(position, text, f"no answer after {attempts} attempt(s) ({exc})", None) from None
                time.sleep(self.backoff * 2**attempt)
        raise AssertionError("unreachable")

    def _once(self, position: int, text: str, payload: bytes) -> str:
        request = urllib.request.Request(self._target, data=payload, headers=self._send, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return response.read().decode("utf-8", errors="replace")
        except urllib.error.HTTPError as exc:
            body = exc.read().decode("utf-8", errors="replace") if exc.fp is not None else ""
            if exc.code >= 500 or exc.code == 429:
                raise Unreachable(f"HTTP {exc.code} {exc.reason}") from None
            raise BadAnswer(position, text, f"HTTP {exc.code} {exc.reason}", body) from None
        except urllib.error.URLError as exc:
            raise Unreachable(str(exc.reason)) from None
        except (TimeoutError, ConnectionError, http.client.HTTPException) as exc:
            raise Unreachable(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__) from None

    def _read(self, position: int, text: str, answer: str) -> list[tuple[str, float]]:
        """The hits of one answer as (id, score) pairs; anything unusable is a :class:`BadAnswer`."""

        def bad(reason: str) -> BadAnswer:
            return BadAnswer(position, text, reason, answer)

        try:
            tree = json.loads(answer)
        except ValueError as exc:
            raise bad(f"the answer is not JSON ({exc})") from None
        where = f"the answer's {self.hits!r}" if self.hits else "the answer"
        try:
            hits = at_path(tree, self.hits)
        except KeyError as exc:
            raise bad(f"expected a list of hits at {self.hits!r} in the answer, found no {exc.args[0]!r}") from None
        if not isinstance(hits, list):
            raise bad(f"expected {where} to be a list of hits, got {type(hits).__name__}")
        pairs = []
        for number, hit in enumerate(hits, 1):
            try:
                doc, score = at_path(hit, self.id), at_path(hit, self.score)
            except KeyError as exc:
                raise bad(f"hit {number} has no {exc.args[0]!r} (expected {self.id!r} and {self.score!r})") from None
            if isinstance(doc, bool) or not isinstance(doc, str | int):
                raise bad(f"hit {number}: the document id {json.dumps(doc)[:40]} is not a string")
            if isinstance(score, bool) or not isinstance(score, int | float) or not math.isfinite(score):
                raise bad(f"hit {number}: the score {json.dumps(score)[:40]} is not a finite number")
            pairs.append((str(doc), float(score)))
        return pairs

