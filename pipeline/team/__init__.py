"""The team's tracking server: ``mlflow server`` on a database (``tracking_server``), with a private PostgreSQL
when asked (``postgres``); both tied to the command that starts them, by a guard process that ends them if the command
is killed, and recognised later if they are left running anyway (``processes``, ``guard``).

May import: ``pipeline.tracking``, ``pipeline.common``, the standard library (it runs MLflow and PostgreSQL as
processes). Never Hydra or matplotlib; MLflow only through ``pipeline.tracking``.
"""
