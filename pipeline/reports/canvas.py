"""A small drawing surface on a PIL image for plots that matplotlib made too slowly: one axes with data limits,
ticks, labels, a title, bars and lines, at matplotlib's default sizes (text 10 pt, ticks 3.5 pt ...), in DejaVu Sans
(matplotlib's own font, read from its data folder without importing matplotlib).

matplotlib spends tens to hundreds of milliseconds a figure on artists, transforms and text layout; a plot of fixed
shape drawn here takes a few. :func:`nice_ticks` picks tick values as matplotlib's ``MaxNLocator`` does, so the axes
read as they did. Every text is placed whole inside the image (a title too wide is set smaller, then shortened in
the middle), and :class:`Canvas` keeps each text's box: the tests check that none is cut off or overlaps another.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import io
import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from PIL.ImageFont import FreeTypeFont as Font

INK, FRAME, WHITE = (0, 0, 0), (0, 0, 0), (255, 255, 255)
# Sizes in points (1/72 inch), as matplotlib's defaults have them: text 10, "small" 8.33; ticks 3.5 long with 3.5 of
# padding; a title 6 above its axes, an axis label 4 beyond its tick labels.
TEXT_PT, SMALL_PT, TICK_PT, PAD_PT, TITLE_PAD_PT, LABEL_PAD_PT = 10.0, 8.33, 3.5, 3.5, 6.0, 4.0
LARGE_PT = 12.0  # matplotlib's axes titles
LONGEST_LABEL_IN = 3.0  # a legend's label is shortened beyond this
# A legend's spacing in "small" text sizes, as matplotlib's defaults have it: border padding, sample length, gap to the
# label, space between entries
LEGEND_PAD, LEGEND_SAMPLE, LEGEND_GAP, LEGEND_SPACING = 0.4, 2.0, 0.8, 0.5
MIN_TEXT_PX = 8  # a title is set no smaller than this before it is shortened
# Tick steps (times a power of ten): matplotlib's MaxNLocator's default, and its AutoLocator's
LOCATOR_STEPS = (1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0)
AUTO_STEPS = (1.0, 2.0, 2.5, 5.0, 10.0)


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


def legend_label(text: str, dpi: int) -> str:
    """A legend's label, shortened in the middle beyond :data:`LONGEST_LABEL_IN` (a legend must leave its axes
    room)."""
    return shortened_to(text, LONGEST_LABEL_IN * dpi, font_at(SMALL_PT, dpi))


def legend_room(keys: Sequence[Key], width_in: float, dpi: int, title: str | None = None) -> float:
    """The room (inches) a legend of ``keys`` takes right of its axes in an image ``width_in`` wide, with the gap
    :meth:`Axes.legend_right` leaves before it and a margin after it."""
    size, small = SMALL_PT * dpi / 72, font_at(SMALL_PT, dpi)
    width = size * (2 * LEGEND_PAD + LEGEND_SAMPLE + LEGEND_GAP) + max(small.getlength(key.label) for key in keys)
    if title:
        width = max(width, size * 2 * LEGEND_PAD + font_at(TEXT_PT, dpi).getlength(title))
    return (width + 0.01 * width_in * dpi + size * LEGEND_SPACING + 6 * dpi / 72 + 2) / dpi


def axes_margins(dpi: int, y_labels: Sequence[str], title_lines: int, title_pt: float = TEXT_PT) -> dict[str, float]:
    """Room (inches) left, below and above an axes with these y tick labels, an x axis of one line of tick labels,
    both axis labels, and a title of ``title_lines`` lines: what matplotlib's constrained layout leaves."""
    def px(points: float) -> float:
        return points * dpi / 72

    widest = max((font_at(TEXT_PT, dpi).getlength(label) for label in y_labels), default=0.0)
    left = px(4 + LABEL_PAD_PT + TICK_PT + PAD_PT) + px(TEXT_PT) * 1.2 + widest
    bottom = px(TICK_PT + PAD_PT + LABEL_PAD_PT + 6) + 2 * px(TEXT_PT) * 1.2
    top = px(TITLE_PAD_PT + 6) + title_lines * px(title_pt) * 1.2
    return {"left": left / dpi, "bottom": bottom / dpi, "top": top / dpi}


