"""The team's tracking server: ``mlflow server`` on a database (``tracking_server``), with a private PostgreSQL
when asked (``postgres``).

May import: ``pipeline.tracking``, ``pipeline.common``, the standard library (it runs MLflow and PostgreSQL as
processes). Never Hydra or matplotlib; MLflow only through ``pipeline.tracking``.
"""
