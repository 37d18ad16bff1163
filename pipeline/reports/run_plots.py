"""The two plots every run makes, drawn straight onto a PIL image: its metric's histogram and its failure classes.

A sweep makes them for every job, on the copy that draws beside the driver. matplotlib took 45-55 ms a plot there
(artists, transforms, ticks, text layout: the per-run plots were a fifth of a later job's CPU); these are a bar
chart and a histogram on fixed axes, drawn here in a few milliseconds with the same sizes, colours, titles, axis
labels and tick choices (:func:`nice_ticks` picks them as matplotlib's ``MaxNLocator`` does). Text is DejaVu Sans,
matplotlib's own font, read from its data folder without importing matplotlib.

Every text is placed whole inside the image: a title too wide for it is set smaller, then shortened in the middle
with an ellipsis. :class:`Canvas` keeps each text's box (the tests check them).
"""

from __future__ import annotations

import functools
import importlib.util
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from pipeline.analysis.diagnosis import CAUSES, CLASSES, LABELS
from pipeline.reports.colours import BUCKET_COLOURS, CAUSE_COLOURS

if TYPE_CHECKING:
    from PIL.ImageFont import FreeTypeFont as Font

BAR_COLOUR = BUCKET_COLOURS[1]
MEAN_COLOUR = BUCKET_COLOURS[3]
# The causes (one per failing question) in oranges, then late rank and duplicates (which may accompany a cause) in blues
FAILURE_COLOURS = (*CAUSE_COLOURS[: len(CAUSES)], *BUCKET_COLOURS[: len(CLASSES) - len(CAUSES)][::-1])
INK, FRAME, WHITE = (0, 0, 0), (0, 0, 0), (255, 255, 255)
# Sizes in points (1/72 inch), as matplotlib's defaults have them: text 10, "small" 8.33; ticks 3.5 long with 3.5 of
# padding; a title 6 above its axes, an axis label 4 beyond its tick labels.
TEXT_PT, SMALL_PT, TICK_PT, PAD_PT, TITLE_PAD_PT, LABEL_PAD_PT = 10.0, 8.33, 3.5, 3.5, 6.0, 4.0
MIN_TEXT_PX = 8  # a title is set no smaller than this before it is shortened
HISTOGRAM_INCHES = (6.5, 4.0)
FAILURES_INCHES = (7.0, 4.2)
# Margins (inches) around the axes: room for a two-line title, the axis labels and seven-digit counts.
MARGINS = {"left": 0.95, "right": 0.25, "bottom": 0.7, "top": 0.7}
FAILURES_LEFT = 2.3  # the class names sit left of the bars
# Tick steps (times a power of ten): matplotlib's MaxNLocator's default, and its AutoLocator's
LOCATOR_STEPS = (1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0)
AUTO_STEPS = (1.0, 2.0, 2.5, 5.0, 10.0)


def metric_histogram_png(values: Sequence[float], metric: str, system: str, dpi: int, bins: int = 10) -> bytes:
    """Distribution of one per-question metric of one run (scores in [0, 1], NaN left out), its mean marked."""
    return metric_histogram(values, metric, system, dpi, bins).png()


def failure_bars_png(counts: Mapping[str, int], system: str, questions: int | None, dpi: int) -> bytes:
    """Horizontal bars of failure-class counts (keys of :data:`CLASSES`; a class not given counts 0), first class
    on top, each count written at its bar's end."""
    return failure_bars(counts, system, questions, dpi).png()


