"""The maths of judging where there are no judgments: which unjudged (question, document) pairs to judge first
(``pool``), how far a budget of judgments gets each system (``pool.Pool.judged_curve``), the grade scale
(``scale``), how much assessors agree and how their grades merge (``agreement``), their highlights checked against
the documents (``spans``), agreed on and merged character by character (``span_agreement``), the next qrels or span
judgment version (``versions``) and what re-scoring changed (``changes``).

Pure: plain data in, plain data out. May import: ``metrics``, ``pipeline.common``, numpy, pandas, scipy. Never
MLflow, Hydra, OmegaConf, matplotlib or Label Studio (an import contract checks it), so it can be used and tested
on its own; ``pipeline.judge_steps`` runs the loop around it.
"""
