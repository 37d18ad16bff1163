"""A sweep: the driver's Hydra callback (``callback``), a short sequence of steps each in its own module: the jobs
checked (``jobs``), what is done ahead of them (``ahead``), the parent run and hand-off (``parent``), the idle time
used (``pace``), the end (``end``: ``close`` summarises through ``figures``, ``drawing``, ``report``, ``exports``,
``parent_summary`` and ``children``, then ``gating``); resuming in the same folder (``resume``), logging what
waited for the store (``sync``), tuning with a held-out split (``tuning``, ``holdout``, ``tuning_report``), and what
a stopped command says it left (``stopped``).

May import: everything below it (``pipeline.decisions``, ``pipeline.job`` and their dependencies) and Hydra. Never
MLflow or matplotlib directly.
"""
