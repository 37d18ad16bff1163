"""Command-line overrides as Hydra's grammar reads them, before Hydra does.

A value the grammar refuses unquoted, but reads quoted, is quoted for it: a URL with a query string
(``retriever.url=http://HOST/search?ms=20``: Hydra takes its second ``=`` for a syntax error, "mismatched input '='
expecting <EOF>", naming no override) works as typed. In a sweep each comma-separated value is quoted on its own, so
``-m retriever.url=http://a/s?x=1,http://b/s?x=2`` still sweeps two URLs. An override that cannot be read even quoted
is left as it is, for Hydra to refuse: :func:`unreadable` names it in the one line the command prints.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

KEY = re.compile(r"[+~]{0,2}[\w.@/-]+")  # a key as the grammar spells one: optional +, ++ or ~; dotted; @package
OPENERS = ("'", '"', "[", "{")  # a value that starts so is quoted or structured already: never touched


@lru_cache(maxsize=1)
def _parser() -> Any:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create()


def _reads(override: str) -> bool:
    from hydra.errors import OverrideParseException

    try:
        _parser().parse_overrides([override])
    except OverrideParseException:
        return False
    return True


def _quote(value: str) -> str:
    """``value`` as one quoted string of the grammar (as it is when it holds both kinds of quote)."""
    if "'" not in value:
        return f"'{value}'"
    return f'"{value}"' if '"' not in value else value


def readable(args: Sequence[str]) -> list[str]:
    """The command line with each override the grammar refuses, and reads once its values are quoted, quoted."""
    return [_readable(arg) if "=" in arg and not arg.startswith("-") else arg for arg in args]


def _readable(override: str) -> str:
    key, _, value = override.partition("=")
    if not KEY.fullmatch(key) or value.startswith(OPENERS) or _reads(override):
        return override
    quoted = f"{key}=" + ",".join(part if _reads(f"{key}={part}") else _quote(part) for part in value.split(","))
    return quoted if _reads(quoted) else override


def unreadable(exc: BaseException) -> str | None:
    """The override a Hydra parse error is about, and how to write it, as the start of the error's line; None when
    the error is not about one override."""
    override = getattr(exc, "override", None)
    if not override:
        return None
    key, _, value = str(override).partition("=")
    return f"cannot read the override {override!r} (quote its value if it holds one of = , ; # and the like: " \
           f"{key}='{value}')"
