"""Text drawn by matplotlib's Agg renderer, remembered: a text drawn again where it was drawn before is copied from
the glyph bitmaps FreeType made the first time instead of laid out and rendered again.

A sweep's drawing copy redraws each job's two per-run plots on the figures it kept (:mod:`pipeline.reports.plots`):
the axis labels, the class names and most tick labels come back with the same text at the same place, and laying
out and rendering text was two thirds of drawing such a plot. A text's pixels depend only on what the key holds
(the text, its exact position, font, size, angle, antialiasing, the canvas's size and dpi, the hinting settings),
so a remembered text is drawn to the same bytes (the tests compare every PNG with and without).

What is remembered is what the renderer itself handed to Agg (``draw_text_image`` calls, with copies of their
bitmaps). A text whose drawing touched anything else of the renderer, or drew nothing, is not remembered: it is
drawn as usual every time. Installed only in rankscope's own drawing processes (:func:`remember_text`), never in a
process that imports rankscope as a library.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import numpy as np
from matplotlib import rcParams
from matplotlib.backends.backend_agg import RendererAgg

LIMIT = 4096  # texts remembered (a few hundred bytes of bitmaps each), least recently drawn forgotten first
_RC = ("text.hinting", "text.hinting_factor", "text.antialiased", "text.kerning_factor", "font.family",
       "font.sans-serif", "font.serif", "font.monospace", "font.cursive", "font.fantasy")
_ORIGINAL = RendererAgg.draw_text
_REMEMBERED: OrderedDict[tuple, list[tuple[np.ndarray, Any, Any, Any]]] = OrderedDict()
counts = {"drawn": 0, "copied": 0}  # texts rendered by matplotlib, texts copied from memory (the tests read them)


class _Recorder:
    """Stands in for the renderer's Agg object while a text is drawn: passes everything on, keeps a copy of each
    glyph bitmap handed to ``draw_text_image``, and notes any other use."""

    def __init__(self, target: Any) -> None:
        self.target = target
        self.images: list[tuple[np.ndarray, Any, Any, Any]] = []
        self.other = False

    def draw_text_image(self, image: Any, x: Any, y: Any, angle: Any, gc: Any) -> Any:
        self.images.append((np.array(image, copy=True), x, y, angle))
        return self.target.draw_text_image(image, x, y, angle, gc)

    def __getattr__(self, name: str) -> Any:
        self.other = True
        return getattr(self.target, name)


def _key(renderer: RendererAgg, gc: Any, x: float, y: float, s: str, prop: Any, angle: float,
         mtext: Any) -> tuple:
    font = (tuple(prop.get_family()), prop.get_style(), prop.get_variant(), prop.get_weight(), prop.get_stretch(),
            prop.get_size_in_points(), prop.get_file(), prop.get_math_fontfamily())
    shaping = (None, None) if mtext is None else (tuple(mtext.get_fontfeatures() or ()), mtext.get_language())
    settings = tuple(str(rcParams[name]) for name in _RC)
    return (s, float(x), float(y), float(angle), font, shaping, settings, renderer.dpi, renderer.width,
            renderer.height, bool(gc.get_antialiased()))


def _draw_text(self: RendererAgg, gc: Any, x: float, y: float, s: str, prop: Any, angle: float,
               ismath: Any = False, mtext: Any = None) -> None:
    """``RendererAgg.draw_text``, remembering plain text (mathtext is drawn as usual)."""
    if ismath:
        return _ORIGINAL(self, gc, x, y, s, prop, angle, ismath, mtext)
    key = _key(self, gc, x, y, s, prop, angle, mtext)
    images = _REMEMBERED.get(key)
    if images is not None:
        _REMEMBERED.move_to_end(key)
        counts["copied"] += 1
        for image, left, bottom, turn in images:
            self._renderer.draw_text_image(image, left, bottom, turn, gc)
        return None
    counts["drawn"] += 1
    agg = self._renderer
    recorder = self._renderer = _Recorder(agg)
    try:
        _ORIGINAL(self, gc, x, y, s, prop, angle, ismath, mtext)
    finally:
        self._renderer = agg
    if recorder.images and not recorder.other:
        _REMEMBERED[key] = recorder.images
        if len(_REMEMBERED) > LIMIT:
            _REMEMBERED.popitem(last=False)
    return None


def remember_text() -> None:
    """Make this process's Agg renderers remember the text they draw (idempotent)."""
    RendererAgg.draw_text = _draw_text


def forget_text() -> None:
    """Undo :func:`remember_text` and forget what was remembered (for the tests)."""
    RendererAgg.draw_text = _ORIGINAL
    _REMEMBERED.clear()