def metric_histogram(values: Sequence[float], metric: str, system: str, dpi: int, bins: int = 10) -> Canvas:
    """:func:`metric_histogram_png`'s canvas, before it is encoded (the tests read its boxes)."""
    data = np.asarray(values, dtype=float)
    data = data[~np.isnan(data)]
    counts, edges = np.histogram(data, bins=np.linspace(0.0, 1.0, bins + 1))
    canvas = Canvas(*HISTOGRAM_INCHES, dpi, MARGINS)
    top = max(int(counts.max()) if len(counts) else 0, 1) * 1.05  # matplotlib's 5% margin above the tallest bar
    axes = canvas.axes((0.0, 1.0), (0.0, top))
    for count, low, high in zip(counts, edges[:-1], edges[1:]):
        if count:
            axes.bar_up(low, high, float(count), BAR_COLOUR)
    axes.frame()
    ticks = nice_ticks(0.0, 1.0, canvas.tick_space(axes.width, "x"), steps=AUTO_STEPS)
    axes.x_ticks(ticks, [f"{v:.1f}" for v in ticks])
    ticks = nice_ticks(0.0, top, 10, integer=True)
    axes.y_categories(count_labels(ticks), ticks)
    axes.x_label(f"{metric} of a question (score, 0–1)")
    axes.y_label("questions (count)")
    axes.title([f"{metric} per question ({len(data)} questions)", f"system: {system}"])
    if len(data):
        mean = float(data.mean())
        axes.v_line(mean, MEAN_COLOUR, 1.5)
        axes.legend_top(f"mean {mean:.3f}", MEAN_COLOUR, 1.5)
    return canvas


def failure_bars(counts: Mapping[str, int], system: str, questions: int | None, dpi: int) -> Canvas:
    """:func:`failure_bars_png`'s canvas, before it is encoded (the tests read its boxes)."""
    values = [int(counts.get(c, 0)) for c in CLASSES]
    canvas = Canvas(*FAILURES_INCHES, dpi, {**MARGINS, "left": FAILURES_LEFT})
    right = max([*values, 1]) * 1.25
    # bars 0.8 of a slot, the first class on top, matplotlib's 5% margins around them
    rows = len(values)
    span = (rows - 1) + 0.8
    axes = canvas.axes((0.0, right), (rows - 1 + 0.4 + 0.05 * span, -0.4 - 0.05 * span))
    for row, (value, colour) in enumerate(zip(values, FAILURE_COLOURS)):
        axes.bar_right(row, value, 0.8, colour)
        axes.text_after_bar(row, value, f"{value}")
    axes.frame()
    ticks = nice_ticks(0.0, right, 10, integer=True)
    axes.x_ticks(ticks, count_labels(ticks))
    axes.y_categories([LABELS[c] for c in CLASSES])
    axes.x_label("questions (count)")
    axes.y_label("failure class (causes, then where)")
    scope = f" of {questions}" if questions is not None else ""
    axes.title([f"Questions{scope} per failure class", f"system: {system}"])
    return canvas


def nice_ticks(low: float, high: float, bins: int, integer: bool = False,
               steps: Sequence[float] = LOCATOR_STEPS) -> list[float]:
    """Tick values inside ``[low, high]`` as matplotlib's ``MaxNLocator(nbins=bins, steps=steps, integer=integer)``
    places them: the smallest of ``steps`` (times a power of ten) that spans the range in at most ``bins``
    intervals, a smaller one if that leaves fewer than two ticks in view; with ``integer``, no fractional step once
    the range holds two whole numbers."""
    bins = max(1, bins)
    span = high - low
    if span <= 0:
        return [low]
    scale = 10.0 ** math.floor(math.log10(span / bins))
    ladder = np.array([*(0.1 * s for s in steps[:-1]), *steps, 10 * steps[1]]) * scale
    if integer:
        ladder = ladder[(ladder < 1) | (np.abs(ladder - np.round(ladder)) < 0.001)]
    raw = span / bins
    first_large = int(np.flatnonzero(ladder >= raw)[0])
    ticks: list[float] = []
    for step in ladder[: first_large + 1][::-1]:
        if integer and math.floor(high) - math.ceil(low) >= 1:
            step = max(1.0, float(step))
        start = math.floor(low / step + 1e-10)
        shown = [k * step for k in range(start, math.floor(high / step + 1e-10) + 1)]
        ticks = [v for v in shown if low - 1e-10 * step <= v <= high + 1e-10 * step]
        if len(ticks) >= 2:
            break
    return ticks


