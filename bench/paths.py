"""Where the benchmarks find this checkout and the collections they measure on, named once."""

from __future__ import annotations

import os
from pathlib import Path

from pipeline.common.names import LOCAL_COPY_ENV

REPO = Path(__file__).resolve().parents[1]
# The BEIR-layout SciFact folder: the one the scifact preset and the tests read (RANKSCOPE_SCIFACT), else CI's
# shared datasets
SCIFACT_ENV = LOCAL_COPY_ENV["scifact"]
SCIFACT = Path(os.environ.get(SCIFACT_ENV) or REPO.parent / "shared" / "datasets" / "scifact")
