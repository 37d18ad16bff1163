"""The one error type for bad input: it names the file and line so the user can fix the data."""

from __future__ import annotations

from pathlib import Path


class InputError(ValueError):
    """Bad input data or arguments, reported plainly (file and line when known)."""

    def __init__(self, message: str, path: str | Path | None = None, line: int | None = None):
        self.path = None if path is None else str(path)
        self.line = line
        self.reason = message
        where = ""
        if self.path is not None:
            where = f"{self.path}:{line}: " if line is not None else f"{self.path}: "
        super().__init__(f"{where}{message}")
