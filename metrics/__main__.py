"""``python -m metrics QRELS RUN [-m MEASURE ...] [-q] [-c] [-l LEVEL] [-J] [-M N]`` (see metrics.cli)."""

from metrics.cli import main

raise SystemExit(main())
