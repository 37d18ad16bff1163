"""Pure analysis over plain data: why questions fail (``diagnosis``), every system of a sweep side by side
(``summary``), which slice each question is in (``slicing``) and every figure by slice (``slices``).

May import: ``pipeline.data``, ``pipeline.common``, ``retrievers``, ``metrics``, numpy, pandas, scipy. Never MLflow,
Hydra, OmegaConf or matplotlib (an import contract checks it), so it can be used and tested on its own.
"""
