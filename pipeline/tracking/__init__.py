"""MLflow, and only here: the store (opened, and created once), runs (``Tracker``), a job's record logged exactly
once (``records``), run selectors, results read back (``readback``), comparisons and the baseline tag.

``client`` is the one module that imports MLflow's client; everything written passes through
``pipeline.common.redact``. May import: ``pipeline.analysis``, ``pipeline.data``, ``pipeline.common``, ``metrics``,
MLflow, pandas. Never Hydra or matplotlib; no other package of ``pipeline`` imports MLflow.
"""
