"""From a composed Hydra config to a checked :class:`~pipeline.config.plan.JobPlan` and the objects it names.

``schema`` types the config; ``targets`` builds any entry that names its class (``_target_``: retrievers, corpora,
the user's own search class); ``build`` and ``plan`` check a job's config once and build what it describes;
``hydra_internals`` is the one module that reaches into Hydra's internals.

May import: ``pipeline.analysis``, ``pipeline.data``, ``pipeline.common``, ``retrievers``, ``metrics``, Hydra and
OmegaConf. Never MLflow or matplotlib.
"""
