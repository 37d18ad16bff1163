"""Lines of a text file, read as UTF-8: what is not text is one plain error, never a traceback or raw bytes echoed.

Shared by every reader of user files (TREC and BEIR qrels, run files, ``corpus.jsonl``, ``queries.jsonl``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from metrics.errors import InputError

SHOWN = 40  # characters of a bad value quoted in an error line


def check_file(path: str | Path) -> Path:
    """``path`` as a Path; an InputError saying what it is when it is not a file (missing, or a directory)."""
    path = Path(path)
    if path.is_dir():
        raise InputError("is a folder, not a file", path)
    if not path.is_file():
        raise InputError("no such file", path)
    return path


def decoded(lines: Iterable[bytes], path: str | Path) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` for each line of a binary stream, decoded as UTF-8.

    A byte that is not UTF-8, or a NUL byte (a binary file), is an InputError naming the file, the line and the
    byte's offset from the start of the file (of the decompressed stream, for a .gz file), showing the byte in hex.
    """
    offset = 0
    for number, raw in enumerate(lines, 1):
        nul = raw.find(b"\0")
        if nul >= 0:
            raise InputError(f"a NUL byte at byte offset {offset + nul}: this looks like a binary file, not text",
                             path, number)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(f"byte 0x{raw[exc.start]:02x} at byte offset {offset + exc.start} is not UTF-8 (save "
                             f"the file as UTF-8)", path, number) from None
        offset += len(raw)
        yield number, text


def text_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """Every line of a (plain) text file, numbered from 1; see :func:`decoded` for what stops it."""
    path = check_file(path)
    with path.open("rb") as handle:
        yield from decoded(handle, path)


def shown(value: str) -> str:
    """A value quoted in an error line: its repr (control characters escaped), cut to :data:`SHOWN` characters."""
    text = repr(value)
    return text if len(text) <= SHOWN else text[: SHOWN - 4] + "...'"
