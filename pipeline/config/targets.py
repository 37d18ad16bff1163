"""Config entries that name what they build: ``_target_: retrievers.BM25`` plus the constructor's arguments.

One place turns an entry into an object, for every retriever (built-in or the user's own) and every corpus:

- :func:`checked` validates an entry against the class it names, before any work: unknown keys, missing values
  and values of the wrong type are one-line :class:`InputError` s naming the key. The types and defaults are the
  class's own (a dataclass's fields, or its constructor's signature), so there is no second schema to keep in step;
  the result carries every setting, defaults included (they become the run's params and its config digest).
- :func:`build` makes the object. Nested entries (a fusion's ``components``, a two-stage retriever's ``first``)
  are built first, through the same path; arguments listed in the class's ``context_fields`` come from the job's
  :class:`retrievers.base.BuildContext`; a class with a ``from_config`` classmethod is built by it.

``name`` is the display name of a run: passed on when the class takes one, kept by rankscope otherwise.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import typing
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from metrics.errors import InputError
from pipeline.common.redact import one_line

TARGET = "_target_"
NAME = "name"
_SIMPLE = (bool, int, float, str)


def is_entry(value: Any) -> bool:
    """A mapping that names what it builds."""
    return isinstance(value, DictConfig | Mapping) and TARGET in value


def target_class(node: Any, where: str) -> type:
    """The class (or factory) an entry's ``_target_`` names, imported; an InputError when it cannot be."""
    path = str(node[TARGET])
    if path in ("???", "None", ""):
        raise InputError(f"{where}._target_ is not set: give MODULE.CLASS (e.g. {where}._target_=mypackage.MySearch)")
    module, _, attribute = path.rpartition(".")
    if not module:
        raise InputError(f"{where}._target_={path!r}: expected MODULE.CLASS")
    try:
        found = getattr(importlib.import_module(module), attribute)
    except ImportError as exc:
        raise InputError(f"{where}._target_={path!r}: cannot import {module!r} ({exc}); is it on PYTHONPATH, or "
                         f"installed?") from None
    except AttributeError:
        raise InputError(f"{where}._target_={path!r}: module {module!r} has no {attribute!r}") from None
    if not callable(found):
        raise InputError(f"{where}._target_={path!r} is not a class or function")
    return found


def context_fields(cls: Any) -> tuple[str, ...]:
    return tuple(getattr(cls, "context_fields", ()) or ())


REQUIRED = object()  # a parameter without a default


@dataclasses.dataclass(frozen=True)
class Parameter:
    name: str
    annotation: Any = Any
    default: Any = REQUIRED


@lru_cache(maxsize=256)
def parameters(cls: Any) -> tuple[tuple[Parameter, ...], bool]:
    """What an entry may set: the constructor's parameters minus ``context_fields``; and whether it takes
    ``**kwargs`` (then any key is accepted)."""
    skip = set(context_fields(cls))
    try:  # a dataclass declares its fields on the class; any other class in its constructor's signature
        hints = typing.get_type_hints(cls if dataclasses.is_dataclass(cls) or not isinstance(cls, type)
                                      else cls.__init__)
    except Exception:  # a user's class whose annotations do not resolve: accept any type
        hints = {}
    if dataclasses.is_dataclass(cls):
        found = []
        for f in dataclasses.fields(cls):
            if not f.init or f.name in skip or f.name.startswith("_"):
                continue
            default = f.default if f.default is not dataclasses.MISSING else (
                f.default_factory() if f.default_factory is not dataclasses.MISSING else REQUIRED)
            found.append(Parameter(f.name, hints.get(f.name, Any), default))
        return tuple(found), False
    try:
        signature = inspect.signature(cls)
    except (TypeError, ValueError):  # a builtin without a signature: whatever it is, it gets the keys as given
        return (), True
    found, anything = [], False
    for p in signature.parameters.values():
        if p.kind is p.VAR_KEYWORD:
            anything = True
        elif p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name not in skip:
            default = REQUIRED if p.default is p.empty else p.default
            found.append(Parameter(p.name, hints.get(p.name, Any), default))
    return tuple(found), anything


def _config_type(annotation: Any) -> Any:
    """The annotation when OmegaConf can check it (plain types, their Optional, lists of them), else Any."""
    if annotation in _SIMPLE:
        return annotation
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1 and len(args) == 2 and _config_type(rest[0]) is not Any:
            return typing.Optional[_config_type(rest[0])]  # noqa: UP045 (OmegaConf reads typing.Optional)
    sequence = origin in (list, tuple) or getattr(origin, "__name__", "") == "Sequence"
    if sequence and len(args) >= 1 and args[0] in _SIMPLE:
        return list[args[0]]
    return Any


def _config_default(value: Any) -> Any:
    if value is REQUIRED:
        return "???"
    if isinstance(value, tuple):
        return list(value)
    return value if value is None or isinstance(value, (*_SIMPLE, list, dict)) else None


def _field(default: Any) -> Any:
    value = _config_default(default)
    if isinstance(value, list | dict):
        return dataclasses.field(default_factory=lambda: type(value)(value))
    return dataclasses.field(default=value)


