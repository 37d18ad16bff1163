"""What people read: terminal tables (``text``), the self-contained HTML report (``html``) and the plots (``plots``
for a sweep's, drawn by matplotlib; ``run_plots`` for a run's own two and ``rank_buckets`` for a large sweep's heat
map, drawn with PIL on ``canvas``).

Drawn from plain data (a job's result, a sweep summary); nothing here logs or reads MLflow.
May import: ``pipeline.analysis``, ``pipeline.data``, ``pipeline.common``, ``metrics``, matplotlib, PIL. Never MLflow or
Hydra; and no other package of ``pipeline`` draws.
"""
