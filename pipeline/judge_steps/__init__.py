"""The judging loop, step by step (``commands``: pool, rescore; ``grading``: pull, adjudicate): pool the rankings of
runs MLflow holds (``pooling``; a span pool for runs that ranked chunks), hand it to assessors and read their work back
(``assessors``; a span pool's highlights checked against the documents: ``span_marks``; ties to a third assessor:
``adjudication``) into a new version (``pulling``; the pool as saved: ``saved``), re-score the runs against it
(``rescoring``; from their chunks.tsv: ``chunk_scoring``; logged by ``rescored_log``), say what changed
(``changes_report``), decide the gates again (``gates_again``); ``settings`` reads ``conf/judge/*.yaml``, ``sources``
finds runs, corpora and versions.

The maths is ``pipeline.judging_maths``'s; MLflow is reached through ``pipeline.tracking``, assessors through
``pipeline.annotation_tools``. May import: ``pipeline.decisions`` and every package below it, OmegaConf. Never MLflow,
Hydra or matplotlib directly.
"""
