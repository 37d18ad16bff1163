"""Your own retriever, measured like the built-in ones: any object with ``search(questions, k)``.

The protocol (duck-typed, nothing to import or subclass):

- ``search(self, questions: list[str], k: int) -> list[list[tuple[str, float]]]``: for each question, in order,
  its (document id, score) pairs, best first, higher scores better;
- ``index(self, doc_ids: list[str], texts: list[str]) -> None``, optional: called once, before any search;
- ``describe(self) -> str``, optional: how messages name the engine (:class:`retrievers.http.HttpSearch` gives its
  URL, credentials masked); the class's dotted name otherwise.

A subclass of :class:`retrievers.Retriever` (``index(docs)``, then ``rank(query_ids, texts, depth) -> Run``) is the
richer protocol: it is used as it is, without this adapter.

What comes back is checked before anything is scored. Ids the corpus does not hold are dropped and reported (how
many, and the first few: :meth:`ExternalSearch.notes`), as are ids listed twice for one question (the first kept)
and questions whose scores are not in descending order; a question left with no result (an empty answer, or none
the corpus holds) scores 0, and is counted and named in a note too. A score that is not a finite number (a string,
a bool, NaN), or an answer of the wrong shape, stops the job with one line naming the question, the engine and the
first 200 characters of the answer; so does an engine's own :class:`BadAnswer`. An engine whose ``search`` (or
``index``) raises anything else stops the job with :class:`EngineFailed`: one line naming the engine, the exception
and the question it raised on (found by asking the engine each question of the batch alone), its traceback kept
for the job's log. Each question's documents are then ordered as trec_eval orders a run file (score descending,
ties by document id descending) and, when there are more than ``k``, the first ``k`` of that order are kept: the
figures equal those of the same results written as a TREC run and read with ``retriever=run_file``.
"""

from __future__ import annotations

import math
import traceback
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import numpy as np
import pandas as pd

from metrics.errors import InputError, Note
from metrics.run import Run
from metrics.trec import run_from_frame
from retrievers.base import Documents, Retriever, _check_batch, select_rows

SHOWN = 5  # ids a note lists before "and N more"
ANSWER_SHOWN = 200  # characters of a bad answer quoted in its error line


def shown(text: object) -> str:
    """The first :data:`ANSWER_SHOWN` characters of an answer, on one line."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= ANSWER_SHOWN else flat[:ANSWER_SHOWN] + "..."


def listing(ids: Sequence[str]) -> str:
    head = ", ".join(map(str, ids[:SHOWN]))
    return head + (f" and {len(ids) - SHOWN} more" if len(ids) > SHOWN else "")


class BadAnswer(InputError):
    """An engine's answer to one question that cannot be used (an HTTP service's non-JSON body ...): the engine
    knows only the question's position in the batch, the adapter adds its id to the one line it stops with."""

    def __init__(self, position: int, text: str, reason: str, answer: object = None) -> None:
        self.position, self.text, self.problem, self.answer = position, text, reason, answer
        super().__init__(f"question {shown(text)[:60]!r}: {self.detail}")

    @property
    def detail(self) -> str:
        """What is wrong and, when there was an answer, its first 200 characters."""
        return self.problem if self.answer is None else f"{self.problem}: {shown(self.answer) or '(empty)'}"


class EngineFailed(InputError):
    """A user's engine raised: the job stops on one line (which question, which exception), not on a traceback; the
    traceback (:attr:`details`) goes into the job's log."""

    def __init__(self, message: str, details: str) -> None:
        super().__init__(message)
        self.details = details


