"""Self-contained HTML pages: sections with tables and plots (base64 PNG) in a single file.

A page needs no network, no script and no external stylesheet, so it opens offline and can be sent to a colleague
as is; folding is HTML's own ``<details>``. Every piece of text is HTML-escaped: system names and questions come
from users' data. What a sweep's report holds is :mod:`pipeline.reports.sweep_page`'s business.
"""

from __future__ import annotations

import base64
import contextlib
import gc
import io
import numbers
import os
import pickle
import re
import signal
import sys
import tempfile
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from html import escape
from multiprocessing.connection import Connection, Pipe
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from pipeline.common.forking import second_core, yield_to_the_command

if TYPE_CHECKING:
    from matplotlib.figure import Figure

DPI = 110
# a figure, or what makes it (or makes another file's bytes): see Drawing; a string, as matplotlib is not imported here
Made = "Figure | Callable[[], Figure | bytes]"
_RENDERED: weakref.WeakKeyDictionary[Figure, tuple[int, bytes]] = weakref.WeakKeyDictionary()  # dpi, PNG
_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 72em; padding: 0 1em; color: #222;
       line-height: 1.4; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; margin-top: 1.8em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f2f2f2; } td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.ci { color: #555; font-size: 0.85em; } sup { color: #08519c; }
table.meta th { width: 13em; }
.verdict { font-size: 1.05em; padding: 0.6em 0.9em; background: #f4f8fb; border-left: 4px solid #6baed6; }
nav.toc { background: #fafafa; border: 1px solid #e4e4e4; padding: 0.4em 1.2em; margin: 1em 0; }
nav.toc ol { margin: 0.3em 0; padding-left: 1.4em; columns: 2; }
details { border: 1px solid #ddd; margin: 0.4em 0; padding: 0.2em 0.7em; }
details[open] { padding-bottom: 0.6em; } summary { cursor: pointer; padding: 0.2em 0; }
img { max-width: 100%; height: auto; border: 1px solid #eee; } pre { background: #f7f7f7; padding: 0.8em; }
figure { margin: 1em 0; } figcaption { font-size: 0.9em; color: #555; } .note { color: #555; font-size: 0.9em; }
"""


@dataclass(frozen=True)
class Section:
    """One part of a page: a heading with optional text, table, markup, preformatted block and figure.

    ``html`` is markup the caller built from escaped parts (:mod:`pipeline.reports.tables`, :func:`details`);
    ``anchor`` is the section's id for the table of contents (a slug of the heading when empty)."""

    heading: str
    text: str = ""
    table: pd.DataFrame | None = None
    figure: Figure | None = None
    preformatted: str = ""
    html: str = ""
    anchor: str = ""


def is_figure(made: object) -> bool:
    """Whether ``made`` is a matplotlib figure. matplotlib is imported only by what draws with it (half a second that
    a run, whose plots are drawn with PIL, never pays): until something has imported it, nothing is a figure."""
    module = sys.modules.get("matplotlib.figure")
    return module is not None and isinstance(made, module.Figure)


def figure_png(fig: Figure, dpi: int = DPI) -> bytes:
    """The figure rendered as PNG bytes, once: a figure saved as a file and shown in a page is drawn one time (a
    figure is final once rendered)."""
    done = _RENDERED.get(fig)
    if done is None or done[0] != dpi:
        done = _RENDERED[fig] = (dpi, _draw(fig, dpi))
    return done[1]


def render_pngs(figures: Sequence[Figure], dpi: int = DPI) -> list[bytes]:
    """Each figure's PNG bytes. matplotlib draws on one core, about 0.2 s a figure; with several to draw and a
    second core, a forked copy of this process draws every other one meanwhile (a copy that fails or is stopped
    leaves its share to be drawn here)."""
    todo = [f for f in dict.fromkeys(figures) if _RENDERED.get(f, (None,))[0] != dpi]
    if len(todo) > 1 and second_core():
        theirs = todo[1::2]
        with tempfile.TemporaryDirectory(prefix="rankscope-plots-") as tmp:
            files = {Path(tmp, f"{i}.png"): fig for i, fig in enumerate(theirs)}
            pid = _drawn_by_a_copy(files, dpi)
            try:
                for fig in todo[0::2]:
                    figure_png(fig, dpi)
            except BaseException:
                os.kill(pid, signal.SIGKILL)
                raise
            finally:
                os.waitpid(pid, 0)
            for path, fig in files.items():
                if path.is_file():
                    _RENDERED[fig] = (dpi, path.read_bytes())
    return [figure_png(f, dpi) for f in figures]


def _drawn_by_a_copy(files: Mapping[Path, Made], dpi: int) -> int:
    """Fork a copy of this process that draws each figure into its file, then leaves at once (none of this
    process's cleanup); the copy's pid. Each file is written whole (a partial file is never seen), and only once
    the copy has claimed it (:func:`_claim`: this process may take some too). Whatever file is missing afterwards
    (the copy failed or was stopped) is the caller's to draw."""
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            for path, fig in files.items():
                if _claim(path):
                    _write_whole(path, _file(_built(fig), dpi))
            status = 0
        finally:
            os._exit(status)
    return pid


def _claim(path: Path) -> bool:
    """Take the figure of ``path`` to draw: True for the first process that asks, False for any other."""
    try:
        os.close(os.open(_claim_file(path), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        return True
    except FileExistsError:
        return False


def _claim_file(path: Path) -> Path:
    return path.with_name(f".{path.name}.claim")


def _draw(fig: Figure, dpi: int) -> bytes:
    """Where a figure this module remembers (:func:`figure_png`) or hands to a copy is drawn: one seam, so that what
    is drawn, and how often, can be watched (the tests count draws here); the kept per-run plots call
    :func:`png_bytes` directly."""
    return png_bytes(fig, dpi)


def png_bytes(fig: Figure, dpi: int = DPI) -> bytes:
    """The figure drawn now as PNG bytes (nothing remembered: see :func:`figure_png` for that), through
    :class:`PngCanvas`."""
    from pipeline.reports.png_canvas import PngCanvas

    if not isinstance(fig.canvas, PngCanvas):
        PngCanvas(fig)
    buffer = io.BytesIO()
    with _laid_out(fig, dpi):
        fig.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()


@contextlib.contextmanager
def _laid_out(fig: Figure, dpi: int) -> Any:
    """The figure's layout engine (constrained layout: the sweep's figures) run once at ``dpi``, then set aside while
    it is saved: the positions ``savefig`` would compute, without the whole figure drawn a first time with its
    output thrown away (matplotlib's way of running the engine when saving): the sweep's heat map in 0.2 s instead
    of 0.27. The same pixels (tested on every plot kind against matplotlib's own PNG)."""
    engine = fig.get_layout_engine()
    if engine is None or not fig.axes or getattr(fig, "_layout_engine", None) is not engine:
        yield  # no engine, or a matplotlib that keeps it elsewhere: savefig's own way
        return
    kept = fig.dpi
    fig.dpi = dpi
    try:
        engine.execute(fig)
    except ValueError:  # what Figure.draw lets pass (a figure too small for its margins): drawn as laid out so far
        pass
    finally:
        fig.dpi = kept
    fig._layout_engine = None  # set_layout_engine("none") leaves a placeholder, which savefig would lay out for
    try:
        yield
    finally:
        fig._layout_engine = engine


def figure_filename(name: str) -> str:
    """A safe file name for a figure: anything outside ``[A-Za-z0-9._-]`` becomes ``_``."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "figure"
    return stem if stem.endswith(".png") else stem + ".png"


def save_figures(figures: Mapping[str, Figure | bytes], directory: str | Path, dpi: int = DPI) -> list[Path]:
    """Write each figure (or PNG drawn already) as ``<directory>/<name>.png`` (directory created); returns the paths
    in order."""
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    drawn = iter(render_pngs([f for f in figures.values() if not isinstance(f, bytes)], dpi))
    for name, figure in figures.items():
        png = figure if isinstance(figure, bytes) else next(drawn)
        path = folder / figure_filename(name)
        path.write_bytes(png)
        paths.append(path)
    return paths


class Drawing:
    """Figures being saved as ``<directory>/<name>.png`` by a forked copy of this process while this one goes on
    (a job writes its other files meanwhile); :meth:`finish` waits for them, and draws here whatever the copy did not
    write. Where there is no second core (or no ``fork``), the figures are drawn at once.

    A figure may be given as the function that makes it (no argument): the copy then builds it as well as drawing
    it, so building it (tens of milliseconds of matplotlib for a job's two plots) leaves this process's path too.
    The same function makes the same figure here, if the copy fails. Figures given as picklable makers go to the
    copy that stays (:class:`_Drawer`), the others to a copy forked for them.

    A maker may give a file's bytes instead of a figure, under a full path rather than a name: a job hands its
    run file over this way (formatting 30,000 lines is about 60 ms of its path), written like a figure.

    A built figure's PNG is remembered as :func:`figure_png` remembers it: a page that shows it does not draw it
    again."""

    def __init__(self, figures: Mapping[str | Path, Made], directory: str | Path, dpi: int = DPI) -> None:
        folder = Path(directory)
        folder.mkdir(parents=True, exist_ok=True)
        self.figures = {Path(name) if isinstance(name, Path) else folder / figure_filename(name): fig
                        for name, fig in figures.items()}
        self.dpi, self.pid = dpi, 0
        for path in self.figures:  # a file left by an earlier attempt in this folder is never taken for this one
            path.unlink(missing_ok=True)
            _claim_file(path).unlink(missing_ok=True)
        self.drawer: _Drawer | None = None
        if len(self.figures) and second_core():
            self.drawer = _Drawer.take(self.figures, dpi)
            if self.drawer is None:
                self.pid = _drawn_by_a_copy(self.figures, dpi)
        else:
            self.finish()

    def finish(self, share: bool = False) -> list[Path]:
        """The files, all written (in the order the figures were given).

        With ``share`` this process draws too instead of only waiting: the copy takes the figures from the first
        on, this process from the last one back, each drawing the ones it claimed first. For a caller with nothing
        else to do: the end of a sweep, a job whose record waits for its files (a single run's copy is still drawing
        then; a sweep's has usually finished during the next job)."""
        try:
            if (self.pid or self.drawer) and share:
                for path, fig in reversed(self.figures.items()):
                    if _claim(path):
                        _write_whole(path, _file(_built(fig), self.dpi))
            if self.drawer:
                self.drawer.wait()
                self.drawer = None
            if self.pid:
                os.waitpid(self.pid, 0)
                self.pid = 0
        finally:
            self.stop()
        for path, fig in self.figures.items():
            if not path.is_file():
                path.write_bytes(_file(_built(fig), self.dpi))
            elif is_figure(fig) and _RENDERED.get(fig, (None,))[0] != self.dpi:
                _RENDERED[fig] = (self.dpi, path.read_bytes())
        return list(self.figures)

    def stop(self) -> None:
        """Stop the copy if it still runs (the files it wrote whole stay), and clear what drawing left beside
        the figures (claims, a part-written file)."""
        if self.drawer:  # still drawing this one's figures: stopped with them
            self.drawer, drawer = None, self.drawer
            drawer.kill()
        if self.pid:
            pid, self.pid = self.pid, 0
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        for path in self.figures:
            _claim_file(path).unlink(missing_ok=True)
            path.with_name(path.name + ".part").unlink(missing_ok=True)


class _Drawer:
    """A forked copy of this process that stays, drawing one :class:`Drawing`'s figures after another.

    A sweep's jobs each hand two plots over. Forking a copy per job cost the job more than the fork: the copy
    shares every page of a process of some 400 MB, so each page the job then writes is copied first (about
    21,000 page faults a job; a 12-point SciFact sweep's driver spent 1.5-2.0 s in the kernel, 0.8-1.0 s now). This
    copy is forked once per process and fed the figures' makers through a pipe; it claims and writes each file
    as :func:`_drawn_by_a_copy` does, then says it is done. Only figures given as picklable makers come here
    (a built figure or a closure goes to a copy of its own). It ignores Ctrl-C, as the store process does: the
    process that forked it decides, and kills it when a drawing is stopped. It leaves when that process has
    gone (its pipe closes)."""

    _here: _Drawer | None = None

    def __init__(self, warm: Sequence[Callable[[], object]] = ()) -> None:
        ours, theirs = Pipe()
        self.pid = os.fork()
        if self.pid == 0:
            ours.close()
            _serve_drawings(theirs, warm)
        theirs.close()
        self.owner, self.connection, self.busy = os.getpid(), ours, False

    @classmethod
    def take(cls, figures: Mapping[Path, Made], dpi: int) -> _Drawer | None:
        """This process's drawer, given ``figures`` to draw; None when they cannot go to it (a built figure, a
        maker that does not pickle, a drawer gone)."""
        if any(is_figure(f) for f in figures.values()):
            return None
        try:
            batch = pickle.dumps((dpi, list(figures.items())))
        except Exception:  # a lambda, a closure: a copy of its own draws it
            return None
        drawer = cls._here
        if drawer is None or drawer.owner != os.getpid() or drawer.busy:
            drawer = cls._here = cls()
        try:
            drawer.connection.send_bytes(batch)
        except OSError:
            drawer.kill()
            return None
        drawer.busy = True
        return drawer

    def wait(self) -> None:
        """Until the figures given last are drawn, or the drawer is gone (what it did not write, the caller
        draws)."""
        try:
            self.connection.recv_bytes()
            self.busy = False
        except (EOFError, OSError):
            self.kill()

    def kill(self) -> None:
        """Stop it now (the files it wrote whole stay); the next drawing forks another."""
        if _Drawer._here is self:
            _Drawer._here = None
        self.connection.close()
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)


def start_drawer(warm: Sequence[Callable[[], object]] = ()) -> None:
    """Fork this process's drawer now, before anything is given to it, where there is a second core: it first
    calls each of ``warm`` (what its first figures would otherwise pay for: fonts, a figure to draw the next ones
    on) while this process goes on. A sweep starts it as its first job starts, when the second core is idle."""
    here = _Drawer._here
    if second_core() and (here is None or here.owner != os.getpid()):
        _Drawer._here = _Drawer(warm)


def _serve_drawings(connection: Connection, warm: Sequence[Callable[[], object]] = ()) -> None:
    """The drawer's loop: draw each batch's figures it can claim, say so, until the pipe closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    yield_to_the_command()  # a job's files are needed only once the next job has computed: the driver goes first
    gc.freeze()  # what it inherited stays as it is: never scanned by the collector (nor copied by its scans)
    status = 0
    try:
        for step in warm:
            with contextlib.suppress(Exception):  # a warm-up only saves time: one that fails changes nothing
                step()
        while True:
            try:
                dpi, figures = pickle.loads(connection.recv_bytes())
            except EOFError:
                break
            for path, maker in figures:
                with contextlib.suppress(Exception):  # a figure that fails here is drawn (and fails) in the caller
                    if _claim(path):
                        _write_whole(path, _file(_built(maker), dpi))
            connection.send_bytes(b"done")
    except BaseException:
        status = 1
    finally:
        os._exit(status)


def _write_whole(path: Path, data: bytes) -> None:
    """Write ``path`` so that it is never seen part-written (by the process drawing beside this one)."""
    part = path.with_name(path.name + ".part")
    part.write_bytes(data)
    os.replace(part, path)


def _built(figure: Made) -> Figure | bytes:
    """A figure (or a file's bytes), made now if it was given as the function that makes it."""
    return figure if is_figure(figure) else figure()


def _file(made: Figure | bytes, dpi: int) -> bytes:
    """What a file holds: a figure's PNG, or the bytes its maker gave."""
    return made if isinstance(made, bytes) else figure_png(made, dpi)


def render_html(title: str, sections: Sequence[Section], meta: Mapping[str, str] | None = None,
                toc: bool = False, intro: str = "", lead: str = "", toc_after: int = 0) -> str:
    """The whole page as one string. ``lead`` is markup right under the title (the verdict); ``meta`` (what was
    measured: corpus, settings, versions ...) a table after it; ``intro`` markup after that (provenance, data
    notes); ``toc`` adds a table of contents linking every section, after the first ``toc_after`` sections (those
    the first screen must show)."""
    anchors = section_anchors(sections)
    parts = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>{escape(title)}</title>", f"<style>{_STYLE}</style>", "</head>", "<body>",
             f"<h1>{escape(title)}</h1>"]
    if lead:
        parts.append(lead)
    if meta:
        parts.append(facts_table(meta))
    if intro:
        parts.append(intro)
    contents = ""
    if toc and sections:
        items = "".join(f'<li><a href="#{a}">{escape(s.heading)}</a></li>' for s, a in zip(sections, anchors))
        contents = f'<nav class="toc"><strong>Contents</strong><ol>{items}</ol></nav>'
    for i, (section, anchor) in enumerate(zip(sections, anchors)):
        if i == toc_after and contents:
            parts.append(contents)
        parts.append(f'<section id="{anchor}"><h2>{escape(section.heading)}</h2>')
        for paragraph in filter(None, (p.strip() for p in section.text.split("\n\n"))):
            parts.append(f"<p>{escape(paragraph)}</p>")
        if section.table is not None:
            parts.append(table_html(section.table))
        if section.html:
            parts.append(section.html)
        if section.preformatted:
            parts.append(f"<pre>{escape(section.preformatted)}</pre>")
        if section.figure is not None:
            parts.append(figure_html(section.figure, section.heading))
        parts.append("</section>")
    if contents and toc_after >= len(sections):
        parts.append(contents)
    parts += ["</body>", "</html>"]
    return "\n".join(parts)


def section_anchors(sections: Sequence[Section]) -> list[str]:
    """Each section's id: its own ``anchor`` or a slug of its heading, made unique on the page."""
    seen: dict[str, int] = {}
    out = []
    for section in sections:
        base = section.anchor or re.sub(r"[^a-z0-9]+", "-", section.heading.lower()).strip("-") or "section"
        seen[base] = seen.get(base, 0) + 1
        out.append(base if seen[base] == 1 else f"{base}-{seen[base]}")
    return out


def figure_html(fig: Figure | bytes, fallback: str = "") -> str:
    """The figure as an embedded PNG (a data: URL), captioned with its title; a figure given as its PNG is captioned
    with ``fallback``."""
    data = base64.b64encode(fig if isinstance(fig, bytes) else figure_png(fig)).decode("ascii")
    caption = fig.axes[0].get_title() if not isinstance(fig, bytes) and fig.axes else fallback
    return (f'<figure><img src="data:image/png;base64,{data}" alt="{escape(caption)}">'
            f"<figcaption>{escape(caption)}</figcaption></figure>")


def details(summary: str, body: str, open_: bool = False) -> str:
    """A folding block: ``summary`` (plain text, escaped) always shown, ``body`` (markup) when unfolded."""
    return f"<details{' open' if open_ else ''}><summary>{escape(summary)}</summary>{body}</details>"


def link(href: str, text: str) -> str:
    """A link to a file beside the page (a relative path; escaped)."""
    return f'<a href="{escape(href)}">{escape(text)}</a>'


def paragraph(text: str, css: str = "") -> str:
    """An escaped paragraph."""
    attrs = f' class="{escape(css)}"' if css else ""
    return f"<p{attrs}>{escape(text)}</p>"


def write_report(html: str, path: str | Path) -> Path:
    """Write the report (UTF-8), creating its folder."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(html, encoding="utf-8")
    return target


def facts_table(facts: Mapping[str, str]) -> str:
    """A two-column table of named facts (the header's kind), escaped."""
    rows = "".join(f"<tr><th>{escape(str(k))}</th><td>{escape(str(v))}</td></tr>" for k, v in facts.items())
    return f'<table class="meta"><tbody>{rows}</tbody></table>'


def table_html(frame: pd.DataFrame, index: bool = True) -> str:
    """An escaped HTML table of a frame; numbers are right-aligned, floats shown to three decimals."""
    head = ([escape(str(frame.index.name or ""))] if index else []) + [escape(str(c)) for c in frame.columns]
    rows = ["<table>", "<thead><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr></thead>", "<tbody>"]
    for key, row in frame.iterrows():
        cells = [f"<th>{escape(str(key))}</th>"] if index else []
        for value in row:
            numeric = isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))
            text = f"{value:.3f}" if isinstance(value, float) else _text(value)
            cells.append(f'<td class="num">{escape(text)}</td>' if numeric else f"<td>{escape(text)}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    rows += ["</tbody>", "</table>"]
    return "\n".join(rows)


def _text(value: object) -> str:
    if isinstance(value, dict):
        return "; ".join(f"{k}: {_text(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(_text(v) for v in value)
    return str(value)
