"""Small JSON files that hand results between processes (sweep handle, job records)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def write_json(path: Path, data: Any, indent: int = 2) -> Path:
    """Write atomically: a process killed mid-write never leaves half a file for another to read."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(f"{path.suffix}.tmp-{os.getpid()}")
    temporary.write_text(json.dumps(data, indent=indent, default=str) + "\n", encoding="utf-8")
    temporary.replace(path)
    return path


def read_json(path: Path) -> Any | None:
    """The file's content, or None when it does not exist."""
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8"))