def engine_failed(where: str, exc: BaseException, what: str, query_ids: Sequence[str], texts: Sequence[str],
                  alone: Callable[[int], object] | None = None) -> EngineFailed:
    """:class:`EngineFailed` for ``exc``, raised by ``what`` (``search()``) of the engine ``where`` over the batch of
    ``query_ids``: the question it raised on is the batch's only one, else the first that raises asked alone
    (``alone(i)`` asks question ``i`` by itself); a batch every question of which passes alone is said to be one."""
    failing: int | None = 0 if len(query_ids) == 1 else None
    if failing is None and alone is not None:
        for i in range(len(query_ids)):
            try:
                alone(i)
            except Exception:  # the user's code: whatever it raises
                failing = i
                break
    if failing is not None:
        on = f"on question {query_ids[failing]} ({shown(texts[failing])[:60]!r})"
    else:
        on = f"on a batch of {len(query_ids)} questions (each passes alone)" if query_ids else ""
    reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    details = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return EngineFailed(f"{where}: {what} raised {on}: {shown(reason)}".replace("  ", " "), details)


def describe(engine: Any) -> str:
    """How messages name an engine: its own ``describe()`` (an HTTP engine gives its URL, credentials masked),
    else its class."""
    own = getattr(engine, "describe", None)
    return str(own()) if callable(own) else f"{type(engine).__module__}.{type(engine).__qualname__}"