def _plain(node: Any) -> Any:
    return OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else dict(node)


def checked(node: Any, where: str) -> DictConfig:
    """The entry with every setting its class takes, typed and defaulted as the class declares; nested entries
    checked the same way. Unknown keys, wrong types and missing values raise :class:`InputError`.

    An entry checked before in this process (the same class, place and values: a sweep's every job has the same
    corpus entry) is completed from what that check gave, without building its schema again."""
    cls = target_class(node, where)
    given = _plain(node)
    key = (cls, where, json.dumps(given, sort_keys=True, default=lambda o: f"{type(o).__qualname__}:{o!r}"))
    done = _CHECKED.get(key)
    if done is None:
        done = _CHECKED[key] = OmegaConf.to_container(_checked(cls, given, where))
        while len(_CHECKED) > CHECKED_ENTRIES:
            _CHECKED.pop(next(iter(_CHECKED)))
    return OmegaConf.create(done)


CHECKED_ENTRIES = 1024  # entries whose completion is kept (the oldest forgotten first)
_CHECKED: dict[tuple[type, str, str], dict[str, Any]] = {}


def _checked(cls: type, given: dict[str, Any], where: str) -> DictConfig:
    params, anything = parameters(cls)
    known = {p.name for p in params}
    unknown = [k for k in given if k not in known and k not in (TARGET, NAME)]
    if unknown and not anything:
        takes = ", ".join(sorted(known | {NAME})) or "nothing"
        raise InputError(f"unknown key(s) {', '.join(f'{where}.{k}' for k in unknown)}: {cls.__name__} takes {takes}")
    nested = {k: v for k, v in given.items() if k != TARGET and (is_entry(v) or _entries(v))}
    fields = [(p.name, Any if p.name in nested else _config_type(p.annotation), _field(p.default)) for p in params]
    if NAME not in known:
        fields.append((NAME, typing.Optional[str], dataclasses.field(default=None)))  # noqa: UP045
    schema = dataclasses.make_dataclass(cls.__name__, fields)
    plain = {k: v for k, v in given.items() if k != TARGET and k not in nested and (k in known or k == NAME)}
    try:
        typed = OmegaConf.merge(OmegaConf.structured(schema), plain)
    except OmegaConfBaseException as exc:
        key = getattr(exc, "full_key", None)
        raise InputError(f"{where}.{key}: {one_line(exc)}" if key else f"{where}: {one_line(exc)}") from None
    missing = [f"{where}.{k}" for k in OmegaConf.missing_keys(typed) if k not in nested]
    if missing:
        raise InputError(f"missing required value(s): {', '.join(missing)}")
    result = {TARGET: given[TARGET], **OmegaConf.to_container(typed)}
    for key, value in nested.items():
        result[key] = (_plain(checked(value, f"{where}.{key}")) if is_entry(value)
                       else {k: _plain(checked(v, f"{where}.{key}.{k}")) for k, v in value.items()})
    for key in given:  # keys a **kwargs constructor accepts without declaring them
        if key not in result:
            result[key] = given[key]
    return OmegaConf.create(result)


def _entries(value: Any) -> bool:
    """A mapping of entries (a fusion's ``components``): built into a list, in the mapping's order."""
    return isinstance(value, DictConfig | Mapping) and len(value) > 0 and all(is_entry(v) for v in value.values())


Finish = Callable[[Any, str | None, Any, str], Any]


def build(node: Any, context: Any, where: str, finish: Finish | None = None) -> Any:
    """The object an entry describes; nested entries first, each passed through ``finish(obj, name, node, where)``.

    A ``ValueError`` the class raises for a bad value (k1 < 0, alpha > 1 ...) becomes an :class:`InputError`
    naming the entry; so does a constructor that refuses the arguments (a user's class). An InputError the class
    raises itself (a missing file, a missing optional package) is passed on as it is.
    """
    cls = target_class(node, where)
    params, anything = parameters(cls)
    takes_name = any(p.name == NAME for p in params) or anything
    kwargs: dict[str, Any] = {}
    for key, value in (node.items() if isinstance(node, DictConfig | Mapping) else ()):
        if key == TARGET:
            continue
        if is_entry(value):
            kwargs[str(key)] = build(value, context, f"{where}.{key}", finish)
        elif _entries(value):
            kwargs[str(key)] = [build(v, context, f"{where}.{key}.{k}", finish) for k, v in value.items()]
        else:
            kwargs[str(key)] = OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value
    name = kwargs.get(NAME) if takes_name else kwargs.pop(NAME, None)
    make = getattr(cls, "from_config", None)
    try:
        if callable(make):
            built = make(context, **kwargs)
        else:
            built = cls(**kwargs, **{key: getattr(context, key) for key in context_fields(cls)})
    except InputError:  # already says what and where (a missing file, a missing extra)
        raise
    except (ValueError, TypeError) as exc:
        raise InputError(f"{where}: {exc}") from None
    return finish(built, name, node, where) if finish is not None else built
