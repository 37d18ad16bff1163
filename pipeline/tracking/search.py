"""The one way rankscope pages through MLflow's search results (a search returns at most a page at a time)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from pipeline.tracking.client import MlflowClient, Run

PAGE = 1000


def search_runs(client: MlflowClient, experiment_ids: Sequence[str], query: str = "",
                order_by: Sequence[str] | None = None) -> Iterator[Run]:
    """Every active run matching ``query``, page after page, in ``order_by`` order."""
    token = None
    while True:
        page = client.search_runs(list(experiment_ids), query, max_results=PAGE, order_by=list(order_by or []) or None,
                                  page_token=token)
        yield from page
        token = page.token
        if not token:
            return


def first_run(client: MlflowClient, experiment_ids: Sequence[str], query: str = "",
              order_by: Sequence[str] | None = None, keep: Callable[[Run], bool] | None = None) -> Run | None:
    """The first run matching ``query`` (and ``keep``), reading no more pages than needed."""
    for run in search_runs(client, experiment_ids, query, order_by):
        if keep is None or keep(run):
            return run
    return None