@dataclass
class ExternalSearch(Retriever):
    """A ``search(questions, k)`` engine as a :class:`Retriever`; see the module's docstring for the checks."""

    engine: Any = None
    name: str = "custom"
    _unknown: Counter = field(default_factory=Counter, init=False, repr=False)
    _repeated: Counter = field(default_factory=Counter, init=False, repr=False)
    _unsorted: list[str] = field(default_factory=list, init=False, repr=False)
    _cut: int = field(default=0, init=False, repr=False)
    _empty: list[str] = field(default_factory=list, init=False, repr=False)  # questions left with no result
    _unanswered: int = field(default=0, init=False, repr=False)  # ... of which the engine's answer was empty

    def __post_init__(self) -> None:
        if not callable(getattr(self.engine, "search", None)):
            raise ValueError(f"{describe(self.engine)} has no search(questions, k) method")
        self._known: pd.Index | None = None

    def index(self, docs: Documents) -> ExternalSearch:
        self._known = pd.Index(list(docs.doc_ids), dtype=object)
        own = getattr(self.engine, "index", None)
        if callable(own):
            try:
                own(list(docs.doc_ids), list(docs.doc_texts))
            except InputError:
                raise
            except Exception as exc:  # the user's code: whatever it raises
                raise engine_failed(describe(self.engine), exc, "index()", [], []) from None
        return self

    def rank(self, query_ids: Sequence[str], texts: Sequence[str], depth: int = 100) -> Run:
        _check_batch(query_ids, texts)
        if self._known is None:
            raise RuntimeError(f"{self.name}: rank() before index()")
        where = describe(self.engine)
        try:
            answers = self.engine.search(list(texts), depth)
        except BadAnswer as exc:
            qid = query_ids[exc.position] if 0 <= exc.position < len(query_ids) else "?"
            raise InputError(f"{where}: question {qid} ({shown(exc.text)[:60]!r}): {exc.detail}") from None
        except InputError:
            raise
        except Exception as exc:  # the user's code: whatever it raises
            raise engine_failed(where, exc, "search()", query_ids, texts,
                                lambda i: self.engine.search([texts[i]], depth)) from None
        listed = isinstance(answers, Sequence) and not isinstance(answers, str | bytes)
        if not listed or len(answers) != len(texts):
            count = len(answers) if listed else "no list"
            raise InputError(f"{where}: search() must return one list of (id, score) pairs per question: asked "
                             f"{len(texts)} questions, got {count}: {shown(answers)}")
        q, d, s = [], [], []
        for qid, text, hits in zip(query_ids, texts, answers):
            pairs = self._pairs(hits, qid, text, where)
            scores = [score for _, score in pairs]
            if any(b > a for a, b in pairwise(scores)):
                self._unsorted.append(str(qid))
            seen: set[str] = set()
            for doc, score in pairs:
                if doc in seen:
                    self._repeated[doc] += 1
                    continue
                seen.add(doc)
                q.append(str(qid))
                d.append(doc)
                s.append(score)
            if len(seen) > depth:
                self._cut += 1
        frame = pd.DataFrame({"q": pd.array(q, dtype=object), "d": pd.array(d, dtype=object),
                              "s": np.asarray(s, dtype=np.float64)})
        known = self._known.get_indexer(pd.Index(frame["d"], dtype=object)) >= 0 if len(frame) else np.zeros(0, bool)
        for doc in frame.loc[~known, "d"]:
            self._unknown[doc] += 1
        answered = set(frame["q"].tolist())
        kept = set(frame.loc[known, "q"].tolist())
        for qid in map(str, query_ids):
            if qid not in kept:
                self._empty.append(qid)
                self._unanswered += qid not in answered
        # trec_eval's order first, then the first `depth` of it (select_rows): the best k, whatever the engine's order
        return select_rows(run_from_frame(frame[known], self.name), query_ids, depth, self.name)

    @staticmethod
    def _pairs(hits: Any, qid: str, text: str, where: str) -> list[tuple[str, float]]:
        """One question's answer as (id, score) pairs; anything else stops the job with one line."""

        def bad(reason: str) -> InputError:
            return InputError(f"{where}: question {qid} ({shown(text)[:60]!r}): {reason}: {shown(hits)}")

        if not isinstance(hits, Sequence) or isinstance(hits, str | bytes):
            raise bad("expected a list of (id, score) pairs")
        pairs = []
        for hit in hits:
            if not isinstance(hit, Sequence) or isinstance(hit, str | bytes) or len(hit) != 2:
                raise bad(f"expected (id, score) pairs, got {shown(hit)[:80]!r}")
            doc, score = hit
            if not isinstance(doc, str | int) or isinstance(doc, bool):
                raise bad(f"a document id must be a string, got {shown(doc)[:80]!r}")
            if isinstance(score, str | bytes | bool):  # "0.5" or True: a bug upstream, not a score
                raise bad(f"score {shown(score)[:40]!r} is not a number")
            try:
                value = float(score)
            except (TypeError, ValueError):
                raise bad(f"score {shown(score)[:40]!r} is not a number") from None
            if not math.isfinite(value):
                raise bad(f"score {value!r} is not a finite number")
            pairs.append((str(doc), value))
        return pairs

    def notes(self) -> list[str]:
        where = describe(self.engine)
        found = []
        if self._unknown:
            ids = list(self._unknown)
            found.append(Note(f"{where}: {sum(self._unknown.values())} result(s) name {len(ids)} document id(s) the "
                              f"corpus does not hold: {listing(ids)} (dropped)", "results_unknown_document",
                              sum(self._unknown.values()), ids[:SHOWN]))
        if self._repeated:
            ids = list(self._repeated)
            found.append(Note(f"{where}: {sum(self._repeated.values())} result(s) repeat a document already listed "
                              f"for the same question: {listing(ids)} (the first kept)", "results_repeated",
                              sum(self._repeated.values()), ids[:SHOWN]))
        if self._cut:
            found.append(Note(f"{where}: {self._cut} question(s) got more results than asked for (the first k kept, "
                              f"in trec_eval's order)", "questions_over_k", self._cut))
        if self._empty:
            unknown = len(self._empty) - self._unanswered
            why = ", ".join(part for part in (f"{self._unanswered} with an empty answer" if self._unanswered else "",
                                              f"{unknown} with no id the corpus holds" if unknown else "") if part)
            found.append(Note(f"{where}: {len(self._empty)} question(s) got no result and score 0 ({why}): "
                              f"{listing(self._empty)}", "questions_without_results", len(self._empty),
                              self._empty[:SHOWN]))
        if self._unsorted:
            found.append(Note(f"{where}: {len(self._unsorted)} question(s) have scores that are not in descending "
                              f"order: {listing(self._unsorted)} (ranked by score, higher first, as trec_eval does)",
                              "questions_unsorted", len(self._unsorted), self._unsorted[:SHOWN]))
        return found
