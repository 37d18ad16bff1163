"""``conf/judge/NAME.yaml``: how pools are made and judged (depth, order, budgets, scale, merge rule and ties, the
agreement a version needs, Label Studio). A value given by a flag is checked here too, and a bad one named by its flag,
not by the file."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from metrics.errors import InputError
from pipeline.common.redact import one_line
from pipeline.config.paths import CONF_DIR, settings_file
from pipeline.judging_maths.agreement import KAPPA, LOWER, MAJORITY, MEASURES, RULES, TIES
from pipeline.judging_maths.pool import DEFAULT_DEPTH, DEFAULT_PERSISTENCE, ORDERS, RBP, TARGET
from pipeline.judging_maths.scale import DEFAULT_MEANINGS, Scale

JUDGE_DIR = CONF_DIR / "judge"
JUDGING_DIR = "judging"  # pools and their versions, under the folder the command starts in
LABEL_STUDIO = "label-studio"  # --to and --from: the assessors are in Label Studio


@dataclass
class LabelStudioSettings:
    url: str = "http://localhost:8080"
    project: str | None = None  # the project's title; default: the pool's name
    adjudication_project: str | None = None  # the adjudication round's project; default: "<project> adjudication"
    token_env: str = "LABEL_STUDIO_API_KEY"  # the environment variable holding the API token (never the token)
    timeout: float = 30.0


@dataclass
class AgreementSettings:
    measure: str = KAPPA  # kappa, weighted_kappa or alpha (judging_maths.agreement.MEASURES)
    minimum: float = 0.4  # pull refuses a version whose assessors agree less (--force takes it anyway)


@dataclass
class JudgeSettings:
    depth: int = DEFAULT_DEPTH
    order: str = RBP
    persistence: float = DEFAULT_PERSISTENCE
    k: int = 10  # judged@k reported for every budget
    budgets: list[int] = field(default_factory=lambda: [100, 300, 1000])
    budget: int | None = None  # judge at most this many pairs: the first in the order are saved and pushed
    target: float = TARGET
    rule: str = MAJORITY
    ties: str = LOWER  # a pair the rule leaves tied: lower, higher or adjudicated (only a third assessor settles it)
    agreement: AgreementSettings = field(default_factory=AgreementSettings)
    scale: dict[int, str] = field(default_factory=lambda: dict(DEFAULT_MEANINGS))
    label_studio: LabelStudioSettings = field(default_factory=LabelStudioSettings)

    @property
    def grades(self) -> Scale:
        return Scale.of(self.scale)


# the flag that sets each checked value, to name it when the value is bad
FLAGS = {"depth": "--depth", "order": "--order", "rule": "--rule", "ties": "--ties", "budget": "--budget",
         "agreement.minimum": "--min-agreement"}


def load_settings(name: str = "default", overrides: Mapping[str, Any] | None = None) -> JudgeSettings:
    """``conf/judge/NAME.yaml`` (or a YAML file's path) checked against :class:`JudgeSettings`, then ``overrides``
    (the flags' values, by dotted key; None values ignored); a bad value is one InputError line naming its flag when
    a flag gave it, else the file."""
    path = settings_file(name, JUDGE_DIR, "judging")
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    _check(given, given, path)  # a flag's bad value: named by its flag
    try:
        merged = OmegaConf.merge(OmegaConf.structured(JudgeSettings), OmegaConf.load(path),
                                 _nested(given))
        settings: JudgeSettings = OmegaConf.to_object(merged)  # type: ignore[assignment]
    except OmegaConfBaseException as exc:
        raise InputError(f"judging settings: {one_line(exc)}", path) from None
    values = {"depth": settings.depth, "order": settings.order, "rule": settings.rule, "ties": settings.ties,
              "budget": settings.budget, "agreement.minimum": settings.agreement.minimum}
    _check(values, {}, path)
    if settings.k < 1 or any(b < 0 for b in settings.budgets):
        raise InputError("k must be at least 1, budgets 0 or more", path)
    if settings.agreement.measure not in MEASURES:
        raise InputError(f"agreement.measure {settings.agreement.measure!r}: expected one of {', '.join(MEASURES)}",
                         path)
    settings.grades  # noqa: B018 - checks the scale
    return settings


def _nested(dotted: Mapping[str, Any]) -> dict[str, Any]:
    """``{"a.b": 1}`` as ``{"a": {"b": 1}}``."""
    tree: dict[str, Any] = {}
    for key, value in dotted.items():
        *parents, last = key.split(".")
        node = tree
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return tree


def _check(values: Mapping[str, Any], flagged: Mapping[str, Any], path: Any) -> None:
    """One InputError for the first bad value: named by its flag when ``flagged`` holds it, else by the file."""
    problems = {
        "depth": lambda v: None if int(v) >= 1 else "must be at least 1",
        "order": lambda v: None if v in ORDERS else f"expected one of {', '.join(ORDERS)}",
        "rule": lambda v: None if v in RULES else f"expected one of {', '.join(RULES)}",
        "ties": lambda v: None if v in TIES else f"expected one of {', '.join(TIES)}",
        "budget": lambda v: None if v is None or int(v) >= 1 else "a budget is a number of judgments: 1 or more",
        "agreement.minimum": lambda v: None if -1 <= float(v) <= 1 else "a kappa or an alpha lies within [-1, 1]",
    }
    for key, value in values.items():
        said = problems[key](value) if key in problems else None
        if said is None:
            continue
        if key in flagged:
            raise InputError(f"{FLAGS[key]} {value}: {said}")
        shown = repr(value) if isinstance(value, str) else value
        raise InputError(f"{key} {shown}: {said}", path)
