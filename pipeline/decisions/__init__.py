"""Decisions about runs: is one better than another (``comparison``), has the candidate regressed (``gate``, with
its settings read and checked by ``gate_settings``), both on one slice of the questions or every one (``slices``).

The statistics are ``metrics.comparison``'s; runs are read and comparisons recorded through ``pipeline.tracking``.
May import: ``pipeline.job`` and everything below it, OmegaConf. Never MLflow, Hydra or matplotlib.
"""
