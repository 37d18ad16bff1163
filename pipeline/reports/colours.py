"""The colours the plots share, defined once (plain strings: the per-run plots are drawn without matplotlib)."""

# Rank buckets, best to worst, then "not retrieved": colour-blind-safe blues to oranges, grey for none.
BUCKET_COLOURS = ("#08519c", "#6baed6", "#fdae6b", "#d94801")
# Failure causes (pipeline.analysis.diagnosis.CAUSES, in order): dark to light oranges.
CAUSE_COLOURS = ("#7f2704", "#d94801", "#f16913", "#fd8d3c", "#fdae6b")
NOT_RETRIEVED_COLOUR = "#3a3a3a"
BEYOND_COLOUR = "#8c8c8c"  # a ranking full to its depth without a relevant document: one may lie deeper
