"""``python -m pipeline``: Hydra composes ``conf/``, then each job runs through :mod:`pipeline.job.runner`.

The task function lives here (an importable module, not ``__main__``) so joblib workers unpickle it by
reference and re-run this module's registrations (schemas, the ``rankscope.stamp`` resolver).
"""

from __future__ import annotations

import os
import re
import secrets
import sys
from datetime import datetime
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.errors import HydraException
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from pipeline.common import collector, interrupts, progress
from pipeline.common.names import MULTIRUN_CONFIG, PROG, TAG_KIND
from pipeline.common.redact import mask_yaml_file, one_line, redact_log_records, redact_std_streams, redact_text
from pipeline.config import schema
from pipeline.config.overrides import readable, unreadable
from pipeline.config.paths import CONF_DIR
from pipeline.job.context import JobContext, config_tags
from pipeline.job.recording import JobFailed
from pipeline.job.run import execute_job
from pipeline.sweep.stopped import interrupted
from pipeline.sweep.tuning import is_tuning, objective, trial_line

TUNE_HINT = "pip install 'rankscope[tune]'"


def stamp() -> str:
    """``YYYY-MM-DD/HH-MM-SS-xxxxxx``: output folders of two commands started in the same second never collide.

    Registered with ``use_cache``: resolved once in the driver, the value travels with the config to joblib
    workers (Hydra copies the resolver cache into each job's config).
    """
    return f"{datetime.now():%Y-%m-%d/%H-%M-%S}-{secrets.token_hex(3)}"


schema.register()
redact_log_records()
if not OmegaConf.has_resolver("rankscope.stamp"):
    OmegaConf.register_new_resolver("rankscope.stamp", stamp, use_cache=True)


def unescape(override: str) -> str:
    """A job's override as the user typed it: Hydra escapes ``:``, ``=``, ``,`` ... with a backslash."""
    return re.sub(r"\\(.)", r"\1", override)


def mask_hydra_files(hydra_dir: Path, multirun_file: Path | None) -> None:
    """Hydra writes the job's config, its own config and the overrides (``.hydra/*.yaml``) and the sweep's
    ``multirun.yaml`` before any rankscope code runs; secrets given on the command line (``+tags.api_key=...``, a
    password in ``tracking.uri``) are masked in them here, first thing, as everywhere else rankscope writes."""
    for path in [*sorted(hydra_dir.glob("*.yaml")), *([multirun_file] if multirun_file else [])]:
        if path.is_file():
            mask_yaml_file(path)


def task(cfg: DictConfig) -> str | float | None:
    """One Hydra job. A single run that fails on bad input exits with status 1 after its one-line reason.

    Returns the MLflow run id; in a tuning sweep, the objective the optimiser maximises (pipeline/tuning.py).
    """
    redact_std_streams()  # in a joblib worker, this is the first rankscope code to run
    collector.resume()  # the start-up's objects, frozen: the job's own are collected as usual
    hydra_cfg = HydraConfig.get()
    multirun = hydra_cfg.mode == RunMode.MULTIRUN
    launch_dir = Path(hydra_cfg.runtime.cwd)
    mask_hydra_files(Path(hydra_cfg.runtime.output_dir) / str(hydra_cfg.output_subdir or ".hydra"),
                     (launch_dir / hydra_cfg.sweep.dir).resolve() / MULTIRUN_CONFIG if multirun else None)
    ctx = JobContext(
        launch_dir=launch_dir,
        output_dir=Path(hydra_cfg.runtime.output_dir),
        sweep_dir=(launch_dir / hydra_cfg.sweep.dir).resolve() if multirun else None,
        job_num=int(hydra_cfg.job.num) if multirun else 0,
        overrides=[unescape(o) for o in hydra_cfg.overrides.task],
        choices={str(k): str(v) for k, v in hydra_cfg.runtime.choices.items() if v is not None},
        log_file=Path(hydra_cfg.runtime.output_dir) / f"{hydra_cfg.job.name}.log",
    )
    progress.configure(bool(cfg.get("quiet", False)), ctx.choices.get("hydra/launcher", "basic"))
    if not multirun:
        interrupts.watch(output_dir=ctx.output_dir)
    tuning = multirun and is_tuning(hydra_cfg)
    try:
        outcome = execute_job(cfg, ctx, tags={TAG_KIND: "trial"} if tuning else None, report=not tuning)
    except JobFailed:
        sys.exit(1)
    if tuning:
        print(trial_line(outcome, ctx.job_num), flush=True)
        return objective(outcome)
    if not multirun and cfg.get("gate") is not None and outcome.run_id is not None:  # a sweep gates at its end
        from pipeline.decisions.gate import gate_single_run

        status = gate_single_run(cfg.tracking.uri, launch_dir, outcome.run_id, cfg.gate, config_tags(cfg))
        if status:
            sys.exit(status)
    return outcome.run_id


_hydra_main = hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")(task)


def main() -> None:
    """Hydra's entry point, with its configuration errors condensed to one line and no stack trace.

    HYDRA_FULL_ERROR=1 (set by the user) still shows Hydra's full report. Whatever is printed, by rankscope,
    Hydra, MLflow or a traceback, passes through the secret redaction first.
    """
    redact_std_streams()
    interrupts.install()  # cron, systemd, CI: SIGTERM stops the command as Ctrl-C does, then exit 143
    sys.argv[1:] = readable(sys.argv[1:])  # retriever.url=http://HOST/search?ms=20 works unquoted
    if os.environ.get("HYDRA_FULL_ERROR"):
        _hydra_main()
        return
    os.environ["HYDRA_FULL_ERROR"] = "1"  # let Hydra raise, so the error can be told in one line here
    try:
        _hydra_main()
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM
        interrupted(exc)
    except Exception as exc:
        stop = interrupts.behind(exc)  # an error raised while a Ctrl-C unwound is that Ctrl-C
        if stop is not None:
            interrupted(stop)
        _report(exc)
    finally:
        os.environ.pop("HYDRA_FULL_ERROR", None)


def _report(exc: Exception) -> None:
    """A config error, or a tuning sweep none of whose trials finished: one line and status 1. Anything else is a
    bug and goes on with its traceback."""
    if isinstance(exc, (HydraException, OmegaConfBaseException)):
        reason = one_line(exc)
        if named := unreadable(exc):  # Hydra's parse error names no override: "mismatched input '='"
            reason = redact_text(f"{named}: {reason}")
        if "Could not find 'hydra/sweeper/optuna'" in reason:
            reason += f": tuning sweeps need the optional package hydra-optuna-sweeper: {TUNE_HINT}"
        print(f"{PROG}: config: {reason}", file=sys.stderr, flush=True)
        sys.exit(1)
    if isinstance(exc, ValueError) and "No trials are completed" in str(exc):  # optuna, every trial failed
        print(f"{PROG}: every trial of the tuning sweep failed (reasons above): nothing to evaluate", file=sys.stderr,
              flush=True)
        sys.exit(1)
    raise exc
