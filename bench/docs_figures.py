"""``python -m bench.docs_figures [--write]``: the guides' printed outputs and quoted figures, measured again.

Two kinds of text in README.md and docs/*.md come from here, so that none goes stale quietly:

- **Runnable blocks.** A fenced block after the line ``<!-- runnable: its output follows -->`` is run as a reader
  types it (``python`` blocks with this interpreter, other blocks with ``bash -c``), and the next fenced block is
  what it prints. Each runs in a fresh temporary folder that links to the repository's files (so a path such as
  ``pipeline/data/helpdesk/qrels/test.tsv`` reads as from the repository root) and keeps what the block writes
  (``mlflow.db``, ``outputs/``) out of the repository; ``python`` on PATH is this interpreter. Its output, stdout
  and stderr as a terminal shows them, is compared after a few normalisations, each a word the guides explain once:
  the temporary folder prints as ``FOLDER``, the home folder as ``~``, an MLflow run id (32 hex digits) as
  ``RUN_ID``; trailing spaces and blank lines at either end are dropped. tests/test_docs.py runs the same blocks.
  ``<!-- runnable on scifact: its output follows -->`` marks a block that needs SciFact: it runs with
  ``RANKSCOPE_SCIFACT`` naming the local copy (:data:`bench.paths.SCIFACT`), and is left as quoted where there is
  none (tests/test_docs.py runs it in the slow suite). An output shown as an excerpt has ``...`` lines: each stands
  for any lines the command prints there (none included), and the lines around them must appear as shown, in order,
  the first at the start and the last at the end; rewriting keeps the excerpt's lines, taken from the new output.
- **Figures.** A timing or size the guides quote is written between markers,
  ``<!-- figure: make_run_s -->3.4 s<!-- /figure -->`` (the comments do not show in the rendered page), and named
  in :data:`MEASURES` with how it is measured. A timing is stale when a new measurement is more than twice or less
  than half the quoted one (the machine's load moves seconds by a fifth and more); a size when it moved by more
  than 10%; a count when it differs.

Without ``--write`` it prints what would change (a diff) and exits 1 if anything is stale, else 0; ``--write``
rewrites the pages in place. ``--no-blocks`` / ``--no-figures`` leave a part out, ``--figures a,b`` measures only
those, ``--pages metrics.md,glossary.md`` looks at those pages only. The figures and blocks on SciFact need a local
copy (``RANKSCOPE_SCIFACT``, else ``../shared/datasets/scifact``; left as quoted without it).
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.latency import migrated_store, until_healthy
from bench.paths import REPO, SCIFACT, SCIFACT_ENV

PY = sys.executable
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

# --- runnable blocks ----------------------------------------------------------------------------------------------

MARK = "<!-- runnable: its output follows -->"
MARKS = {MARK: None, "<!-- runnable on scifact: its output follows -->": "scifact"}  # mark -> the data it needs
BLOCK = re.compile(r"^(`{3,})([\w-]*)[ \t]*\n(.*?)^\1[ \t]*$", re.MULTILINE | re.DOTALL)
ELLIPSIS = "..."  # a line of an output block that stands for any lines
RUN_ID = re.compile(r"\b[0-9a-f]{32}\b")
LEFT_OUT = {".git", ".venv", "outputs", "multirun", "mlruns", "mlartifacts", "mlflow.db"}  # never linked


@dataclass
class Block:
    """A runnable block of a page: its language, code, the output the page shows and where that output sits, and the
    collection it needs (None: none)."""

    language: str
    code: str
    expected: str
    span: tuple[int, int]  # the output block's content in the page's text
    needs: str | None = None


def runnable_blocks(text: str, name: str = "page") -> list[Block]:
    """Each block after a mark, with the next fenced block as its output, in the page's order."""
    found = []
    for mark, needs in MARKS.items():
        start = text.find(mark)
        while start != -1:
            blocks = list(BLOCK.finditer(text, start + len(mark)))[:2]
            if len(blocks) < 2:
                raise ValueError(f"{name}: a runnable block without its output block after it")
            code, output = blocks
            found.append(Block(code.group(2), code.group(3), output.group(3), output.span(3), needs))
            start = text.find(mark, start + len(mark))
    return sorted(found, key=lambda block: block.span)


