"""Graded relevance judgments, held as parallel arrays so joins with a Run are vectorised."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from metrics.hashing import factorize, first_repeat


@dataclass(frozen=True)
class QrelsCodes:
    """Judgments as integers: each id replaced by its position in a vocabulary of distinct ids (first-seen
    order), so joins with a Run hash each distinct id once rather than every judgment's."""

    query_vocab: np.ndarray
    query_codes: np.ndarray
    doc_vocab: np.ndarray
    doc_codes: np.ndarray


@dataclass(frozen=True)
class Qrels:
    """Judgments: ``grades[i]`` is the grade of document ``doc_ids[i]`` for question ``query_ids[i]``.

    A (question, document) pair is judged once at most (refused on construction); ``codes`` is the integer form.
    """

    query_ids: np.ndarray
    doc_ids: np.ndarray
    grades: np.ndarray
    codes: QrelsCodes = field(init=False, repr=False, compare=False)
    _relevant: dict[int, list[str]] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "query_ids", np.asarray(self.query_ids, dtype=object))
        object.__setattr__(self, "doc_ids", np.asarray(self.doc_ids, dtype=object))
        object.__setattr__(self, "grades", np.asarray(self.grades, dtype=np.int64))
        if not (len(self.query_ids) == len(self.doc_ids) == len(self.grades)):
            raise ValueError("query_ids, doc_ids and grades must have the same length")
        object.__setattr__(self, "codes", self._encode())

    @classmethod
    def from_dict(cls, judgments: dict[str, dict[str, int]]) -> Qrels:
        rows = [(q, d, g) for q, docs in judgments.items() for d, g in docs.items()]
        if not rows:
            return cls(np.array([], dtype=object), np.array([], dtype=object), np.array([], dtype=np.int64))
        q, d, g = zip(*rows)
        return cls(np.array(q, dtype=object), np.array(d, dtype=object), np.array(g))

    @classmethod
    def from_codes(cls, query_vocab: np.ndarray, query_codes: np.ndarray, doc_vocab: np.ndarray,
                   doc_codes: np.ndarray, grades: np.ndarray) -> Qrels:
        """Judgments already as codes into their distinct ids (first-seen order, as :meth:`_encode` makes them): a
        reader that factorised the ids itself skips doing it again. A pair judged twice is refused, as always."""
        qrels = cls.__new__(cls)
        query_vocab = np.asarray(query_vocab, dtype=object)
        doc_vocab = np.asarray(doc_vocab, dtype=object)
        object.__setattr__(qrels, "query_ids", query_vocab[query_codes])
        object.__setattr__(qrels, "doc_ids", doc_vocab[doc_codes])
        object.__setattr__(qrels, "grades", np.asarray(grades, dtype=np.int64))
        object.__setattr__(qrels, "_relevant", {})
        repeat = first_repeat(query_codes * len(doc_vocab) + doc_codes) if len(grades) else None
        if repeat is not None:
            i = repeat[0]
            raise ValueError(f"judgments name a (question, document) pair twice: question "
                             f"{qrels.query_ids[i]}, document {qrels.doc_ids[i]}")
        object.__setattr__(qrels, "codes", QrelsCodes(query_vocab, np.asarray(query_codes, dtype=np.int64),
                                                      doc_vocab, np.asarray(doc_codes, dtype=np.int64)))
        return qrels

    def to_dict(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for q, d, g in zip(self.query_ids, self.doc_ids, self.grades):
            out.setdefault(str(q), {})[str(d)] = int(g)
        return out

    def __len__(self) -> int:
        return len(self.grades)

    def _encode(self) -> QrelsCodes:
        """The integer form; building it is also the check that no (question, document) pair is judged twice."""
        query_codes, query_vocab = factorize(self.query_ids)
        doc_codes, doc_vocab = factorize(self.doc_ids)
        repeat = first_repeat(query_codes * len(doc_vocab) + doc_codes) if len(self.grades) else None
        if repeat is not None:
            i = repeat[0]
            raise ValueError(f"judgments name a (question, document) pair twice: question "
                             f"{self.query_ids[i]}, document {self.doc_ids[i]}")
        return QrelsCodes(query_vocab, query_codes, doc_vocab, doc_codes)

    def judged_queries(self) -> list[str]:
        """Questions with at least one judgment, in first-seen order."""
        return self.codes.query_vocab.tolist()

    def relevant_queries(self, level: int = 1) -> list[str]:
        """Questions with a judgment at or above ``level`` (never a negative one): the ones that count in a mean."""
        level = max(level, 0)
        if level not in self._relevant:  # kept: the arrays are never modified in place
            codes = self.codes
            # the codes present, ascending (as np.unique gives them, without its import of numpy.ma)
            present = np.bincount(codes.query_codes[self.grades >= level], minlength=len(codes.query_vocab))
            self._relevant[level] = codes.query_vocab[np.flatnonzero(present)].tolist()
        return list(self._relevant[level])

    def subset(self, mask: np.ndarray) -> Qrels:
        return Qrels(self.query_ids[mask], self.doc_ids[mask], self.grades[mask])

    def digest(self) -> str:
        """A content digest independent of line order."""
        order = np.lexsort((self.doc_ids.astype(str), self.query_ids.astype(str)))
        h = hashlib.sha256()
        for i in order:
            h.update(f"{self.query_ids[i]}\t{self.doc_ids[i]}\t{self.grades[i]}\n".encode())
        return h.hexdigest()[:16]


class QrelsBuilder:
    """Collects judgments line by line from a file; a repeated (question, document) pair is an error naming
    both lines. Shared by the TREC and BEIR readers so they report duplicates alike."""

    def __init__(self, path: object) -> None:
        self.path = path
        self._first_line: dict[tuple[str, str], int] = {}
        self._q: list[str] = []
        self._d: list[str] = []
        self._g: list[int] = []

    def add(self, query_id: str, doc_id: str, grade: int, line: int) -> None:
        from metrics.errors import InputError

        key = (query_id, doc_id)
        if key in self._first_line:
            raise InputError(f"duplicate judgment for question {query_id} and document {doc_id} "
                             f"(first on line {self._first_line[key]})", self.path, line)
        self._first_line[key] = line
        self._q.append(query_id)
        self._d.append(doc_id)
        self._g.append(grade)

    @property
    def empty(self) -> bool:
        return not self._q

    def build(self) -> Qrels:
        return Qrels(np.array(self._q, dtype=object), np.array(self._d, dtype=object),
                     np.array(self._g, dtype=np.int64))


def combined_digest(*parts: str) -> str:
    """One digest from digests (a corpus's from its documents', questions' and judgments'; a span judgment version's
    from its qrels' and spans'): the first 16 hex digits of the SHA-256 of the parts in order."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode())
    return h.hexdigest()[:16]
