"""The judging loop, step by step (``commands``): pool the rankings of runs MLflow holds (``pooling``), hand the pool
to assessors and read their grades back (``assessors``; ties pushed to a third assessor: ``adjudication``) into a
new qrels version (``pulling``), re-score the runs against it (``rescoring``, logged by ``rescored_log``), say what
changed (``changes_report``) and decide the gates again (``gates_again``); ``settings`` reads
``conf/judge/*.yaml``, ``sources`` finds runs, corpora and versions.

The maths is ``pipeline.judging_maths``'s; MLflow is reached through ``pipeline.tracking``, assessors through
``pipeline.annotation_tools``. May import: ``pipeline.decisions`` and every package below it, OmegaConf. Never MLflow,
Hydra or matplotlib directly.
"""