def segments(expected: str) -> list[list[str]]:
    """An output's lines between its ``...`` lines (one segment: the whole output, to be printed exactly)."""
    parts: list[list[str]] = [[]]
    for line in expected.strip("\n").splitlines():
        if line.strip() == ELLIPSIS:
            parts.append([])
        else:
            parts[-1].append(line)
    return parts


def _find(lines: list[str], segment: list[str], start: int) -> int:
    for at in range(start, len(lines) - len(segment) + 1):
        if lines[at:at + len(segment)] == segment:
            return at
    return -1


def matches(expected: str, printed: str) -> bool:
    """Whether ``printed`` is what the page shows: the same text, or, for an excerpt, every segment in order (the
    first at the start, the last at the end)."""
    parts = segments(expected)
    if len(parts) == 1:
        return printed == expected.strip("\n")
    lines = printed.splitlines()
    first, *middle, last = parts
    if lines[:len(first)] != first:
        return False
    at = len(first)
    for segment in middle:
        found = _find(lines, segment, at)
        if found < 0:
            return False
        at = found + len(segment)
    return len(lines) - len(last) >= at and lines[len(lines) - len(last):] == last


def excerpt(expected: str, printed: str) -> str:
    """The new output as the page shows it: the whole of it, or the excerpt's lines taken from it, each segment where
    the output is most like it (the first at the start, the last at the end)."""
    parts = segments(expected)
    if len(parts) == 1:
        return printed
    lines = printed.splitlines()
    first, *middle, last = parts
    taken, at = [lines[:len(first)]], len(first)
    for segment in middle:
        windows = range(at, max(at, len(lines) - len(segment) - len(last)) + 1)
        best = max(windows, key=lambda w: difflib.SequenceMatcher(
            None, "\n".join(segment), "\n".join(lines[w:w + len(segment)])).ratio())
        taken.append(lines[best:best + len(segment)])
        at = best + len(segment)
    taken.append(lines[len(lines) - len(last):] if last else [])
    return f"\n{ELLIPSIS}\n".join("\n".join(part) for part in taken).strip("\n")


def normalise(output: str, folder: Path) -> str:
    """What the page shows for ``output``: the folder as FOLDER, the home as ~, run ids as RUN_ID, no line's end
    spaces, no blank lines at either end."""
    for path in sorted({str(folder), os.path.realpath(folder)}, key=len, reverse=True):
        output = output.replace(path, "FOLDER")
    home = os.path.expanduser("~")
    if home not in ("", "/"):
        output = output.replace(home, "~")
    output = RUN_ID.sub("RUN_ID", output)
    return "\n".join(line.rstrip() for line in output.splitlines()).strip("\n")


def block_folder(folder: Path) -> None:
    """Link the repository's top-level files into ``folder``: paths read as from the root, writes stay there."""
    for entry in REPO.iterdir():
        if entry.name not in LEFT_OUT and not entry.name.startswith("mlflow.db"):
            (folder / entry.name).symlink_to(entry)


