"""The colours the plots share, defined once (plain strings: the per-run plots are drawn without matplotlib)."""

# Rank buckets, best to worst, then "not retrieved": colour-blind-safe blues to oranges, grey for none.
BUCKET_COLOURS = ("#08519c", "#6baed6", "#fdae6b", "#d94801")
# Failure causes (pipeline.analysis.diagnosis.CAUSES, in order, after "returned nothing"): dark to light oranges.
CAUSE_COLOURS = ("#7f2704", "#d94801", "#f16913", "#fd8d3c", "#fdae6b")
NOT_RETRIEVED_COLOUR = "#3a3a3a"
BEYOND_COLOUR = "#8c8c8c"  # a ranking full to its depth without a relevant document: one may lie deeper
# Sequential scales (ColorBrewer's nine classes, as matplotlib's "Blues" and "Greys" interpolate them): the share of
# questions in a rank bucket, grey for the buckets without a relevant document in the ranking.
BLUES = ("#f7fbff", "#deebf7", "#c6dbef", "#9ecae1", "#6baed6", "#4292c6", "#2171b5", "#08519c", "#08306b")
GREYS = ("#ffffff", "#f0f0f0", "#d9d9d9", "#bdbdbd", "#969696", "#737373", "#525252", "#252525", "#000000")
HATCH_COLOUR = "#9a9a9a"  # the lines across those grey buckets
# matplotlib's "tab10" and "tab20" qualitative palettes: one colour per line of a grid's response
TAB10 = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
TAB20 = ("#1f77b4", "#aec7e8", "#ff7f0e", "#ffbb78", "#2ca02c", "#98df8a", "#d62728", "#ff9896", "#9467bd", "#c5b0d5",
         "#8c564b", "#c49c94", "#e377c2", "#f7b6d2", "#7f7f7f", "#c7c7c7", "#bcbd22", "#dbdb8d", "#17becf", "#9edae5")
GRID_COLOUR = (231, 231, 231)  # matplotlib's grid lines (#b0b0b0) at alpha 0.3 on white


def palette(n: int) -> list[str]:
    """``n`` line colours: tab10's, or tab20's beyond ten (repeating beyond twenty)."""
    colours = TAB10 if n <= 10 else TAB20
    return [colours[i % len(colours)] for i in range(n)]
