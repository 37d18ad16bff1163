"""The tokenizer chunks are sized and budgets counted with: a Hugging Face ``tokenizer.json``, or a known name.

Known names are the tokenizers rankscope ships (:data:`KNOWN`: ``minilm``, all-MiniLM-L6-v2's, the default); any
other value is a path to a ``tokenizer.json`` or to a folder holding one (relative to the folder the command started
in). The shipped MiniLM tokenizer truncates at 128 tokens and pads to 128: both are turned off here, or every count
would stop at 128. A chunk's tokens are its text's, without the special tokens a model adds around an input
(``[CLS]``, ``[SEP]``): what the chunk adds to a prompt.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from metrics.errors import InputError

CHUNK_HINT = "pip install 'rankscope[chunk]'"


def _minilm() -> Path:
    from retrievers.encoders import shipped_tokenizer

    return shipped_tokenizer()


KNOWN: dict[str, Callable[[], Path]] = {"minilm": _minilm, "all-minilm-l6-v2": _minilm}


def require(module: str, what: str = "chunking") -> Any:
    """Import an optional module of the ``chunk`` extra, or fail with one line saying what to install."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise InputError(f"{what} needs the optional package {module!r}: {CHUNK_HINT}") from None


def tokenizer_path(name: str, base: Path | None = None) -> Path:
    """The ``tokenizer.json`` a name or path stands for; an InputError when it is neither."""
    key = str(name).strip()
    if key.lower() in KNOWN:
        return KNOWN[key.lower()]()
    found = Path(key).expanduser()
    if not found.is_absolute() and base is not None:
        found = base / found
    if found.is_dir():
        found = found / "tokenizer.json"
    if found.is_file():
        return found.resolve()
    raise InputError(f"chunker.tokenizer={name!r} is neither a known tokenizer ({', '.join(sorted(set(KNOWN)))}) nor "
                     f"a tokenizer.json file (or a folder holding one)")


@dataclass(frozen=True)
class Tokens:
    """A loaded tokenizer: counts tokens and gives each token's character offsets; ``digest`` identifies it."""

    path: Path
    digest: str
    tokenizer: Any  # tokenizers.Tokenizer, truncation and padding off

    def count(self, texts: Sequence[str]) -> np.ndarray:
        """Each text's tokens (special tokens excluded)."""
        if not texts:
            return np.zeros(0, dtype=np.int64)
        encodings = self.tokenizer.encode_batch(list(texts), add_special_tokens=False)
        return np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(encodings))

    def offsets(self, texts: Sequence[str]) -> list[list[tuple[int, int]]]:
        """Each text's tokens as character ranges into it (special tokens excluded)."""
        return [e.offsets for e in self.encode(texts)]

    def encode(self, texts: Sequence[str]) -> list[Any]:
        """Each text's ``tokenizers.Encoding`` (special tokens excluded): ``len(e)`` tokens, ``e.token_to_chars(i)``
        the characters of token ``i`` (read for the few tokens needed, not the whole offsets list)."""
        return self.tokenizer.encode_batch(list(texts), add_special_tokens=False) if texts else []


def load(name: str, base: Path | None = None) -> Tokens:
    """The tokenizer ``name`` stands for, ready to count (loaded once per process)."""
    return _load(tokenizer_path(name, base))


@lru_cache(maxsize=8)
def _load(path: Path) -> Tokens:
    tokenizers = require("tokenizers", "counting tokens")
    content = path.read_bytes()
    try:
        tokenizer = tokenizers.Tokenizer.from_str(content.decode("utf-8"))
    except Exception as exc:  # tokenizers raises its own Exception types for a file it cannot read
        raise InputError(f"not a Hugging Face tokenizer.json ({' '.join(str(exc).split())[:200]})", path) from None
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return Tokens(path, hashlib.sha256(content).hexdigest()[:16], tokenizer)
