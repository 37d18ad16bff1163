"""Corpus loading: documents, questions and judgments read and validated at the door into a :class:`Collection`.

Sources (``conf/corpus/*.yaml`` entries build them): a BEIR-layout folder, or the embedded help-desk corpus.
May import: ``metrics``, ``pipeline.common``. Never MLflow, Hydra or matplotlib.
"""

from pipeline.data.beir import load_beir
from pipeline.data.collection import Collection
from pipeline.data.sources import BeirFolder, CorpusSource, Helpdesk, helpdesk

__all__ = ["BeirFolder", "Collection", "CorpusSource", "Helpdesk", "helpdesk", "load_beir"]
