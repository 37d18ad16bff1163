"""The judging loop, step by step: pool the rankings of runs MLflow holds (``pooling``), push the pool to assessors
and read their grades back into a new qrels version (``pulling``), re-score the runs against it and say what changed
(``rescoring``); ``settings`` reads ``conf/judge/*.yaml``, ``sources`` finds runs, corpora and versions.

The maths is ``pipeline.judgments``'s; MLflow is reached through ``pipeline.tracking``, assessors through
``pipeline.annotation``. May import: ``pipeline.decisions`` and every package below it, OmegaConf. Never MLflow,
Hydra or matplotlib directly.
"""
