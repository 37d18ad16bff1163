"""A Hydra callback that tells a test what the garbage collector was doing in a sweep's driver, at its end."""

from __future__ import annotations

import gc
import json
import os
from typing import Any

from hydra.experimental.callback import Callback


class CollectorAtSweepEnd(Callback):
    """Writes ``{"enabled": ..., "frozen": ...}`` to the file named by ``RANKSCOPE_TEST_COLLECTOR`` when the sweep
    ends (in the driver, whatever the launcher)."""

    def on_multirun_end(self, config: Any, **kwargs: Any) -> None:
        with open(os.environ["RANKSCOPE_TEST_COLLECTOR"], "a", encoding="utf-8") as f:
            f.write(json.dumps({"enabled": gc.isenabled(), "frozen": gc.get_freeze_count()}) + "\n")


class CtrlCWhileIndexing:
    """A search engine (``retriever=custom retriever._target_=...``) whose ``index()`` is stopped by a real Ctrl-C
    (SIGINT to its own process) while a clean-up is pending, and whose clean-up then fails with an OmegaConf
    error: what OmegaConf does when Ctrl-C lands while it builds a config (a list left half-appended, whose flags
    it then fails to restore as the interruption unwinds). With ``stop=False`` it indexes quietly."""

    def __init__(self, stop: bool = True) -> None:
        self.stop = stop

    def index(self, doc_ids: list[str], texts: list[str]) -> None:
        import signal
        import time

        from omegaconf import OmegaConf

        self.doc_ids = list(doc_ids)
        if not self.stop:
            return
        settings = OmegaConf.create({"kept": 1})
        OmegaConf.set_struct(settings, True)
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(30)  # the interruption is raised here
        finally:
            settings.lost  # noqa: B018 - the failing clean-up: an OmegaConf error replaces the interruption

    def search(self, questions: list[str], k: int) -> list[list[tuple[str, float]]]:
        return [[(d, 1.0) for d in self.doc_ids[:k]] for _ in questions]
