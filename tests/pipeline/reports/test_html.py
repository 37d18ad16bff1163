"""Self-contained pages: escaped text, sections with anchors and a table of contents, folding blocks, embedded
PNGs, figure files with safe names, each figure drawn once and several on two cores."""

from __future__ import annotations

import base64
import functools
import io
import os
import signal
from html.parser import HTMLParser

import numpy as np
import pandas as pd
import pytest

from pipeline.common.forking import HELPER_NICENESS
from pipeline.reports import html, plots
from pipeline.reports.html import (
    Drawing,
    Section,
    details,
    figure_filename,
    link,
    render_html,
    render_pngs,
    save_figures,
    section_anchors,
    write_report,
)


class Page(HTMLParser):
    """Collects the text, the tags, the ids, the image sources and the links of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.tags: list[str] = []
        self.ids: list[str] = []
        self.images: list[str] = []
        self.links: list[str] = []
        self.headings: list[str] = []
        self._in: str | None = None

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.append(attrs["id"])
        if tag == "img":
            self.images.append(attrs.get("src", ""))
        if tag == "a":
            self.links.append(attrs.get("href", ""))
        self._in = tag

    def handle_endtag(self, tag):
        self._in = None

    def handle_data(self, data):
        self.text.append(data)
        if self._in in ("h1", "h2"):
            self.headings.append(data)


def parse(html: str) -> Page:
    page = Page()
    page.feed(html)
    page.close()
    return page


def test_every_text_is_escaped():
    table = pd.DataFrame({"mrr": ["<b>0.5</b>"]}, index=pd.Index(["<script>alert(1)</script>"], name="system"))
    html = render_html("a & b <i>", [Section("x < y", "one\n\ntwo <b>", table, preformatted="<pre>")],
                       meta={"data": "<digest>"}, toc=True)
    page = parse(html)
    assert "script" not in page.tags and "i" not in page.tags and "b" not in page.tags
    text = "".join(page.text)
    assert "<script>alert(1)</script>" in text and "a & b <i>" in text and "<digest>" in text
    assert page.tags.count("p") == 2
    assert parse(details("<sum>", "<p>body</p>")).text[0] == "<sum>" and 'href="a&amp;b.csv"' in link("a&b.csv", "x")


def test_the_table_of_contents_links_every_section_by_a_unique_anchor():
    sections = [Section("Plots"), Section("Plots"), Section("Rank of the first relevant document"),
                Section("Files", anchor="files")]
    assert section_anchors(sections) == ["plots", "plots-2", "rank-of-the-first-relevant-document", "files"]
    page = parse(render_html("t", sections, toc=True))
    assert [link for link in page.links] == ["#plots", "#plots-2", "#rank-of-the-first-relevant-document", "#files"]
    assert set(page.ids) == {"plots", "plots-2", "rank-of-the-first-relevant-document", "files"}
    assert "nav" in page.tags and "nav" not in parse(render_html("t", sections)).tags


def test_figures_are_embedded_as_png_and_nothing_is_fetched():
    page = parse(render_html("t", [Section("Means", figure=bars_figure([0.5, 0.5]))]))
    [src] = page.images
    assert src.startswith("data:image/png;base64,")
    assert base64.b64decode(src.split(",", 1)[1]).startswith(b"\x89PNG")
    assert "script" not in page.tags and "link" not in page.tags


def test_save_figures_writes_non_empty_pngs_with_safe_names(tmp_path):
    paths = save_figures({"Metric means": bars_figure([0.5]), "../x": bars_figure([0.5])}, tmp_path / "plots")
    assert [p.name for p in paths] == ["Metric_means.png", "x.png"]
    for path in paths:
        assert path.stat().st_size > 1000 and path.read_bytes().startswith(b"\x89PNG")
    assert figure_filename("../../etc/ndcg@5 vs rrf") == "etc_ndcg_5_vs_rrf.png"
    report = write_report("<html></html>", tmp_path / "sweep" / "report.html")
    assert report.read_text(encoding="utf-8") == "<html></html>"


def bars_figure(heights: list[float]) -> plots.Figure:
    """A small matplotlib figure (what the per-question heat map is made of: a laid-out figure with a legend)."""
    fig = plots.new_figure(4, 3)
    ax = fig.add_subplot()
    ax.bar(range(len(heights)), heights, label="mrr")
    ax.set_title("means")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def means_figures(n: int) -> list:
    return [bars_figure([0.1 * i, 0.2]) for i in range(n)]


def test_figures_drawn_on_two_cores_are_the_figures_drawn_one_by_one():
    together = render_pngs(means_figures(5))
    alone = [html._draw(fig, html.DPI) for fig in means_figures(5)]
    assert together == alone and len(set(together)) == 5


def test_a_figure_saved_then_shown_in_a_page_is_drawn_once(tmp_path, monkeypatch):
    [fig] = means_figures(1)
    drawn = []
    real = html._draw
    monkeypatch.setattr(html, "_draw", lambda f, dpi: drawn.append(f) or real(f, dpi))
    [path] = save_figures({"means": fig}, tmp_path)
    page = parse(render_html("t", [Section("Means", figure=fig)]))
    assert len(drawn) == 1
    assert base64.b64decode(page.images[0].split(",", 1)[1]) == path.read_bytes()


def test_when_the_second_core_cannot_draw_this_process_draws_every_figure(monkeypatch):
    monkeypatch.setattr(html, "_draw", lambda f, dpi, real=html._draw: real(f, dpi) if os.getpid() == parent
                        else os._exit(3))  # the forked copy fails at once
    parent = os.getpid()
    figures = means_figures(3)
    assert render_pngs(figures) == [html._draw(f, html.DPI) for f in means_figures(3)]


def test_figures_drawn_in_the_background_are_the_files_save_figures_writes(tmp_path):
    drawing = Drawing({f"f{i}": fig for i, fig in enumerate(means_figures(3))}, tmp_path / "bg")
    written = drawing.finish()
    saved = save_figures({f"f{i}": fig for i, fig in enumerate(means_figures(3))}, tmp_path / "fg")
    assert [p.name for p in written] == [p.name for p in saved] == ["f0.png", "f1.png", "f2.png"]
    assert [p.read_bytes() for p in written] == [p.read_bytes() for p in saved]
    assert not list((tmp_path / "bg").glob("*.part"))


def test_when_the_background_copy_fails_this_process_draws_the_figures(tmp_path, monkeypatch):
    parent = os.getpid()
    monkeypatch.setattr(html, "_draw", lambda f, dpi, real=html._draw: real(f, dpi) if os.getpid() == parent
                        else os._exit(3))
    (tmp_path / "f0.png").write_bytes(b"an earlier attempt's file")
    written = Drawing({"f0": means_figures(1)[0]}, tmp_path).finish()
    assert written[0].read_bytes() == html._draw(means_figures(1)[0], html.DPI)


@pytest.mark.parametrize("copy_fails", [False, True])
def test_figures_given_as_their_makers_are_the_files_the_figures_give(tmp_path, monkeypatch, copy_fails):
    """A job hands its plots over as functions: the forked copy builds and draws them (or, when it fails, this
    process does), byte for byte the files the built figures give."""
    parent = os.getpid()
    if copy_fails:
        monkeypatch.setattr(html, "_draw", lambda f, dpi, real=html._draw: real(f, dpi) if os.getpid() == parent
                            else os._exit(3))
    made = []
    makers = {f"f{i}": (lambda i=i: made.append(i) or means_figures(2)[i]) for i in range(2)}
    written = Drawing(makers, tmp_path / "lazy").finish()
    saved = save_figures({f"f{i}": fig for i, fig in enumerate(means_figures(2))}, tmp_path / "built")
    assert [p.read_bytes() for p in written] == [p.read_bytes() for p in saved]
    forked = hasattr(os, "fork") and (os.cpu_count() or 1) > 1
    assert made == ([] if forked and not copy_fails else [0, 1])  # built in the copy, unless it failed


@pytest.mark.parametrize("copy_fails", [False, True])
def test_figures_drawn_by_both_processes_are_each_drawn_once_and_are_the_files_save_figures_writes(
        tmp_path, monkeypatch, copy_fails):
    """At a sweep's end this process draws too (from the last figure back) while the copy draws from the first:
    every figure is drawn by one of them only, the files are those drawn one by one, nothing is left beside them,
    and a page showing the figures draws none again."""
    parent, log = os.getpid(), tmp_path / "drawn.log"
    real = html._draw

    def draw(fig, dpi):
        if copy_fails and os.getpid() != parent:
            os._exit(3)
        with log.open("a") as f:  # both processes append: one line per figure drawn, and who drew it
            f.write(f"{os.getpid()} {fig.axes[0].patches[0].get_height():.1f}\n")
        return real(fig, dpi)

    monkeypatch.setattr(html, "_draw", draw)
    figures = means_figures(4)
    written = Drawing({f"f{i}": fig for i, fig in enumerate(figures)}, tmp_path / "both").finish(share=True)
    lines = log.read_text().split()
    heights = sorted(lines[1::2])
    assert heights == sorted(f"{0.1 * i:.1f}" for i in range(4))  # each figure once
    if copy_fails:
        assert set(lines[0::2]) == {str(parent)}
    saved = save_figures({f"f{i}": fig for i, fig in enumerate(means_figures(4))}, tmp_path / "one")
    assert [p.read_bytes() for p in written] == [p.read_bytes() for p in saved]
    assert sorted(p.name for p in (tmp_path / "both").iterdir()) == ["f0.png", "f1.png", "f2.png", "f3.png"]
    monkeypatch.setattr(html, "_draw", lambda fig, dpi: pytest.fail("drawn again"))
    page = parse(render_html("t", [Section(f"F{i}", figure=fig) for i, fig in enumerate(figures)]))
    assert [base64.b64decode(src.split(",", 1)[1]) for src in page.images] == [p.read_bytes() for p in written]


def made_by(log: str, i: int):
    """A picklable maker of the i-th of ``means_figures(2)`` that notes which process made it."""
    with open(log, "a") as f:
        f.write(f"{os.getpid()}\n")
    return means_figures(2)[i]


def makers(log, n: int = 2) -> dict:
    return {f"f{i}": functools.partial(made_by, str(log), i) for i in range(n)}


forks = pytest.mark.skipif(not (hasattr(os, "fork") and html.second_core()), reason="needs fork and a second core")


@forks
def test_the_plots_of_one_job_after_another_are_drawn_by_one_copy_that_stays(tmp_path):
    """A sweep's jobs hand their plots over as picklable makers: one forked copy draws them all (a fork per job
    made the job pay for copying its pages), and the files are those save_figures writes."""
    log = tmp_path / "made.log"
    first = Drawing(makers(log), tmp_path / "job0").finish()
    second = Drawing(makers(log), tmp_path / "job1").finish()
    drawers = set(log.read_text().split())
    assert len(drawers) == 1 and str(os.getpid()) not in drawers
    saved = save_figures({f"f{i}": fig for i, fig in enumerate(means_figures(2))}, tmp_path / "one")
    assert [p.read_bytes() for p in first] == [p.read_bytes() for p in second] == [p.read_bytes() for p in saved]
    assert sorted(p.name for p in (tmp_path / "job1").iterdir()) == ["f0.png", "f1.png"]


@forks
def test_when_the_copy_that_stays_is_gone_the_next_plots_are_drawn_all_the_same(tmp_path):
    log = tmp_path / "made.log"
    Drawing(makers(log), tmp_path / "job0").finish()
    [gone] = set(log.read_text().split())
    os.kill(int(gone), signal.SIGKILL)
    written = Drawing(makers(log), tmp_path / "job1").finish()
    assert [p.read_bytes() for p in written] == [html._draw(f, html.DPI) for f in means_figures(2)]


@forks
def test_the_copy_that_stays_leaves_ctrl_c_to_this_process_which_stops_it_with_a_drawing(tmp_path):
    log = tmp_path / "made.log"
    Drawing(makers(log), tmp_path / "job0").finish()
    [drawer] = set(log.read_text().split())
    os.kill(int(drawer), signal.SIGINT)  # Ctrl-C reaches the whole group: the copy leaves it to this process
    Drawing(makers(log), tmp_path / "job1").finish()
    assert set(log.read_text().split()) == {drawer}
    drawing = Drawing(makers(log, 6), tmp_path / "job2")
    drawing.stop()
    with pytest.raises(ProcessLookupError):
        os.kill(int(drawer), 0)
    assert not [p for p in (tmp_path / "job2").iterdir() if p.suffix != ".png"]  # no claim, no part-written file
    assert len(Drawing(makers(log), tmp_path / "job3").finish()) == 2  # the next drawing has a copy of its own


def file_bytes(text: str) -> bytes:
    return text.encode()


@pytest.mark.parametrize("copy_fails", [False, True])
def test_a_maker_may_give_a_files_bytes_under_a_full_path_written_with_the_figures(tmp_path, monkeypatch, copy_fails):
    """A job hands its run file over with its plots: a maker of bytes, under the path the file takes."""
    parent = os.getpid()
    if copy_fails:
        monkeypatch.setattr(html, "_file", lambda made, dpi, real=html._file: real(made, dpi)
                            if os.getpid() == parent else os._exit(3))
        if html._Drawer._here is not None:  # forked before the patch: the next copy fails
            html._Drawer._here.kill()
    beside = tmp_path / "run.trec"
    written = Drawing({"f0": functools.partial(made_by, str(tmp_path / "made.log"), 0),
                       beside: functools.partial(file_bytes, "q1 Q0 d1 1 2.5 bm25\n")}, tmp_path / "plots").finish()
    assert written == [tmp_path / "plots" / "f0.png", beside]
    assert beside.read_bytes() == b"q1 Q0 d1 1 2.5 bm25\n"
    assert written[0].read_bytes() == html._draw(means_figures(2)[0], html.DPI)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["made.log", "plots", "run.trec"]


def pixels(png: bytes):
    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(png)).convert("RGBA"))


def matplotlibs_png(fig) -> bytes:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    buffer = io.BytesIO()
    FigureCanvasAgg(fig).figure.savefig(buffer, format="png", dpi=html.DPI)
    return buffer.getvalue()


@pytest.mark.parametrize("name", ["heat map"])
def test_a_figure_is_written_as_the_pixels_matplotlib_writes_in_rgb(name):
    """Every figure rankscope draws is opaque: its PNG holds the pixels matplotlib's own PNG of a fresh copy holds,
    as RGB (a file of about the same size), with matplotlib's text chunk and resolution."""
    from PIL import Image

    from tests.pipeline.reports.test_plots import every_plot

    makers = every_plot()
    ours, theirs = html.png_bytes(makers[name]()), matplotlibs_png(makers[name]())
    assert (pixels(ours) == pixels(theirs)).all()
    image, reference = Image.open(io.BytesIO(ours)), Image.open(io.BytesIO(theirs))
    assert image.mode == "RGB" and reference.mode == "RGBA" and len(ours) < 1.05 * len(theirs)
    assert image.info["Software"] == reference.info["Software"] and image.info["dpi"] == reference.info["dpi"]


