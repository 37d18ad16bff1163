"""What people read: terminal tables (``text``), the self-contained HTML report (``html``) and the plots, drawn with
PIL on ``canvas`` (``run_plots``: a run's own two; ``means_plot``, ``rank_buckets``, ``paired_plot``,
``response_plot``: a sweep's; ``interval_plot``: a sweep's primary metric with its intervals, for MLflow's chart
view), but for the per-question heat map of a few dozen questions, drawn by matplotlib
(``plots``, on ``png_canvas``; only they import matplotlib).

Drawn from plain data (a job's result, a sweep summary); nothing here logs or reads MLflow.
May import: ``pipeline.analysis``, ``pipeline.data``, ``pipeline.common``, ``metrics``, matplotlib, PIL. Never MLflow or
Hydra; and no other package of ``pipeline`` draws.
"""
