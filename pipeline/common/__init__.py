"""What every other package of ``pipeline`` shares: the names of tags and files (:mod:`~pipeline.common.names`),
secret masking (:mod:`~pipeline.common.redact`), atomic JSON files and progress bars.

May import: nothing of ours (it is the bottom layer), and no MLflow, Hydra or matplotlib.
"""