def see_through():
    fig = plots.new_figure(2, 2)
    fig.patch.set_alpha(0.0)
    fig.add_subplot().plot([0, 1], [1, 0])
    return fig


def test_a_figure_with_transparent_pixels_keeps_its_alpha():
    from PIL import Image

    png = html.png_bytes(see_through())
    assert Image.open(io.BytesIO(png)).mode == "RGBA" and (pixels(png) == pixels(matplotlibs_png(see_through()))).all()


@pytest.mark.parametrize("name", ["heat map"])
def test_a_laid_out_figure_is_drawn_once_and_keeps_its_layout_engine(name, monkeypatch):
    """The sweep's figures use constrained layout, which ``savefig`` runs by drawing the whole figure once for
    nothing: here the engine runs alone, then one draw makes the PNG (the pixels are matplotlib's: the test above).
    Afterwards the figure is laid out as before, by the same engine."""
    from matplotlib.figure import Figure

    from tests.pipeline.reports.test_plots import every_plot

    fig = every_plot()[name]()
    engine, dpi = fig.get_layout_engine(), fig.dpi
    draws = []
    drawn = Figure.draw
    monkeypatch.setattr(Figure, "draw", lambda self, renderer: draws.append(self) or drawn(self, renderer))
    html.png_bytes(fig)
    assert type(engine).__name__ == "ConstrainedLayoutEngine" and len(draws) == 1
    assert fig.get_layout_engine() is engine and fig.dpi == dpi


