"""A regression gate's settings: ``conf/gate/<name>.yaml`` (or a YAML file) typed by
``pipeline.config.schema.GateConfig``, and the values checked before anything is compared."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from metrics.errors import InputError
from metrics.spec import parse_metrics
from pipeline.common.redact import one_line
from pipeline.config.paths import CONF_DIR, settings_file
from pipeline.config.schema import GateConfig

GATE_DIR = CONF_DIR / "gate"


def load_settings(name: str = "default", overrides: Mapping[str, Any] | None = None) -> DictConfig:
    """``conf/gate/NAME.yaml`` (or a path to a YAML file) checked against GateConfig, then ``overrides``."""
    path = settings_file(name, GATE_DIR, "gate")
    try:
        settings = OmegaConf.merge(OmegaConf.structured(GateConfig), OmegaConf.load(path),
                                   {k: v for k, v in (overrides or {}).items() if v is not None})
    except OmegaConfBaseException as exc:
        raise InputError(f"gate settings: {one_line(exc)}", path) from None
    return settings


def check_settings(settings: Any) -> list[str]:
    """The gated metrics' names; bad values raise InputError."""
    if float(settings.tolerance) < 0:
        raise InputError(f"gate.tolerance is the largest acceptable drop: it must be >= 0, got {settings.tolerance}")
    if not 0 < float(settings.confidence) < 1:
        raise InputError(f"gate.confidence must be within (0, 1), got {settings.confidence}")
    slack = settings.get("slice_tolerance")
    if slack is not None and float(slack) < 0:
        raise InputError(f"gate.slice_tolerance is the largest acceptable drop of a slice: it must be >= 0 (or null: "
                         f"slices not gated), got {slack}")
    if int(settings.resamples) < 1 or int(settings.permutations) < 1:
        raise InputError("gate.resamples and gate.permutations must be at least 1")
    names = [spec.name for spec in parse_metrics([str(m) for m in settings.metrics])]
    if not names:
        raise InputError("gate.metrics is empty: name at least one metric, e.g. [ndcg@10]")
    return names
