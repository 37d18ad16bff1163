"""What every other package of ``pipeline`` shares: the names of tags and files (:mod:`~pipeline.common.names`),
secret masking (:mod:`~pipeline.common.redact`), atomic JSON files, progress bars, interruptions, how a command ends
and when the garbage collector runs (:mod:`~pipeline.common.collector`).

May import: nothing of ours (it is the bottom layer), and no MLflow, Hydra or matplotlib.
"""
