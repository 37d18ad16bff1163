"""Keep secrets out of everything rankscope logs: params, tags, artifacts, messages.

A tracking URI such as ``https://alice:s3cret@mlflow.example`` or a config value carrying a token would
otherwise be copied verbatim into MLflow, where anyone who can read the experiment can read it.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from itertools import accumulate
from pathlib import Path
from typing import Any, TextIO

MASK = "***"

# scheme://user:password@host -> scheme://user:***@host ; scheme://token@host -> scheme://***@host
_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*\\?://)(?P<userinfo>[^/?#@\s]+)@")  # \: as Hydra escapes
# The words that make a key a secret's: whole words of it ("access_token", "API_TOKEN", "db.password"), never the
# start of a longer one ("tokenizer", "max_tokens", "system/cache_tokenised", "author": settings, not secrets)
_KEY_WORDS = (r"(?:token|secrets?|passw(?:or)?ds?|pwd|api[_-]?keys?|credentials?|signature|auth(?:orization)?)"
              r"(?![a-z0-9])")
# ?access_token=... &password=... &X-Amz-Signature=...
_QUERY = re.compile(rf"(?P<key>[?&;][^=&;#\s]*?{_KEY_WORDS}[^=&;#\s]*=)[^&;#\s]+", re.IGNORECASE)
# key=value / key: value pairs inside free text (error messages, override lists). The value ends before a closing
# bracket or a full stop that ends the text or a word ("(API_TOKEN=abc).": the ")." is the sentence's).
_PAIR = re.compile(
    r"(?P<key>\b[\w.-]*?(?:token|secrets?|passw(?:or)?ds?|pwd|api[_-]?keys?|credentials?)(?![a-z0-9])[\w.-]*"
    r"\s*(?P<sep>[=:])\s*)"
    r"(?P<value>[^\s,;&'\"\]}]+?)(?=[).]*(?:[\s,;&'\"\]}]|$))",
    re.IGNORECASE,
)
# what a key=value pair may hold that is no secret: a switch, a missing value, a mask already there
_NOT_SECRETS = frozenset({"true", "false", "yes", "no", "on", "off", "none", "null", "set", "unset", MASK})
# a word of prose after "key: " ("no API token: set the variable ..."): lower-case letters only
_PROSE_WORD = re.compile(r"[a-z]+")
# an HTTP credential after its scheme: "Bearer" is one whatever follows (6 characters or more); "token" and "basic"
# are also words of prose, so only a long run of token characters after them is taken for one, and not a run of
# lower-case words ("a basic understanding", "the token boundary-detection")
_BEARER = re.compile(r"(?P<key>\b(?:bearer\s+(?=[A-Za-z0-9._~+/=-]{6})|(?:token|basic)\s+(?=[A-Za-z0-9._~+/=-]{12})))"
                     r"(?P<value>[A-Za-z0-9._~+/=-]+)", re.IGNORECASE)
_PROSE_RUN = re.compile(r"[a-z]+(?:-[a-z]+)*")
# well-known token shapes, masked whatever key or text holds them: GitHub, GitLab; OpenAI-style (sk- and a digit among
# 8 or more characters, or a run of 20 or more letters and digits: "sk-learn" is a word, "sk-test-abc123" a key);
# Stripe (secret, restricted and publishable keys, webhook secrets); Slack; Hugging Face; AWS access key ids
# (long-lived AKIA, temporary ASIA); JSON Web Tokens (a header and a payload, base64url JSON objects: "eyJ")
_SHAPES = re.compile(
    r"\b(?:gh[pousr]_[A-Za-z0-9]{8,}|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_-]{20,}"
    r"|sk-(?:(?=[A-Za-z0-9_-]*[0-9])[A-Za-z0-9_-]{8,}|(?:[A-Za-z0-9]+-){0,3}[A-Za-z0-9_]{20,}[A-Za-z0-9_-]*)"
    r"|[rsp]k_(?:live|test)_[A-Za-z0-9]{10,}|whsec_[A-Za-z0-9]{16,}"
    r"|xox[abeprs]-[A-Za-z0-9-]{10,}|xapp-[A-Za-z0-9-]{10,}|hf_[A-Za-z0-9]{20,}"
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}"
    r"|eyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*)(?![A-Za-z0-9])"
)
# config keys whose values are secrets whatever they look like
_SECRET_KEY = re.compile(
    r"(?:^|[._-])(?:password|passwd|pwd|secret|token|api_?key|access_?key|secret_?key|private_?key|credentials?"
    r"|auth)(?:$|[._-])",
    re.IGNORECASE,
)
# An HTTP retriever's headers map each header to the NAME of the environment variable holding its value
# (retrievers.http); anything else under a headers key is taken for the value itself, and masked.
_HEADER_KEY = re.compile(r"(?:^|\.)headers\.[^.]+$")
_HEADER_PAIR = re.compile(r"(?P<key>\bheaders\.[\w-]+\s*=\s*)(?P<value>[^\s,;&'\"\]}]+)", re.IGNORECASE)
_ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")
# Literals (lower case) of which each pattern above needs one to match: text holding none is left as it is.
_NEEDED = ("://", "token", "secret", "passw", "pwd", "api", "signature", "credential", "auth", "bearer", "basic",
           "gh", "github_pat_", "glpat-", "sk-", "k_live_", "k_test_", "whsec_", "xox", "xapp-", "hf_", "akia",
           "asia", "eyj", "headers.")
# Letters IGNORECASE takes for an ASCII 'i' that case folding does not turn into one: dotless 'ı' (an equivalent
# of 'i' to the re module), and dotted 'İ', which folds to 'i' and a combining dot.
_FOLD_I = str.maketrans({"\u0131": "i", "\u0307": None})


def _fold(text: str) -> str:
    """``text`` case-folded, as the patterns' IGNORECASE reads it ('ſecret' is 'secret', 'credentİal' 'credential'):
    a text whose fold holds none of :data:`_NEEDED` is one no pattern matches."""
    folded = text.casefold()
    return folded.translate(_FOLD_I) if not folded.isascii() else folded


def _userinfo(match: re.Match[str]) -> str:
    user, colon, _ = match.group("userinfo").partition(":")
    return f"{match.group('scheme')}{user}:{MASK}@" if colon else f"{match.group('scheme')}{MASK}@"


def redact_text(text: str) -> str:
    """Mask credentials in URIs, secret-looking query parameters and ``key=value`` pairs, and known tokens.

    Text holding none of the literals every pattern needs is returned at once: most text (questions, evidence
    lines: every cell of every job's per-question table) has none, and looking for a few substrings costs a
    tenth of the five substitutions. Folded as the patterns' IGNORECASE reads it (:func:`_fold`)."""
    folded = _fold(text)
    if not any(literal in folded for literal in _NEEDED):
        return text
    return _redact_all(text)


_SEPARATOR = "\n"  # joins texts in redact_texts: in none of the literals, so no literal is found across two texts


def redact_texts(texts: Sequence[str]) -> list[str]:
    """``[redact_text(t) for t in texts]``, with :func:`redact_text`'s first test made once for all the texts.

    A job's per-question table has thousands of text cells and almost none holds one of the literals
    (:data:`_NEEDED`) every pattern needs; testing each cell for each literal was most of the time. Here the texts
    are folded one by one (:func:`_fold`), joined, and each literal is looked for with ``str.find`` over the whole:
    a literal holds no separator, so each place it is found lies inside one text, and the texts it is found in are
    exactly those redact_text would not return at once. Only those go through the substitutions.

    A text redacted before is not looked at again (:data:`REMEMBERED_TEXTS`): a sweep's jobs repeat more than nine
    in ten of their cells (the questions, most of the diagnosis)."""
    texts = list(texts)
    out: list[str | None] = [_REDACTED.get(text) for text in texts]
    unseen = [i for i, known in enumerate(out) if known is None]
    originals = [texts[i] for i in unseen]
    for i, redacted in zip(unseen, _redact_unseen(list(originals))):
        out[i] = redacted
    if len(_REDACTED) + len(unseen) > REMEMBERED_TEXTS:
        _REDACTED.clear()
    _REDACTED.update(zip(originals, (out[i] for i in unseen)))
    return out  # type: ignore[return-value]  (every place is filled)


REMEMBERED_TEXTS = 2**16  # texts whose redaction is kept (all forgotten at once beyond it)
_REDACTED: dict[str, str] = {}


def _redact_unseen(texts: list[str]) -> list[str]:
    folded = [_fold(t) for t in texts]
    starts = list(accumulate((len(f) + 1 for f in folded[:-1]), initial=0))  # where each text begins when joined
    joined = _SEPARATOR.join(folded)
    marked: set[int] = set()
    for literal in _NEEDED:
        at = joined.find(literal)
        while at >= 0:
            i = bisect_right(starts, at) - 1
            marked.add(i)
            at = joined.find(literal, starts[i + 1]) if i + 1 < len(starts) else -1  # this text is marked already
    for i in marked:
        texts[i] = _redact_all(texts[i])
    return texts


def _redact_all(text: str) -> str:
    text = _USERINFO.sub(_userinfo, text)
    text = _QUERY.sub(lambda m: m.group("key") + MASK, text)
    text = _PAIR.sub(_pair, text)
    text = _BEARER.sub(_bearer, text)
    text = _HEADER_PAIR.sub(lambda m: m.group(0) if _header_name(m.group("value")) else m.group("key") + MASK, text)
    return _SHAPES.sub(MASK, text)


def _pair(match: re.Match[str]) -> str:
    """A ``key=value`` pair with its value masked, unless the value is no secret: a switch or a missing value
    (``ENABLE_LEGACY_API_TOKEN=true``), a word of prose after ``key: `` (``API token: set the variable``), or the name
    of the environment variable that holds the secret (``token_env=LABEL_STUDIO_API_KEY``)."""
    key, value = match.group("key"), match.group("value")
    if value.casefold() in _NOT_SECRETS or (match.group("sep") == ":" and key[-1].isspace()
                                             and _PROSE_WORD.fullmatch(value)):
        return match.group(0)
    if _names_variable(key.rstrip(" \t=:"), value):
        return match.group(0)
    return key + MASK


def _bearer(match: re.Match[str]) -> str:
    key = match.group("key")
    if not key.casefold().startswith("bearer") and _PROSE_RUN.fullmatch(match.group("value")):
        return match.group(0)
    return key + MASK


def _names_variable(key: str, value: str) -> bool:
    """A key ending in ``_env`` (``label_studio.token_env``) whose value names an environment variable: the setting
    says where the secret is, it is not the secret."""
    return key.casefold().endswith("_env") and bool(_ENV_NAME.fullmatch(value))


def _header_name(value: str) -> bool:
    """A header's config value that names an environment variable (kept) rather than holding the secret."""
    return value == MASK or bool(_ENV_NAME.fullmatch(value))


def is_secret_key(key: str) -> bool:
    return bool(_SECRET_KEY.search(key))


def redact_value(key: str, value: Any) -> Any:
    """A value as it may be logged under ``key``: masked entirely for secret keys, else text-redacted."""
    if value is None or isinstance(value, bool | int | float):
        return value
    if is_secret_key(key) and str(value) != "" and not _names_variable(key, str(value)):
        return MASK
    if _HEADER_KEY.search(key) and not _header_name(str(value)):
        return MASK
    return redact_text(str(value))


def redact_tree(tree: Any, path: str = "") -> Any:
    """Redact a nested structure of dicts and lists (a resolved config) leaf by leaf."""
    if isinstance(tree, Mapping):
        return {k: redact_tree(v, f"{path}.{k}" if path else str(k)) for k, v in tree.items()}
    if isinstance(tree, list | tuple):
        return [redact_tree(v, path) for v in tree]
    return redact_value(path, tree)


def mask_yaml_file(path: Path) -> bool:
    """Rewrite a YAML file (a config, a list of overrides) with its secrets masked, atomically; True if it changed.

    A file this process found clean, or wrote clean (:func:`remember_clean`), and that is unchanged since (the same
    inode, size and modification time) is not read again: a sweep's every job checks the sweep's ``multirun.yaml``,
    and its lean job runner writes the job's ``.hydra`` files from trees it checked."""
    import yaml

    if _CLEAN_FILES.get(str(path)) == _signature(path):
        return False
    text = path.read_text(encoding="utf-8")
    tree = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # libyaml's: 10x the pure one
    masked = masked_yaml_tree(tree)
    if masked == tree:
        remember_clean(path)
        return False
    temporary = path.with_name(f"{path.name}.tmp-{os.getpid()}")
    temporary.write_text(yaml.safe_dump(masked, sort_keys=False, allow_unicode=True), encoding="utf-8")
    temporary.replace(path)
    remember_clean(path)
    return True


def masked_yaml_tree(tree: Any) -> Any:
    """What :func:`mask_yaml_file` writes of a YAML file's tree: a mapping redacted leaf by leaf under its keys, a
    list (of overrides) item by item."""
    return redact_tree(tree) if isinstance(tree, Mapping) else [redact_text(str(v)) for v in tree or []]


def remember_clean(path: Path) -> None:
    """Note that ``path``, as it is now, holds no secret (see :func:`mask_yaml_file`)."""
    signature = _signature(path)
    if signature is not None:
        _CLEAN_FILES[str(path)] = signature


def _signature(path: Path) -> tuple[int, int, int] | None:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_ino, found.st_size, found.st_mtime_ns


_CLEAN_FILES: dict[str, tuple[int, int, int]] = {}  # a file found or written clean -> its inode, size and mtime


def one_line(exc: BaseException) -> str:
    """An exception (and its direct cause) as one readable line: Hydra and OmegaConf spread theirs over several."""
    lines = [line.strip() for line in str(exc).split("Config search path:")[0].splitlines() if line.strip()]
    cause = exc.__cause__
    cause_lines = [line.strip() for line in str(cause).splitlines() if line.strip()] if cause else []
    head = [lines[0].rstrip(".")] if lines else [type(exc).__name__]
    if cause_lines and cause_lines[0] not in lines:
        head.append(cause_lines[0])
    rest = [line for line in lines[1:] if not line.startswith(("full_key:", "object_type="))]
    text = ": ".join(head)
    if rest:
        text += " (" + " ".join(line if line.endswith(":") else line + ";" for line in rest).rstrip(";") + ")"
    return redact_text(text)


def redact_log_records() -> None:
    """Mask secrets in every log record this process creates, whoever logs it (Hydra logs each job's overrides,
    URIs included; a database driver logs its connection errors). Idempotent."""
    make = logging.getLogRecordFactory()
    if getattr(make, "rankscope", False):
        return

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make(*args, **kwargs)
        message = record.getMessage()
        safe = redact_text(message)
        if safe != message:
            record.msg, record.args = safe, ()
        return record

    factory.rankscope = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(factory)


class RedactingStream:
    """A text stream that masks secrets in everything written through it (tracebacks, Hydra's messages)."""

    def __init__(self, stream: TextIO):
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(redact_text(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def redact_std_streams() -> None:
    """Route this process's stdout and stderr through :class:`RedactingStream` (once)."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, RedactingStream):
            setattr(sys, name, RedactingStream(stream))