def warmed(log: str) -> None:
    with open(log, "a") as f:
        f.write(f"warm {os.getpid()}\n")


@forks
def test_a_drawer_started_early_warms_up_then_draws_what_it_is_given(tmp_path):
    """A sweep starts its drawing copy before its first job: the copy runs the warm-up steps (one that fails is
    skipped), then draws the jobs' plots as any drawer does."""
    if html._Drawer._here is not None:
        html._Drawer._here.kill()
    log = tmp_path / "made.log"

    def fails() -> None:
        raise RuntimeError("a warm-up that fails")

    html.start_drawer([fails, functools.partial(warmed, str(log))])
    drawer = html._Drawer._here
    assert drawer is not None and drawer.owner == os.getpid()
    html.start_drawer([])  # one per process
    assert html._Drawer._here is drawer
    written = Drawing(makers(log), tmp_path / "job0").finish()
    lines = log.read_text().split("\n")
    assert lines[0] == f"warm {drawer.pid}" and set(lines[1:3]) == {str(drawer.pid)}
    assert [p.read_bytes() for p in written] == [html._draw(f, html.DPI) for f in means_figures(2)]


def priority_of(log: str) -> None:
    """A warm-up step that writes the priority its process runs at."""
    with open(log, "a") as f:
        f.write(f"{os.getpriority(os.PRIO_PROCESS, 0)}\n")


@forks
def test_the_drawing_copy_yields_to_the_process_that_forked_it(tmp_path):
    """A job's files are needed only when the next job has computed: the copy runs at a lower priority, so that the
    driver, which sets a sweep's pace, goes first when both want a core (pipeline.common.forking)."""
    if html._Drawer._here is not None:
        html._Drawer._here.kill()
    log = tmp_path / "priority.log"
    html.start_drawer([functools.partial(priority_of, str(log))])
    Drawing(makers(tmp_path / "made.log"), tmp_path / "job0").finish()  # answered once the warm-up has run
    ours = os.getpriority(os.PRIO_PROCESS, 0)
    assert int(log.read_text()) == min(19, ours + HELPER_NICENESS)