def decimal_labels(values: Sequence[float]) -> list[str]:
    """Tick labels with as many decimals as the most precise value needs, the same for all, negatives with a true
    minus sign (as matplotlib's ``ScalarFormatter`` writes −0.02, 0.00, 0.02)."""
    for decimals in range(7):
        if all(abs(round(v, decimals) - v) <= 1e-9 * max(1.0, abs(v)) for v in values):
            break
    return [f"{v:.{decimals}f}".replace("-", "−") if round(v, decimals) != 0 else f"{0:.{decimals}f}"
            for v in values]


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


def font_at(points: float, dpi: int) -> Font:
    """DejaVu Sans at ``points`` for an image of ``dpi`` (what a :class:`Canvas` of that resolution sets text in)."""
    return _font(max(1, round(points * dpi / 72)))


def shortened_to(text: str, room: float, font: Font) -> str:
    """``text``, shortened in the middle with an ellipsis until it is at most ``room`` pixels wide in ``font``."""
    if font.getlength(text) <= room:
        return text
    keep = len(text)
    while keep > 1 and font.getlength(_shortened(text, keep)) > room:
        keep -= 1
    return _shortened(text, keep)


@dataclass
class Canvas:
    """An RGB image of ``width`` x ``height`` inches at ``dpi``, with one axes inside ``margins`` (inches)."""

    width_in: float
    height_in: float
    dpi: int
    margins: Mapping[str, float]
    boxes: list[tuple[str, tuple[int, int, int, int]]] = field(default_factory=list)  # each text and its box
    area: Axes | None = None  # the axes, once made
    slanted: set[str] = field(default_factory=set)  # the texts set slanted

    def __post_init__(self) -> None:
        from PIL import Image, ImageDraw

        self.width, self.height = round(self.width_in * self.dpi), round(self.height_in * self.dpi)
        self.image = Image.new("RGB", (self.width, self.height), WHITE)
        self.draw = ImageDraw.Draw(self.image)

    def px(self, points: float) -> float:
        return points * self.dpi / 72

    def font(self, points: float = TEXT_PT) -> Font:
        return font_at(points, self.dpi)

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
        return shortened_to(text, room, font), font

    def vertical_text(self, centre: tuple[float, float], text: str, points: float = TEXT_PT,
                      room: float | None = None) -> None:
        """``text`` turned a quarter left (read bottom to top), centred on ``centre``; shortened in the middle to
        ``room`` pixels (the image's height by default)."""
        from PIL import Image, ImageDraw

        font = self.font(points)
        text = shortened_to(text, (self.height if room is None else room) - 4, font)
        left, top, right, bottom = font.getbbox(text)
        mask = Image.new("L", (right - left + 2, bottom - top + 2), 0)
        ImageDraw.Draw(mask).text((1 - left, 1 - top), text, font=font, fill=255)
        mask = mask.transpose(Image.Transpose.ROTATE_90)
        x, y = round(centre[0] - mask.width / 2), round(centre[1] - mask.height / 2)
        self.image.paste(INK, (x, y, x + mask.width, y + mask.height), mask)
        self.boxes.append((text, (x, y, x + mask.width, y + mask.height)))

    def vertical_room(self, centre_x: float, centre_y: float, thickness: float) -> float:
        """How tall a text read bottom to top, centred on (``centre_x``, ``centre_y``) and ``thickness`` wide, can be
        without leaving the image or touching a text drawn already."""
        above, below = 0.0, float(self.height)
        for text, (x0, y0, x1, y1) in self.boxes:
            if text in self.slanted:  # its box is mostly empty corners
                continue
            if x0 < centre_x + thickness / 2 + 1 and x1 > centre_x - thickness / 2 - 1:
                if y1 <= centre_y:
                    above = max(above, y1)
                elif y0 >= centre_y:
                    below = min(below, y0)
        return 2 * min(centre_y - above, below - centre_y)

    def slanted_text(self, corner: tuple[float, float], text: str, degrees: float, points: float = TEXT_PT) -> None:
        """``text`` turned ``degrees`` left (rising to the right), its turned box's top right corner at ``corner``:
        a tick label under the axes, as matplotlib sets ``rotation=degrees, ha="right"``."""
        from PIL import Image, ImageDraw

        font = self.font(points)
        left, top, right, bottom = font.getbbox(text)
        mask = Image.new("L", (right - left + 2, bottom - top + 2), 0)
        ImageDraw.Draw(mask).text((1 - left, 1 - top), text, font=font, fill=255)
        mask = mask.rotate(degrees, resample=Image.Resampling.BICUBIC, expand=True)
        x, y = round(corner[0] - mask.width), round(corner[1])
        self.image.paste(INK, (x, y, x + mask.width, y + mask.height), mask)
        self.boxes.append((text, (x, y, x + mask.width, y + mask.height)))
        self.slanted.add(text)

    def png(self) -> bytes:
        """The image as PNG (deflated fast: these are small, flat images)."""
        buffer = io.BytesIO()
        self.image.save(buffer, format="png", compress_level=1, dpi=(self.dpi, self.dpi))
        return buffer.getvalue()


