"""The figures a sweep's end can draw before it compares its systems, drawn by the copy that drew the jobs' plots
while this process compares them (:class:`FirstFigures`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pipeline.analysis.diagnosis import DiagnosisSettings
from pipeline.analysis.summary import SweepSummary, compare_systems
from pipeline.common.forking import one_blas_thread
from pipeline.common.names import PLOTS_DIR
from pipeline.config.build import MetricPlan
from pipeline.config.plan import diagnosis_settings
from pipeline.reports.html import Drawing
from pipeline.sweep.figures import HEATMAP_STEM, SweepFigure, uncompared_figures


class FirstFigures:
    """The figures a sweep's end can draw before it compares its systems, built and drawn by the copy that drew the
    jobs' plots (see :class:`pipeline.reports.html.Drawing`) while this process compares them: the comparisons
    (0.3 s on SciFact) and the figures (0.6 s of CPU, a fifth of it building them) no longer take turns. Handed over
    as their makers and data, they cost this process the pickling only. A failure to make them is kept, and
    reported where :func:`pipeline.sweep.report.plots_and_report` reports its own."""

    def __init__(self, summary: SweepSummary, plan: MetricPlan, diagnosis: Mapping[str, Any],
                 sweep_dir: Path) -> None:
        self.figures: list[SweepFigure] = []  # in the report's order
        self.order: list[SweepFigure] = []  # in the order the copy draws them
        self.drawing: Drawing | None = None
        self.error: Exception | None = None
        self.settings: DiagnosisSettings | None = None  # the diagnosis settings they were made with
        if not summary.finished:
            return
        try:
            self.settings = diagnosis_settings(diagnosis)
            self.figures = uncompared_figures(summary, plan, self.settings, makers=True)
            # the copy starts with the longest to draw (the heat map: a third to half of their drawing), and
            # drawn() takes from the last one back
            self.order = sorted(self.figures, key=lambda f: f.stem != HEATMAP_STEM)
            self.drawing = Drawing({f.stem: f.figure for f in self.order}, sweep_dir / PLOTS_DIR)
        except Exception as exc:
            self.error = exc

    @property
    def drawn_beside(self) -> bool:
        """Whether a copy is drawing them now."""
        return self.drawing is not None and (self.drawing.pid != 0 or self.drawing.drawer is not None)

    def compare_beside(self, summary: SweepSummary, plan: MetricPlan) -> None:
        """Compare the systems (:func:`pipeline.analysis.summary.compare_systems`) while the copy draws these, on
        one BLAS thread when it does: a second would wait for the copy's core."""
        with one_blas_thread(self.drawn_beside):
            compare_systems(summary, plan.confidence, plan.resamples, plan.seed)

    def drawn(self) -> tuple[list[Path], list[SweepFigure]]:
        """Wait for them (drawing here those the copy has not started); their files, and the figures with their
        PNGs for the report, in the report's order."""
        assert self.drawing is not None
        files = dict(zip((f.stem for f in self.order), self.drawing.finish(share=True)))  # in the order given
        paths = [files[f.stem] for f in self.figures]
        return paths, [SweepFigure(f.stem, f.heading, path.read_bytes()) for f, path in zip(self.figures, paths)]

    def stop(self) -> None:
        if self.drawing is not None:
            self.drawing.stop()
