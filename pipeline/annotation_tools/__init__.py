"""Where people grade pooled pairs: Label Studio, reached through its REST API (``label_studio``, the one module
that talks to it), or a CSV/TSV sheet filled in a spreadsheet (``sheet``). Both give annotations back as one table
(``query_id``, ``doc_id``, ``assessor``, ``grade``, ``when``), every grade checked against the scale; a span pool's
highlights come back as marks (offsets, the text highlighted, the grade), checked by ``judging_maths.spans``.

May import: ``pipeline.judging_maths``, ``pipeline.common``, ``metrics``, pandas and the standard library's HTTP client.
Never MLflow, Hydra or matplotlib; no other package talks to Label Studio.
"""

ANNOTATION_COLUMNS = ["query_id", "doc_id", "assessor", "grade", "when"]
