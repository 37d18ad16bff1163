"""Corpus loading: documents, questions and judgments read and validated at the door into a :class:`Collection`.

Sources (``conf/corpus/*.yaml`` entries build them): a BEIR-layout folder, the embedded help-desk corpus, a public
benchmark by name, any ir_datasets id (``irds``, the one module that imports ir_datasets, and only when it reads),
and your own JSONL, CSV/TSV or Parquet files mapped by config (``files``). Every route ends in the same checks
(``assemble``), and the grades become gains there as ``corpus.grades`` says (``grades``), so the same data
reached by two routes is the same Collection, digests included.
May import: ``metrics``, ``pipeline.common``. Never MLflow, Hydra or matplotlib.
"""

from pipeline.data.beir import load_beir
from pipeline.data.collection import Collection, corpus_label
from pipeline.data.files import Judgments, OwnFiles, Table
from pipeline.data.irds import IrDatasets
from pipeline.data.sources import BeirFolder, Benchmark, CorpusSource, Helpdesk, HelpdeskPages, helpdesk

__all__ = ["BeirFolder", "Benchmark", "Collection", "CorpusSource", "Helpdesk", "HelpdeskPages", "IrDatasets",
           "Judgments", "OwnFiles", "Table", "corpus_label", "helpdesk", "load_beir"]
