"""Where the tests find the public collections they check against (SciFact, Cranfield), and nothing else does.

In this order: the folder the collection's variable names, the one its preset reads too (``RANKSCOPE_SCIFACT``,
``RANKSCOPE_CRANFIELD``: a BEIR-layout folder; ``pipeline.common.names.LOCAL_COPY_ENV``), ``../shared/datasets/<name>``
beside the repository (CI's), or, for SciFact, ir_datasets' own cache (``IR_DATASETS_HOME``, ``~/.ir_datasets``:
``beir/scifact/source.zip``, unpacked once per session). A test that needs a collection found nowhere is skipped with
one reason line; the trec_eval suite ships in ``tests/``.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

from pipeline.common.names import LOCAL_COPY_ENV

REPO = Path(__file__).resolve().parents[1]
SHARED_DATASETS = REPO.parent / "shared" / "datasets"
TREC_EVAL_SUITE = REPO / "tests" / "metrics" / "trec_eval"  # NIST trec_eval 10.0's test files (see _README there)
SCIFACT_ZIP = Path("beir") / "scifact" / "source.zip"  # ir_datasets' cache path for BEIR SciFact
CRANFIELD_TAR = Path("cranfield") / "cran.tar.gz"  # ir_datasets' cache path for Cranfield
IRDS_HOME_ENV = "IR_DATASETS_HOME"


def candidates(name: str) -> list[Path]:
    """Where a collection's BEIR folder may be, in order: its variable's folder, then ``../shared/datasets``."""
    named = os.environ.get(LOCAL_COPY_ENV.get(name, ""))
    return ([Path(named)] if named else []) + [SHARED_DATASETS / name]


def irds_home() -> Path:
    return Path(os.environ.get(IRDS_HOME_ENV, Path.home() / ".ir_datasets"))


USERS_IRDS_HOME = irds_home()  # before the tests point IR_DATASETS_HOME at their own (tests/conftest.py)


def collection_folder(name: str) -> Path | None:
    """The collection's BEIR folder (one holding ``queries.jsonl``), or None."""
    return next((folder for folder in candidates(name) if (folder / "queries.jsonl").is_file()), None)


def find(name: str, scratch: Path) -> Path | None:
    """The collection's BEIR folder wherever this machine has it (SciFact may be unpacked into ``scratch``)."""
    found = collection_folder(name)
    if found is None and name == "scifact":
        found = scifact_from_irds_cache(scratch)
    return found


def scifact_from_irds_cache(into: Path) -> Path | None:
    """SciFact as a BEIR folder, unpacked from ir_datasets' cached download (None when it is not there)."""
    archive = USERS_IRDS_HOME / SCIFACT_ZIP
    if not archive.is_file():
        return None
    if not (into / "scifact" / "queries.jsonl").is_file():
        with zipfile.ZipFile(archive) as packed:
            packed.extractall(into)
    return into / "scifact"


def seed_irds_home(home: Path, scifact: Path) -> Path:
    """An ``IR_DATASETS_HOME`` holding SciFact as ir_datasets downloads it (``beir/scifact/source.zip``, its corpus
    uncompressed), made from a BEIR folder: ir_datasets takes a file already at its cache path as downloaded."""
    archive = home / SCIFACT_ZIP
    archive.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as packed:
        corpus = scifact / "corpus.jsonl"
        if corpus.is_file():
            packed.write(corpus, "scifact/corpus.jsonl")
        else:
            import gzip

            with gzip.open(scifact / "corpus.jsonl.gz", "rb") as handle:
                packed.writestr("scifact/corpus.jsonl", handle.read())
        packed.write(scifact / "queries.jsonl", "scifact/queries.jsonl")
        for qrels in sorted((scifact / "qrels").glob("*.tsv")):
            packed.write(qrels, f"scifact/qrels/{qrels.name}")
    return home


def missing(name: str) -> str:
    """The one reason line of a skipped test."""
    where = ", ".join(str(folder) for folder in candidates(name))
    if name == "scifact":
        where += f" or {USERS_IRDS_HOME / SCIFACT_ZIP}"
    variable = LOCAL_COPY_ENV.get(name, "RANKSCOPE_" + name.upper())
    return f"{name} not found ({where}): set {variable} to a folder holding it in BEIR layout"


def seed_cranfield(home: Path, cranfield: Path, extra_judgments: str = "") -> Path:
    """Cranfield as ir_datasets downloads it (``cranfield/cran.tar.gz``: ``cran.all.1400``, ``cran.qry`` and
    ``cranqrel`` in the original layout), made from the BEIR copy. That copy holds gains, 5 - code, and lacks the
    original's 225 judgments of -1 (``../shared/datasets/README.md``): ``cranqrel`` gets the codes back, and
    ``extra_judgments`` (``qid docno code`` lines) is appended to it."""
    import io
    import json
    import tarfile

    def records(name: str) -> list[dict]:
        with open(cranfield / name, encoding="utf-8") as handle:
            return [json.loads(line) for line in handle if line.strip()]

    docs = "".join(f".I {d['_id']}\n.T\n{d.get('title', '')}\n.A\n\n.B\n\n.W\n{d.get('text', '')}\n"
                   for d in records("corpus.jsonl"))
    queries = "".join(f".I {n:03d}\n.W\n{q['text']}\n" for n, q in enumerate(records("queries.jsonl"), 1))
    rows = (cranfield / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()[1:]
    qrels = "".join(f"{q} {d} {5 - int(g)}\n" for q, d, g in (r.split("\t") for r in rows if r.strip()))
    archive = home / CRANFIELD_TAR
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "w:gz") as packed:
        for name, text in (("cran.all.1400", docs), ("cran.qry", queries), ("cranqrel", qrels + extra_judgments)):
            data = text.encode()
            member = tarfile.TarInfo(name)
            member.size = len(data)
            packed.addfile(member, io.BytesIO(data))
    return home