@dataclass(frozen=True)
class Key:
    """One entry of a legend: its label and how its sample is drawn: ``"line"`` (``width_pt`` wide, ``dashed``
    or not, with a dot of ``dot_pt`` in its middle if given), ``"patch"`` (a filled box, its colour at ``alpha``) or
    ``"ring"`` (``dot_pt`` across, ``width_pt`` thick)."""

    label: str
    colour: object
    kind: str = "line"
    width_pt: float = 1.5
    dot_pt: float = 0.0
    dashed: bool = False
    alpha: float = 1.0

    def draw(self, layer: Layer, left: float, right: float, middle: float, size: float) -> None:
        ys = np.array([middle])
        centre = np.array([(left + right) / 2])
        if self.kind == "ring":
            layer.rings(centre, ys, self.colour, self.dot_pt, self.width_pt)
        elif self.kind == "patch":
            layer.patch(left, middle - 0.35 * size, right, middle + 0.35 * size, self.colour, self.alpha)
        else:
            layer.line(np.array([left, right]), np.repeat(ys, 2), self.colour, self.width_pt,
                       dashes=(3.7, 1.6) if self.dashed else None)
            if self.dot_pt:
                layer.dots(centre, ys, self.colour, self.dot_pt)


SMOOTH = 3  # a layer is drawn this many times larger, then scaled down: smooth edges, as matplotlib's


class Layer:
    """The inside of an :class:`Axes`, drawn :data:`SMOOTH` times larger (lines, bands, dots), then scaled down into
    it: PIL draws no smooth edges itself."""

    def __init__(self, axes: Axes) -> None:
        from PIL import Image, ImageDraw

        self.axes = axes
        self.image = axes.canvas.image.crop(axes.box).resize((axes.width * SMOOTH, axes.height * SMOOTH),
                                                             Image.Resampling.NEAREST)
        self.draw = ImageDraw.Draw(self.image)

    def px(self, points: float) -> float:
        return self.axes.canvas.px(points) * SMOOTH

    def xy(self, xs: np.ndarray, ys: np.ndarray) -> list[tuple[float, float]]:
        left, top = self.axes.box[:2]
        centre = (SMOOTH - 1) / 2  # pixel u of the axes is the layer's pixels SMOOTH * u ... SMOOTH * u + SMOOTH - 1
        return [((self.axes.x(float(x)) - left) * SMOOTH + centre, (self.axes.y(float(y)) - top) * SMOOTH + centre)
                for x, y in zip(xs, ys)]

    def line(self, xs: np.ndarray, ys: np.ndarray, colour: object, points: float,
             dashes: tuple[float, float] | None = None) -> None:
        """A line through the points, ``points`` wide; with ``dashes`` (on, off: in line widths), broken as
        matplotlib breaks ``":"`` (1, 1.65) and ``"--"`` (3.7, 1.6)."""
        path = self.xy(xs, ys)
        width = max(1, round(self.px(points)))
        if dashes is None:
            self.draw.line(path, fill=colour, width=width, joint="curve")
            return
        on, off = self.px(points) * dashes[0], self.px(points) * dashes[1]
        for (x0, y0), (x1, y1) in itertools.pairwise(path):
            length = math.hypot(x1 - x0, y1 - y0)
            start = 0.0
            while start < length:
                end = min(start + on, length)
                a, b = start / length, end / length
                self.draw.line((x0 + a * (x1 - x0), y0 + a * (y1 - y0), x0 + b * (x1 - x0), y0 + b * (y1 - y0)),
                               fill=colour, width=width)
                start += on + off

    def patch(self, left: float, top: float, right: float, bottom: float, colour: object, alpha: float = 1.0) -> None:
        """A filled box given in the axes' data, ``colour`` at ``alpha`` over what is there."""
        from PIL import Image

        (x0, y0), (x1, y1) = self.xy(np.array([left, right]), np.array([top, bottom]))
        x0, x1 = sorted((round(x0), round(x1)))
        y0, y1 = sorted((round(y0), round(y1)))
        if x1 > x0 and y1 > y0:
            self.image.paste(colour, (x0, y0, x1, y1), Image.new("L", (x1 - x0, y1 - y0), round(255 * alpha)))

    def dots(self, xs: np.ndarray, ys: np.ndarray, colour: object, diameter_pt: float) -> None:
        r = self.px(diameter_pt) / 2
        for x, y in self.xy(xs, ys):
            self.draw.ellipse((x - r, y - r, x + r, y + r), fill=colour)

    def rings(self, xs: np.ndarray, ys: np.ndarray, colour: object, diameter_pt: float, edge_pt: float) -> None:
        r = self.px(diameter_pt) / 2
        for x, y in self.xy(xs, ys):
            self.draw.ellipse((x - r, y - r, x + r, y + r), outline=colour, width=max(1, round(self.px(edge_pt))))

    def close(self) -> None:
        self.axes.canvas.image.paste(self.image.reduce(SMOOTH), self.axes.box[:2])


