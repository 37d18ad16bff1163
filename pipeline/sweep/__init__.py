"""A sweep: the driver's Hydra callback (``callback``: parent run, hand-off, checks before any job), its end
(``close``: summary, report, gate), resuming in the same folder (``resume``), logging what waited for the store
(``sync``) and tuning with a held-out split (``tuning``).

May import: everything below it (``pipeline.decisions``, ``pipeline.job`` and their dependencies) and Hydra. Never
MLflow or matplotlib directly.
"""