def count_labels(values: Sequence[float]) -> list[str]:
    """Counts as tick labels: whole numbers, or all in thousands (k) or millions (M) once the largest reaches
    100,000, so that seven-digit counts fit between their neighbours."""
    largest = max((abs(v) for v in values), default=0.0)
    for size, divisor, unit in ((1e6, 1e6, "M"), (1e5, 1e3, "k")):
        if largest >= size:
            return ["0" if v == 0 else f"{v / divisor:.4g}{unit}" for v in values]
    return [f"{v:.0f}" for v in values]


@functools.cache
def font_path() -> str | None:
    """DejaVu Sans as matplotlib ships it (found without importing matplotlib), or None (PIL's own font then)."""
    spec = importlib.util.find_spec("matplotlib")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / "mpl-data" / "fonts" / "ttf" / "DejaVuSans.ttf"
        if path.is_file():
            return str(path)
    return None


@functools.lru_cache(maxsize=64)
def _font(pixels: int) -> Font:
    from PIL import ImageFont

    path = font_path()
    return ImageFont.truetype(path, pixels) if path else ImageFont.load_default(pixels)


@dataclass
class Canvas:
    """An RGB image of ``width`` x ``height`` inches at ``dpi``, with one axes inside ``margins`` (inches)."""

    width_in: float
    height_in: float
    dpi: int
    margins: Mapping[str, float]
    boxes: list[tuple[str, tuple[int, int, int, int]]] = field(default_factory=list)  # each text and its box
    area: Axes | None = None  # the axes, once made

    def __post_init__(self) -> None:
        from PIL import Image, ImageDraw

        self.width, self.height = round(self.width_in * self.dpi), round(self.height_in * self.dpi)
        self.image = Image.new("RGB", (self.width, self.height), WHITE)
        self.draw = ImageDraw.Draw(self.image)

    def px(self, points: float) -> float:
        return points * self.dpi / 72

    def font(self, points: float = TEXT_PT) -> Font:
        return _font(max(1, round(self.px(points))))

    def tick_space(self, length_px: float, axis: str) -> int:
        """How many tick intervals fit along an axis, as matplotlib's ``get_tick_space`` counts them (a label's
        size three times across, twice up), at most 9 (its automatic locator's limit)."""
        per = self.px(TEXT_PT) * (3 if axis == "x" else 2)
        return max(1, min(9, int(length_px // per)))

    def axes(self, xlim: tuple[float, float], ylim: tuple[float, float]) -> Axes:
        """The axes inside the margins, ``ylim`` from bottom to top (reversed limits flip the axis)."""
        m = self.margins
        box = (round(m["left"] * self.dpi), round(m["top"] * self.dpi), self.width - round(m["right"] * self.dpi),
               self.height - round(m["bottom"] * self.dpi))
        self.area = Axes(self, box, xlim, ylim)
        return self.area

    def text(self, xy: tuple[float, float], text: str, anchor: str, points: float = TEXT_PT,
             fill: tuple[int, int, int] = INK, fit: bool = False) -> tuple[int, int, int, int]:
        """Draw ``text`` at ``xy`` (PIL anchor: ``"mb"`` middle-baseline ...) and keep its box; with ``fit``, a text
        wider than the image is set smaller, then shortened in the middle, so that it fits whole."""
        font = self.font(points)
        if fit:
            text, font = self._fitted(text, points)
        x, y = xy
        box = self.draw.textbbox((x, y), text, font=font, anchor=anchor)
        if fit:  # keep it whole inside the image
            shift = max(0, -box[0]) - max(0, box[2] - self.width)
            x += shift
            box = (box[0] + shift, box[1], box[2] + shift, box[3])
        self.draw.text((x, y), text, font=font, anchor=anchor, fill=fill)
        self.boxes.append((text, box))
        return box

    def _fitted(self, text: str, points: float) -> tuple[str, Font]:
        room = self.width - 4
        pixels = max(1, round(self.px(points)))
        while pixels > MIN_TEXT_PX and _font(pixels).getlength(text) > room:
            pixels -= 1
        font = _font(pixels)
        if font.getlength(text) <= room:
            return text, font
        keep = len(text)
        while keep > 1 and font.getlength(_shortened(text, keep)) > room:
            keep -= 1
        return _shortened(text, keep), font

    def vertical_text(self, centre: tuple[float, float], text: str, points: float = TEXT_PT) -> None:
        """``text`` turned a quarter left (read bottom to top), centred on ``centre``."""
        from PIL import Image, ImageDraw

        font = self.font(points)
        left, top, right, bottom = font.getbbox(text)
        mask = Image.new("L", (right - left + 2, bottom - top + 2), 0)
        ImageDraw.Draw(mask).text((1 - left, 1 - top), text, font=font, fill=255)
        mask = mask.transpose(Image.Transpose.ROTATE_90)
        x, y = round(centre[0] - mask.width / 2), round(centre[1] - mask.height / 2)
        self.image.paste(INK, (x, y, x + mask.width, y + mask.height), mask)
        self.boxes.append((text, (x, y, x + mask.width, y + mask.height)))

    def png(self) -> bytes:
        """The image as PNG (deflated fast: these are small, flat images)."""
        buffer = io.BytesIO()
        self.image.save(buffer, format="png", compress_level=1, dpi=(self.dpi, self.dpi))
        return buffer.getvalue()


@dataclass
class Axes:
    """The plotting area of a :class:`Canvas`: data limits mapped onto its pixel box, and what is drawn around it."""

    canvas: Canvas
    box: tuple[int, int, int, int]  # left, top, right, bottom (pixels)
    xlim: tuple[float, float]
    ylim: tuple[float, float]  # bottom value, top value
    left_extent: int = 0  # how far left of the axes the y tick labels reach (pixels): the y label goes beyond
    below_extent: int = 0  # how far below the axes the x tick labels reach

    @property
    def width(self) -> int:
        return self.box[2] - self.box[0]

    @property
    def height(self) -> int:
        return self.box[3] - self.box[1]

    def x(self, value: float) -> float:
        low, high = self.xlim
        return self.box[0] + (value - low) / (high - low) * self.width

    def y(self, value: float) -> float:
        bottom, top = self.ylim
        return self.box[3] - (value - bottom) / (top - bottom) * self.height

    def bar_up(self, low: float, high: float, height: float, colour: str) -> None:
        """A histogram bar from ``low`` to ``high`` along x, ``height`` tall, edged in white."""
        left, right, top = round(self.x(low)), round(self.x(high)), round(self.y(height))
        self.canvas.draw.rectangle((left, top, right, self.box[3]), fill=colour, outline=WHITE)

    def bar_right(self, row: float, value: float, thickness: float, colour: str) -> None:
        """A horizontal bar from 0 to ``value`` in slot ``row``, ``thickness`` of a slot thick."""
        if value <= 0:
            return
        top, bottom = sorted((round(self.y(row - thickness / 2)), round(self.y(row + thickness / 2))))
        self.canvas.draw.rectangle((round(self.x(0)), top, round(self.x(value)), bottom), fill=colour)

    def text_after_bar(self, row: float, value: float, text: str) -> None:
        self.canvas.text((self.x(value) + self.canvas.px(2), self.y(row)), text, "lm")

    def v_line(self, value: float, colour: str, points: float) -> None:
        x = round(self.x(value))
        width = max(1, round(self.canvas.px(points)))
        self.canvas.draw.line((x, self.box[1], x, self.box[3]), fill=colour, width=width)

    def frame(self) -> None:
        self.canvas.draw.rectangle(self.box, outline=FRAME, width=1)

    def x_ticks(self, values: Sequence[float], labels: Sequence[str]) -> None:
        c = self.canvas
        tick, pad = c.px(TICK_PT), c.px(PAD_PT)
        low, high = sorted(self.xlim)
        for value, text in zip(values, labels):
            if low - 1e-9 <= value <= high + 1e-9:
                x = round(self.x(value))
                c.draw.line((x, self.box[3], x, self.box[3] + tick), fill=FRAME)
                box = c.text((x, self.box[3] + tick + pad), text, "mt")
                self.below_extent = max(self.below_extent, box[3] - self.box[3])

    def y_categories(self, labels: Sequence[str], at: Sequence[float] | None = None) -> None:
        """Ticks and their labels left of the axes, at ``at`` (rows 0, 1 ... by default)."""
        c = self.canvas
        tick, pad = c.px(TICK_PT), c.px(PAD_PT)
        bottom, top = sorted(self.ylim)
        for value, text in zip(range(len(labels)) if at is None else at, labels):
            if bottom - 1e-9 <= value <= top + 1e-9:
                y = round(self.y(value))
                c.draw.line((self.box[0] - tick, y, self.box[0], y), fill=FRAME)
                box = c.text((self.box[0] - tick - pad, y), text, "rm")
                self.left_extent = max(self.left_extent, self.box[0] - box[0])

    def x_label(self, text: str) -> None:
        c = self.canvas
        c.text(((self.box[0] + self.box[2]) / 2, self.box[3] + self.below_extent + c.px(LABEL_PAD_PT)), text, "mt",
               fit=True)

    def y_label(self, text: str) -> None:
        c = self.canvas
        height = c.font().getbbox(text)[3]
        centre_x = self.box[0] - self.left_extent - c.px(LABEL_PAD_PT) - height / 2
        c.vertical_text((max(height / 2 + 1, centre_x), (self.box[1] + self.box[3]) / 2), text)

    def title(self, lines: Sequence[str]) -> None:
        """Lines centred over the axes, the last one ``TITLE_PAD_PT`` above them."""
        c = self.canvas
        step = c.px(TEXT_PT) * 1.2
        base = self.box[1] - c.px(TITLE_PAD_PT) - c.font().getmetrics()[1]
        for back, line in enumerate(reversed(lines)):
            c.text(((self.box[0] + self.box[2]) / 2, base - back * step), line, "ms", fit=True)

    def legend_top(self, text: str, colour: str, points: float) -> None:
        """A legend of one line sample, framed, at the top centre inside the axes."""
        c = self.canvas
        font = c.font(SMALL_PT)
        sample, gap, pad = c.px(2 * SMALL_PT), c.px(0.8 * SMALL_PT), c.px(0.5 * SMALL_PT)
        width = pad + sample + gap + font.getlength(text) + pad
        height = c.px(SMALL_PT) * 1.2 + 2 * pad
        left = (self.box[0] + self.box[2]) / 2 - width / 2
        top = self.box[1] + c.px(0.5 * SMALL_PT)
        c.draw.rounded_rectangle((round(left), round(top), round(left + width), round(top + height)),
                                 radius=max(1, round(c.px(0.2 * SMALL_PT))), fill=WHITE, outline=(204, 204, 204))
        middle = round(top + height / 2)
        c.draw.line((round(left + pad), middle, round(left + pad + sample), middle), fill=colour,
                    width=max(1, round(c.px(points))))
        c.text((left + pad + sample + gap, middle), text, "lm", SMALL_PT)


def _shortened(text: str, keep: int) -> str:
    """``text`` cut to ``keep`` characters with an ellipsis in the middle."""
    if keep >= len(text):
        return text
    head = (keep - 1) // 2 + (keep - 1) % 2
    return text[:head] + "…" + text[len(text) - (keep - 1 - head):] if keep > 1 else "…"


def warm_up(dpi: int) -> None:
    """Load PIL's drawing and PNG code and the fonts once (a sweep's drawing copy does this before its first job)."""
    metric_histogram_png(np.linspace(0.0, 1.0, 11), "ndcg@10", "placeholder", dpi)
    failure_bars_png(dict.fromkeys(CLASSES, 1), "placeholder", 11, dpi)
