"""One job of a sweep (or a single run), stage by stage: check, load, index, rank, evaluate, diagnose, write,
publish (:func:`pipeline.job.run.execute_job`): the retriever at work (``engine``), the result and its scoring
(``results``), its per-question table with each question's slice (``table``), its files (``files``), its tags
(``describe``), what it records and where (``recording``). Also what a process reuses across its jobs (``reuse``)
and the hand-off between a sweep's driver and its jobs (``context``).

May import: ``pipeline.config``, ``pipeline.tracking``, ``pipeline.reports``, ``pipeline.analysis``,
``pipeline.data``, ``pipeline.common``, ``retrievers``, ``metrics``, OmegaConf. Never MLflow, Hydra or matplotlib
directly.
"""
