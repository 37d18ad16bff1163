"""Lines of a text file, read as UTF-8: what is not text is one plain error, never a traceback or raw bytes echoed.

Shared by every reader of user files (TREC and BEIR qrels, run files, ``corpus.jsonl``, ``queries.jsonl``).
"""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from metrics.errors import InputError

SHOWN = 40  # characters of a bad value quoted in an error line


def check_file(path: str | Path) -> Path:
    """``path`` as a Path; an InputError saying what it is when it is not a file (missing, a folder, a device such as
    ``/dev/null``, a pipe such as the shell's ``<(...)``, which is read once and these files are read twice)."""
    path = Path(path)
    if path.is_dir():
        raise InputError("is a folder, not a file", path)
    if not path.is_file():
        if path.exists():
            raise InputError(f"is {_kind(path)}, not a file", path)
        raise InputError("no such file", path)
    return path


def _kind(path: Path) -> str:
    """What a path that exists but is neither a file nor a folder is, in words."""
    mode = path.stat().st_mode
    if stat.S_ISCHR(mode):
        return "the null device (it reads as empty)" if path.resolve() == Path(os.devnull) else "a character device"
    if stat.S_ISFIFO(mode):
        return "a pipe (read once, and it is read twice: save it to a file)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a block device" if stat.S_ISBLK(mode) else "not a regular file"


def text_lines(path: str | Path, opener: Callable[[], BinaryIO] | None = None) -> Iterator[tuple[int, str]]:
    """Every line of a text file, numbered from 1 (``opener`` opens its bytes: a .gz file's, decompressed).

    A byte that is not UTF-8, or a NUL byte (a binary file), is an InputError naming the file, the line and the
    byte's offset from the start of the file (of the decompressed stream, for a .gz file), showing the byte in hex.
    Decoding runs at text-mode speed; only a file that fails is read again, in bytes, to find the place.
    """
    path = check_file(path)
    open_bytes = opener or (lambda: path.open("rb"))
    try:
        with io.TextIOWrapper(open_bytes(), encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if "\0" in line:
                    raise not_text(path, open_bytes)
                yield number, line
    except UnicodeDecodeError:
        raise not_text(path, open_bytes) from None


def not_text(path: Path, open_bytes: Callable[[], BinaryIO]) -> InputError:
    """The error for the file's first NUL byte or byte that is not UTF-8, found by reading its bytes line by line."""
    offset = 0
    with open_bytes() as handle:
        for number, raw in enumerate(handle, 1):
            nul = raw.find(b"\0")
            if nul >= 0:
                return InputError(f"a NUL byte at byte offset {offset + nul}: this looks like a binary file, not "
                                  f"text", path, number)
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                return InputError(f"byte 0x{raw[exc.start]:02x} at byte offset {offset + exc.start} is not UTF-8 "
                                  f"(save the file as UTF-8)", path, number)
            offset += len(raw)
    return InputError("cannot be read as UTF-8 text", path)


def shown(value: str) -> str:
    """A value quoted in an error line: its repr (control characters escaped), cut to :data:`SHOWN` characters."""
    text = repr(value)
    return text if len(text) <= SHOWN else text[: SHOWN - 4] + "...'"


def tsv_rows(path: str | Path, columns: tuple[str, ...], what: str) -> Iterator[tuple[int, list[str]]]:
    """The rows of a tab-separated file whose header starts with ``columns`` (a job's ``chunks.tsv``, ``spans.tsv``
    ...), numbered by line, blank lines skipped; a missing or other header, or a row of too few fields, is one line
    naming the file and line. ``what`` names the file for the header's message (``a job's chunks.tsv``)."""
    lines = text_lines(path)
    header = next(lines, None)
    if header is None or [h.strip() for h in header[1].rstrip("\r\n").split("\t")][: len(columns)] != list(columns):
        raise InputError(f"expected the header {' '.join(columns)} ({what})", path, 1)
    for number, line in lines:
        if not line.strip():
            continue
        row = line.rstrip("\r\n").split("\t")
        if len(row) < len(columns):
            raise InputError(f"expected {len(columns)} tab-separated fields, found {len(row)}", path, number)
        yield number, row