@dataclass
class Axes:
    """The plotting area of a :class:`Canvas`: data limits mapped onto its pixel box, and what is drawn around it."""

    canvas: Canvas
    box: tuple[int, int, int, int]  # left, top, right, bottom (pixels)
    xlim: tuple[float, float]
    ylim: tuple[float, float]  # bottom value, top value
    left_extent: int = 0  # how far left of the axes the y tick labels reach (pixels): the y label goes beyond
    below_extent: int = 0  # how far below the axes the x tick labels reach
    right_extent: int = 0  # how far right of the axes tick labels set there reach

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

    def cell(self, column: float, row: float, colour: object) -> None:
        """The unit cell centred on (``column``, ``row``), filled (an image's pixel, as ``imshow`` draws it)."""
        x0, x1 = sorted((round(self.x(column - 0.5)), round(self.x(column + 0.5))))
        y0, y1 = sorted((round(self.y(row - 0.5)), round(self.y(row + 0.5))))
        self.canvas.draw.rectangle((x0, y0, x1 - 1, y1 - 1), fill=colour)

    def cell_text(self, column: float, row: float, lines: Sequence[str], fill: tuple[int, int, int],
                  points: float) -> None:
        """Lines centred together on the cell at (``column``, ``row``)."""
        step = self.canvas.px(points) * 1.2
        x, y = self.x(column), self.y(row) - step * (len(lines) - 1) / 2
        for number, line in enumerate(lines):
            self.canvas.text((x, y + number * step), line, "mm", points, fill)

    def hatch(self, extent: tuple[float, float, float, float], colour: object, spacing_pt: float = 9.0) -> None:
        """Thin lines rising to the right across the data rectangle ``extent`` (x0, y0, x1, y1): matplotlib's
        ``hatch="//"``."""
        from PIL import Image, ImageDraw

        xs = sorted((round(self.x(extent[0])), round(self.x(extent[2]))))
        ys = sorted((round(self.y(extent[1])), round(self.y(extent[3]))))
        width, height = xs[1] - xs[0], ys[1] - ys[0]
        if width <= 0 or height <= 0:
            return
        mask = Image.new("L", (width, height), 0)
        lines = ImageDraw.Draw(mask)
        step = max(2, round(self.canvas.px(spacing_pt)))
        for start in range(-height, width, step):
            lines.line((start, height, start + height, 0), fill=255, width=1)
        self.canvas.image.paste(colour, (xs[0], ys[0], xs[1], ys[1]), mask)

    def h_line(self, value: float, colour: object, points: float) -> None:
        y = round(self.y(value))
        width = max(1, round(self.canvas.px(points)))
        self.canvas.draw.line((self.box[0], y, self.box[2], y), fill=colour, width=width)

    def band(self, xs: np.ndarray, lows: np.ndarray, highs: np.ndarray, colour: object, alpha: float) -> None:
        """The area between ``lows`` and ``highs`` along ``xs``, ``colour`` laid over what is there at ``alpha``
        (at size: an edge this faint shows no steps)."""
        from PIL import Image, ImageDraw

        if len(xs) < 2:
            return
        outline = [(self.x(float(x)), self.y(float(y))) for x, y in zip(xs, lows)] + [
            (self.x(float(x)), self.y(float(y))) for x, y in zip(xs[::-1], highs[::-1])]
        left, top = (max(0, math.floor(min(p[i] for p in outline))) for i in (0, 1))
        right, bottom = (math.ceil(max(p[i] for p in outline)) + 1 for i in (0, 1))
        if right <= left or bottom <= top:
            return
        mask = Image.new("L", (right - left, bottom - top), 0)
        ImageDraw.Draw(mask).polygon([(x - left, y - top) for x, y in outline], fill=round(255 * alpha))
        self.canvas.image.paste(colour, (left, top, right, bottom), mask)

    def grid(self, xs: Sequence[float], ys: Sequence[float], colour: object) -> None:
        """Thin lines across the axes at each x and y value (one pixel, as matplotlib's 0.8 points draw)."""
        left, top, right, bottom = self.box
        for x in xs:
            self.canvas.draw.line((round(self.x(x)), top, round(self.x(x)), bottom), fill=colour)
        for y in ys:
            self.canvas.draw.line((left, round(self.y(y)), right, round(self.y(y))), fill=colour)

    @contextlib.contextmanager
    def layer(self) -> Iterator[Layer]:
        """Draw inside the axes (white) on a :class:`Layer`; it is laid in when the block ends."""
        layer = Layer(self)
        yield layer
        layer.close()

    def legend_right(self, keys: Sequence[Key], title: str | None = None) -> None:
        """A framed legend right of the axes, its top at theirs: each key's sample and label (and a title above
        them), in "small" text, spaced as matplotlib's defaults space it."""
        c = self.canvas
        font = c.font(SMALL_PT)
        size = c.px(SMALL_PT)
        pad, sample, gap, spacing = (share * size for share in (LEGEND_PAD, LEGEND_SAMPLE, LEGEND_GAP, LEGEND_SPACING))
        heading = c.px(TEXT_PT) * 1.2 + spacing if title else 0.0
        width = pad + sample + gap + max(font.getlength(key.label) for key in keys) + pad
        if title:
            width = max(width, 2 * pad + c.font().getlength(title))
        row = size * 1.2
        height = 2 * pad + heading + len(keys) * row + (len(keys) - 1) * spacing
        left = self.box[2] + round(0.01 * self.width) + round(0.5 * size)
        top = self.box[1]
        box = (round(left), round(top), round(left + width), round(top + height))
        c.draw.rounded_rectangle(box, radius=max(1, round(c.px(0.2 * SMALL_PT))), fill=WHITE, outline=(204, 204, 204))
        if title:
            c.text(((box[0] + box[2]) / 2, top + pad + c.px(TEXT_PT) * 0.6), title, "mm")
        middles = [top + pad + heading + number * (row + spacing) + row / 2 for number in range(len(keys))]
        samples = Axes(c, box, (box[0], box[2]), (box[3], box[1]))  # pixels as data, top down
        with samples.layer() as layer:
            for key, middle in zip(keys, middles):
                key.draw(layer, left + pad, left + pad + sample, middle, size)
        for key, middle in zip(keys, middles):
            c.text((left + pad + sample + gap, middle), key.label, "lm", SMALL_PT)

    def bars(self, lefts: Sequence[float], rights: Sequence[float], heights: Sequence[float], colours: Sequence[object],
             edge: object | None = None) -> None:
        """Bars up from 0, from ``lefts`` to ``rights``, each in its colour (``edge``: an outline colour)."""
        base = round(self.y(0.0))
        for low, high, height, colour in zip(lefts, rights, heights, colours):
            x0, x1 = sorted((round(self.x(low)), round(self.x(high))))
            y0, y1 = sorted((round(self.y(height)), base))
            self.canvas.draw.rectangle((x0, y0, x1, y1), fill=colour, outline=edge)

    def error_bars(self, xs: Sequence[float], lows: Sequence[float], highs: Sequence[float], cap_pt: float,
                   colour: object = FRAME) -> None:
        """A vertical line from each low to its high, capped ``cap_pt`` wide at both ends."""
        half = round(self.canvas.px(cap_pt))
        for x, low, high in zip(xs, lows, highs):
            px, y0, y1 = round(self.x(x)), round(self.y(low)), round(self.y(high))
            self.canvas.draw.line((px, y0, px, y1), fill=colour, width=max(1, round(self.canvas.px(1.0))))
            for y in (y0, y1):
                self.canvas.draw.line((px - half, y, px + half, y), fill=colour)

    def v_span(self, low: float, high: float, colour: object, alpha: float) -> None:
        """The band from ``low`` to ``high`` along x, the axes' height, ``colour`` at ``alpha`` over what is there."""
        from PIL import Image

        x0, x1 = sorted((round(self.x(low)), round(self.x(high))))
        x0, x1 = max(x0, self.box[0]), min(x1, self.box[2])
        if x1 > x0:
            self.canvas.image.paste(colour, (x0, self.box[1], x1, self.box[3]),
                                    Image.new("L", (x1 - x0, self.height), round(255 * alpha)))

    def v_dashed(self, value: float, colour: object, points: float, dash: tuple[float, float] = (3.7, 1.6)) -> None:
        """A vertical dashed line across the axes (matplotlib's ``"--"``: dashes and gaps in line widths)."""
        x = round(self.x(value))
        width = max(1, round(self.canvas.px(points)))
        on, off = self.canvas.px(points) * dash[0], self.canvas.px(points) * dash[1]
        y = float(self.box[1])
        while y < self.box[3]:
            self.canvas.draw.line((x, round(y), x, round(min(y + on, self.box[3]))), fill=colour, width=width)
            y += on + off

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

    def x_slanted(self, values: Sequence[float], labels: Sequence[str], degrees: float) -> None:
        """Ticks under the axes at ``values``, their labels turned ``degrees`` and ending under them."""
        c = self.canvas
        tick, pad = c.px(TICK_PT), c.px(PAD_PT)
        for value, text in zip(values, labels):
            x = round(self.x(value))
            c.draw.line((x, self.box[3], x, self.box[3] + tick), fill=FRAME)
            c.slanted_text((x, self.box[3] + tick + pad), text, degrees)
            self.below_extent = max(self.below_extent, c.boxes[-1][1][3] - self.box[3])

    def colour_bar(self, colours: Sequence[tuple[int, int, int]], gap_pt: float, thickness: float) -> Axes:
        """A colour bar ``gap_pt`` right of these axes, ``thickness`` pixels wide and as tall as they are: ``colours``
        from the bottom (0) to the top (1). Returns its axes (0-1 upwards), for its ticks and label."""
        from PIL import Image

        c = self.canvas
        left = self.box[2] + round(c.px(gap_pt))
        width = round(thickness)
        box = (left, self.box[1], left + width, self.box[3])
        strip = Image.new("RGB", (1, len(colours)))
        strip.putdata(list(reversed(colours)))
        c.image.paste(strip.resize((width, self.height), Image.Resampling.NEAREST), box[:2])
        bar = Axes(c, box, (0.0, 1.0), (0.0, 1.0))
        bar.frame()
        return bar

    def y_ticks_right(self, values: Sequence[float], labels: Sequence[str]) -> None:
        """Ticks and their labels right of the axes (a colour bar's)."""
        c = self.canvas
        tick, pad = c.px(TICK_PT), c.px(PAD_PT)
        for value, text in zip(values, labels):
            y = round(self.y(value))
            c.draw.line((self.box[2], y, self.box[2] + tick, y), fill=FRAME)
            box = c.text((self.box[2] + tick + pad, y), text, "lm")
            self.right_extent = max(self.right_extent, box[2] - self.box[2])

    def y_label_right(self, text: str) -> None:
        """An axis label right of the tick labels there, read bottom to top (a colour bar's)."""
        c = self.canvas
        height = c.font().getbbox(text)[3]
        centre_x = min(c.width - height / 2 - 1, self.box[2] + self.right_extent + c.px(LABEL_PAD_PT) + height / 2)
        centre = (self.box[1] + self.box[3]) / 2
        c.vertical_text((centre_x, centre), text, room=c.vertical_room(centre_x, centre, height))

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
        """The axis label left of the tick labels, read bottom to top, centred on the axes; shortened only where it
        would reach the image's edge or a text drawn before it (the title)."""
        c = self.canvas
        height = c.font().getbbox(text)[3]
        centre_x = max(height / 2 + 1, self.box[0] - self.left_extent - c.px(LABEL_PAD_PT) - height / 2)
        centre = (self.box[1] + self.box[3]) / 2
        c.vertical_text((centre_x, centre), text, room=c.vertical_room(centre_x, centre, height))

    def title(self, lines: Sequence[str], points: float = TEXT_PT) -> None:
        """Lines centred over the axes, the last one ``TITLE_PAD_PT`` above them."""
        c = self.canvas
        step = c.px(points) * 1.2
        base = self.box[1] - c.px(TITLE_PAD_PT) - c.font(points).getmetrics()[1]
        for back, line in enumerate(reversed(lines)):
            c.text(((self.box[0] + self.box[2]) / 2, base - back * step), line, "ms", points, fit=True)

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
