"""``conf/judge/NAME.yaml``: how pools are made and judged (depth, order, budgets, scale, merge rule, Label Studio)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from metrics.errors import InputError
from pipeline.common.redact import one_line
from pipeline.config.paths import CONF_DIR, settings_file
from pipeline.judging_maths.agreement import MAJORITY, RULES
from pipeline.judging_maths.pool import DEFAULT_DEPTH, DEFAULT_PERSISTENCE, ORDERS, RBP, TARGET
from pipeline.judging_maths.scale import DEFAULT_MEANINGS, Scale

JUDGE_DIR = CONF_DIR / "judge"
JUDGING_DIR = "judging"  # pools and their versions, under the folder the command starts in
LABEL_STUDIO = "label-studio"  # --to and --from: the assessors are in Label Studio


@dataclass
class LabelStudioSettings:
    url: str = "http://localhost:8080"
    project: str | None = None  # the project's title; default: the pool's name
    token_env: str = "LABEL_STUDIO_API_KEY"  # the environment variable holding the API token (never the token)
    timeout: float = 30.0


@dataclass
class JudgeSettings:
    depth: int = DEFAULT_DEPTH
    order: str = RBP
    persistence: float = DEFAULT_PERSISTENCE
    k: int = 10  # judged@k reported for every budget
    budgets: list[int] = field(default_factory=lambda: [100, 300, 1000])
    target: float = TARGET
    rule: str = MAJORITY
    scale: dict[int, str] = field(default_factory=lambda: dict(DEFAULT_MEANINGS))
    label_studio: LabelStudioSettings = field(default_factory=LabelStudioSettings)

    @property
    def grades(self) -> Scale:
        return Scale.of(self.scale)


def load_settings(name: str = "default", overrides: Mapping[str, Any] | None = None) -> JudgeSettings:
    """``conf/judge/NAME.yaml`` (or a YAML file's path) checked against :class:`JudgeSettings`, then ``overrides``
    (None values ignored); bad values are one InputError line."""
    path = settings_file(name, JUDGE_DIR, "judging")
    try:
        merged = OmegaConf.merge(OmegaConf.structured(JudgeSettings), OmegaConf.load(path),
                                 {k: v for k, v in (overrides or {}).items() if v is not None})
        settings: JudgeSettings = OmegaConf.to_object(merged)  # type: ignore[assignment]
    except OmegaConfBaseException as exc:
        raise InputError(f"judging settings: {one_line(exc)}", path) from None
    if settings.order not in ORDERS:
        raise InputError(f"order {settings.order!r}: expected one of {', '.join(ORDERS)}", path)
    if settings.rule not in RULES:
        raise InputError(f"rule {settings.rule!r}: expected one of {', '.join(RULES)}", path)
    if settings.depth < 1 or settings.k < 1 or any(b < 0 for b in settings.budgets):
        raise InputError("depth and k must be at least 1, budgets 0 or more", path)
    settings.grades  # noqa: B018 - checks the scale
    return settings
