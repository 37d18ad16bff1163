"""What people read: terminal tables (``text``), the self-contained HTML report (``html``) and the plots (``plots``).

Drawn from plain data (a job's result, a sweep summary); nothing here logs or reads MLflow.
May import: ``pipeline.analysis``, ``pipeline.data``, ``pipeline.common``, ``metrics``, matplotlib. Never MLflow or
Hydra; and no other package of ``pipeline`` draws.
"""
