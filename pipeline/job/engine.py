"""A job's retriever at work: indexing the documents and ranking every question (in batches), its failures told as
bad input (a setting the corpus does not allow) or, for a user's own retriever, as that engine's failure with the
question it raised on (``retrievers.external.engine_failed``); any other exception is a bug of rankscope's."""

from __future__ import annotations

from typing import TYPE_CHECKING

from omegaconf import DictConfig

from metrics.errors import InputError
from pipeline.job.batches import rank_in_batches
from retrievers.external import engine_failed

if TYPE_CHECKING:
    from metrics.run import Run
    from pipeline.data.collection import Collection
    from pipeline.job.reuse import JobReuse
    from retrievers import Retriever

OURS = ("retrievers", "pipeline", "metrics")  # packages whose exceptions are rankscope's bugs


def users(retriever: Retriever) -> bool:
    """Whether ``retriever`` is a user's own ``Retriever`` subclass (a user's ``search`` engine is behind
    ``retrievers.external.ExternalSearch``, which reports its failures itself)."""
    return type(retriever).__module__.partition(".")[0] not in OURS


def engine_name(retriever: Retriever) -> str:
    return f"{type(retriever).__module__}.{type(retriever).__qualname__}"


def index(retriever: Retriever, reuse: JobReuse, node: DictConfig, collection: Collection) -> None:
    """Index the collection's documents (components an earlier job indexed are shared)."""
    try:
        reuse.share_components(retriever, node, collection)
        retriever.index(reuse.documents(collection))
    except ValueError as exc:  # e.g. LSA dims beyond what the corpus allows
        if isinstance(exc, InputError):
            raise
        raise InputError(f"retriever {retriever.name}: {exc}") from None
    except Exception as exc:
        if not users(retriever):
            raise
        raise engine_failed(engine_name(retriever), exc, "index()", [], []) from None


def rank(retriever: Retriever, reuse: JobReuse, node: DictConfig, collection: Collection, depth: int,
         system: str) -> Run:
    """Every question's ranking to ``depth`` (a ranking an earlier job made is reused)."""
    ids, texts = collection.query_ids, collection.query_texts
    try:
        return rank_in_batches(reuse.ranking(retriever, node, collection), ids, texts, depth,
                              len(collection.doc_ids), f"ranking ({system})")
    except InputError:
        raise
    except Exception as exc:
        if not users(retriever):
            raise
        raise engine_failed(engine_name(retriever), exc, "rank()", ids, texts,
                            lambda i: retriever.rank(ids[i : i + 1], texts[i : i + 1], depth)) from None