def block_environment(folder: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    env.update(PATH=os.pathsep.join([os.path.dirname(PY), env.get("PATH", "")]), PYTHONPATH=str(folder),
               COLUMNS="80", NO_COLOR="1")
    return env


def data_environment(needs: str | None) -> dict[str, str] | None:
    """The variables a block that needs ``needs`` runs with; None when this machine has no copy of it."""
    if needs is None:
        return {}
    if needs == "scifact" and SCIFACT.is_dir():
        return {SCIFACT_ENV: str(SCIFACT)}
    return None


def run_block(language: str, code: str, timeout: float = 1800, env: dict[str, str] | None = None) -> str:
    """What the block prints, run in a fresh folder as described above (``env`` added), normalised."""
    with tempfile.TemporaryDirectory(prefix="rankscope-docs-") as name:
        folder = Path(name)
        block_folder(folder)
        command = [PY, "-c", code] if language == "python" else ["bash", "-c", code]
        done = subprocess.run(command, cwd=folder, env={**block_environment(folder), **(env or {})},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
        return normalise(done.stdout, folder)


def with_outputs(text: str, blocks: list[Block], outputs: list[str | None]) -> str:
    """The page with each block's output block holding the given output."""
    for block, output in sorted(zip(blocks, outputs, strict=True), key=lambda pair: -pair[0].span[0]):
        if output is None:  # not run here (its data is missing): left as quoted
            continue
        start, end = block.span
        text = text[:start] + excerpt(block.expected, output.strip("\n")) + "\n" + text[end:]
    return text


# --- figures ------------------------------------------------------------------------------------------------------

FIGURE = re.compile(r"<!-- figure: ([a-z0-9_]+) -->(.*?)<!-- /figure -->")
NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")


@dataclass
class Figure:
    text: str  # as the page shows it
    value: float
    kind: str  # seconds, bytes or count
    how: str  # how it was measured, printed beside it

    def stale(self, quoted: str) -> bool:
        found = NUMBER.search(quoted)
        if not found:
            return True
        old = float(found.group().replace(",", ""))
        if self.kind == "seconds":
            return not (0.5 <= self.value / old <= 2) if old else True
        if self.kind == "bytes":
            return abs(self.value - old) > 0.1 * old
        return self.value != old


def machine() -> str:
    return f"os.cpu_count() = {os.cpu_count()}, load average {os.getloadavg()[0]:.1f} before"


def timed_in_empty_folder(command: list[str], env: dict[str, str] | None = None) -> tuple[float, float, Path]:
    """Wall and CPU seconds (this process's waited children) of ``command`` in a new empty folder, kept."""
    folder = Path(tempfile.mkdtemp(prefix="rankscope-figures-"))
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    environment.update(PYTHONPATH=str(REPO), RANKSCOPE_CACHE_DIR=str(folder / "cache"), **(env or {}))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, cwd=folder, env=environment, check=True, capture_output=True, timeout=3600)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, folder


def seconds(value: float) -> str:
    return f"{value:.1f} s" if value < 100 else f"{value / 60:.1f} min"


def wall_and_cpu(name: str, arguments: list[str], env: dict[str, str] | None = None) -> dict[str, Figure]:
    """``name_s`` and ``name_cpu_s``: one ``python -m pipeline ARGUMENTS`` in an empty folder, cold cache."""
    how = f"python -m pipeline {' '.join(arguments)} in an empty folder, empty cache; {machine()}"
    wall, cpu, folder = timed_in_empty_folder([PY, "-m", "pipeline", *arguments], env)
    shutil.rmtree(folder, ignore_errors=True)
    return {f"{name}_s": Figure(seconds(wall), wall, "seconds", f"wall, {how}"),
            f"{name}_cpu_s": Figure(seconds(cpu), cpu, "seconds", f"CPU, {how}")}


def scifact_env() -> dict[str, str] | None:
    return data_environment("scifact")


REPORT_SWEEP = ["corpus=scifact", "metrics=beir", "retriever.k1=0.6,0.9,1.2,1.5", "retriever.b=0.3,0.6,0.9"]


def report_size() -> dict[str, Figure]:
    env = scifact_env()
    if env is None:
        return {}
    how = f"python -m pipeline -m {' '.join(REPORT_SWEEP)}; its report.html"
    _, _, folder = timed_in_empty_folder([PY, "-m", "pipeline", "-m", *REPORT_SWEEP, "hydra.sweep.dir=sweep"], env)
    size = (folder / "sweep" / "report.html").stat().st_size
    shutil.rmtree(folder, ignore_errors=True)
    return {"report_html_bytes": Figure(f"{size:,} bytes", size, "bytes", how)}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ui_start(repeats: int = 3) -> dict[str, Figure]:
    """Seconds until /health answers: ``python -m pipeline.ui`` (what make ui runs), ``mlflow ui --workers 1``."""
    with tempfile.TemporaryDirectory(prefix="rankscope-figures-") as name:
        db = migrated_store(Path(name) / "ui.db")
        port = free_port()
        ours = [PY, "-m", "pipeline.ui", "--backend-store-uri", f"sqlite:///{db}", "--port", str(port),
                "--no-browser"]
        theirs = [PY, "-m", "mlflow", "ui", "--backend-store-uri", f"sqlite:///{db}", "--host", "127.0.0.1",
                  "--port", str(port), "--workers", "1"]
        how = f"until /health answers, median of {repeats} starts on an existing store; {machine()}"
        found = {"ui_start_s": until_healthy(ours, repeats, port), "mlflow_ui_start_s": until_healthy(theirs, repeats,
                                                                                                      port)}
    return {key: Figure(seconds(value), value, "seconds", how) for key, value in found.items()}


def cores() -> dict[str, Figure]:
    count = os.cpu_count() or 1
    return {"cores": Figure(str(count), count, "count", "os.cpu_count() of the machine that measured the timings")}


# Each measure gives the figures it names; the SciFact ones need a local copy (bench.paths.SCIFACT).
MEASURES: dict[tuple[str, ...], Callable[[], dict[str, Figure]]] = {
    ("cores",): cores,
    ("one_run_s", "one_run_cpu_s"): lambda: wall_and_cpu("one_run", []),
    ("make_run_s", "make_run_cpu_s"): lambda: wall_and_cpu("make_run", ["-m", "experiment=helpdesk_study"]),
    ("helpdesk_dense_s", "helpdesk_dense_cpu_s"): lambda: wall_and_cpu("helpdesk_dense",
                                                                       ["-m", "experiment=helpdesk_dense"]),
    ("tune_s", "tune_cpu_s"): lambda: (wall_and_cpu("tune", ["-m", "experiment=tune_bm25_scifact"], scifact_env())
                                       if scifact_env() else {}),
    ("report_html_bytes",): report_size,
    ("ui_start_s", "mlflow_ui_start_s"): ui_start,
}
KNOWN = {name for names in MEASURES for name in names}


def with_figures(text: str, figures: dict[str, Figure], write: bool) -> str:
    """The page with each marked figure replaced: every measured one when writing, else only the stale ones."""

    def replace(match: re.Match) -> str:
        figure = figures.get(match.group(1))
        if figure is None or not (write or figure.stale(match.group(2))):
            return match.group(0)
        return f"<!-- figure: {match.group(1)} -->{figure.text}<!-- /figure -->"

    return FIGURE.sub(replace, text)


def figure_names(text: str) -> list[str]:
    return [name for name, _ in FIGURE.findall(text)]


# --- the command --------------------------------------------------------------------------------------------------


def measure(only: set[str] | None, wanted: set[str]) -> dict[str, Figure]:
    figures: dict[str, Figure] = {}
    for names, function in MEASURES.items():
        if wanted.isdisjoint(names) or (only is not None and only.isdisjoint(names)):
            continue
        for name, figure in function().items():
            figures[name] = figure
            print(f"{name}: {figure.text} ({figure.how})", file=sys.stderr)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.docs_figures", description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="rewrite the pages in place (default: show a diff)")
    parser.add_argument("--no-blocks", action="store_true", help="leave the runnable blocks out")
    parser.add_argument("--no-figures", action="store_true", help="leave the measured figures out")
    parser.add_argument("--figures", help="measure only these figures (comma-separated names)")
    parser.add_argument("--pages", help="only these pages' blocks and figures (comma-separated names: metrics.md)")
    args = parser.parse_args(argv)
    pages = [page for page in PAGES if not args.pages or page.name in args.pages.split(",")]
    texts = {page: page.read_text(encoding="utf-8") for page in pages}
    new = dict(texts)
    if not args.no_blocks:
        for page, text in texts.items():
            blocks = runnable_blocks(text, page.name)
            outputs = [run_block(b.language, b.code, env=env) if (env := data_environment(b.needs)) is not None
                       else None for b in blocks]
            if blocks:
                print(f"{page.relative_to(REPO)}: {len(blocks)} runnable block(s) run", file=sys.stderr)
            new[page] = with_outputs(text, blocks, outputs)
    if not args.no_figures:
        wanted = {name for text in texts.values() for name in figure_names(text)}
        unknown = wanted - KNOWN
        if unknown:
            print(f"{parser.prog}: figures no measure knows: {', '.join(sorted(unknown))}", file=sys.stderr)
            return 2
        only = set(args.figures.split(",")) if args.figures else None
        figures = measure(only, wanted | (only or set()))
        new = {page: with_figures(text, figures, args.write) for page, text in new.items()}
    changed = [page for page in pages if new[page] != texts[page]]
    for page in changed:
        name = page.relative_to(REPO).as_posix()
        if args.write:
            page.write_text(new[page], encoding="utf-8")
            print(f"rewritten: {name}", file=sys.stderr)
        else:
            sys.stdout.writelines(difflib.unified_diff(texts[page].splitlines(keepends=True),
                                                       new[page].splitlines(keepends=True), name, name))
    if changed and not args.write:
        print(f"{len(changed)} page(s) stale; python -m bench.docs_figures --write rewrites them", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
