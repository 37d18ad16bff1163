"""Where the benchmarks find this checkout and the collections they measure on, named once."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# The BEIR-layout SciFact folder: the one the scifact preset reads (RANKSCOPE_SCIFACT), else CI's shared datasets
SCIFACT = Path(os.environ.get("RANKSCOPE_SCIFACT") or REPO.parent / "shared" / "datasets" / "scifact")
