"""What the tests of the figures drawn with PIL read of them: their pixels, and whether every text is whole and clear
of the others."""

from __future__ import annotations

import io
import itertools
from collections.abc import Iterable

import numpy as np
from matplotlib.colors import to_rgb
from PIL import Image

from pipeline.reports.canvas import Canvas


def pixels(png: bytes) -> np.ndarray:
    """The PNG decoded (rows x columns x RGB, as ints)."""
    assert png.startswith(b"\x89PNG")
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)


def is_colour(image: np.ndarray, colour: str) -> np.ndarray:
    """Where the image is exactly ``colour``."""
    return (image == np.round(np.array(to_rgb(colour)) * 255)).all(axis=-1)


def assert_whole_and_apart(canvas: Canvas, overlapping: Iterable[str] = ()) -> None:
    """Every text inside the image, and none touching another (but those named in ``overlapping``: slanted texts,
    whose boxes overlap as rectangles where their letters do not)."""
    for text, (x0, y0, x1, y1) in canvas.boxes:
        assert x0 >= 0 and y0 >= 0 and x1 <= canvas.width and y1 <= canvas.height, text
    skipped = set(overlapping)
    kept = [(text, box) for text, box in canvas.boxes if text not in skipped]
    for (a, box_a), (b, box_b) in itertools.combinations(kept, 2):
        apart = box_a[2] <= box_b[0] or box_b[2] <= box_a[0] or box_a[3] <= box_b[1] or box_b[3] <= box_a[1]
        assert apart, (a, b)
