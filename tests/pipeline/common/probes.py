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
