"""``python -m bench.traces``: what a ``retriever=traces`` job over a traced application's traces costs, against
reading the same traces with ``mlflow.search_traces`` alone (the target: the whole command at most 1.5x).

A synthetic traced RAG application (MLflow Tracing, as ``tests/pipeline/traces/rag_app.py`` is, without tantivy:
every trace a root span, a ``RETRIEVER`` span returning ``--k`` Documents of about 600 characters with ``doc_uri`` and
``score`` in their metadata, and an ``LLM`` span) answers :data:`TRACED` questions into a SQLite store through MLflow
Tracing. Writing 10,000 that way costs a few store transactions per trace (on the loaded shared 2-core machine,
100 traces took 159 s), so the rest, up to ``--traces``, are copies of those traces with new ids and their own
question, written through the call MLflow Tracing's exporter itself makes (``log_spans``), :data:`PER_CALL` traces a
call: the same rows in the same tables. Once per work folder (``--fresh`` writes them again). Then, in one process,
taking turns ``--rounds`` times after one warm-up each:

- **search_traces**: ``mlflow.search_traces(locations=[experiment], return_type="list")``, MLflow's own reading of
  the same traces, spans and assessments included (and its default pandas frame, reported beside);
- **into a run**: ``retriever=traces`` reading them (``TracedRetriever.index``) and ranking the corpus's questions
  (``rank``: every question matched to its trace, the Run built), as a job does between loading and scoring;
- **the whole command**: ``python -m pipeline corpus=files ... retriever=traces retriever.experiment=...`` as a user
  runs it, a process of its own started from the work folder (a copy of the store made before each run, untimed):
  start-up, reading and ranking, scoring with intervals, the diagnosis, the files, and the MLflow run logged with
  its 10,000 traces linked. Its corpus: :data:`DOCUMENTS` documents (the ids the traces name), the traced questions
  and one judgment each (``corpus=files``, written once in the work folder);
- **search_traces, a process**: ``python -c "import mlflow; mlflow.search_traces(...)"``, the least a script that
  reads the traces costs, for the whole command's scale.

Medians of wall time and of CPU time (this process's, or the child processes'); the ratios divide by
"search_traces" (list, in this process). The target is the whole command's.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXPERIMENT = "bench-rag-app"
WORDS = ("retrieval", "ranking", "judgment", "question", "document", "index", "query", "score", "metric", "trace",
         "span", "model", "answer", "context", "chunk", "vector", "lexical", "dense", "hybrid", "fusion")


def question(i: int) -> str:
    return f"question {i}: how does {WORDS[i % 20]} relate to {WORDS[(i // 20) % 20]} and {WORDS[(i // 400) % 20]}?"


def write(uri: str, start: int, stop: int, k: int) -> None:
    """Answer questions ``start`` to ``stop`` with the synthetic application, one trace each."""
    os.environ["MLFLOW_ENABLE_ASYNC_TRACE_LOGGING"] = "false"
    import mlflow
    from mlflow.entities import Document, SpanType

    mlflow.set_tracking_uri(uri)
    mlflow.set_experiment(EXPERIMENT)
    text = " ".join(WORDS) * 3  # ~600 characters, a chunk's size

    @mlflow.trace(span_type=SpanType.RETRIEVER)
    def retrieve(query: str, k: int) -> list:
        base = hash(query) % 5000
        return [Document(page_content=text, metadata={"doc_uri": f"d{(base + 37 * j) % 5000}", "score": 10.0 - j})
                for j in range(k)]

    @mlflow.trace(span_type=SpanType.LLM)
    def generate(question: str, context: list) -> str:
        return context[0].page_content[:80]

    @mlflow.trace
    def answer(question: str) -> str:
        return generate(question, retrieve(question, k))

    for i in range(start, stop):
        answer(question(i))


TRACED = 100  # traces the application writes through MLflow Tracing; the others are copies of them
PER_CALL = 500  # traces written per log_spans call


def copies(uri: str, traces: int, k: int) -> None:
    """Copies of the application's traces, each with new trace and span ids, its own question and documents, and
    the times of now, until the experiment holds ``traces``; written through MLflow's ``log_spans``."""
    import base64
    import copy
    import json
    import secrets

    from mlflow import MlflowClient
    from mlflow.entities import Span
    from mlflow.tracing.client import TracingClient

    client = TracingClient(uri)
    reader = MlflowClient(uri)
    experiment = reader.get_experiment_by_name(EXPERIMENT).experiment_id
    templates = [[s.to_dict() for s in t.data.spans]
                 for t in reader.search_traces(locations=[experiment], max_results=TRACED)]
    batch: list = []
    now = time.time_ns()
    for i in range(TRACED, traces):
        spans = copy.deepcopy(templates[i % len(templates)])
        otel = secrets.token_bytes(16)
        trace_id = "tr-" + otel.hex()
        ids = {s["span_id"]: base64.b64encode(secrets.token_bytes(8)).decode() for s in spans}
        shift = now + i * 1_000_000 - min(s["start_time_unix_nano"] for s in spans)
        base = (i * 7919) % 5000
        for s in spans:
            s["trace_id"] = base64.b64encode(otel).decode()
            s["span_id"] = ids[s["span_id"]]
            if s.get("parent_span_id"):
                s["parent_span_id"] = ids[s["parent_span_id"]]
            s["start_time_unix_nano"] += shift
            s["end_time_unix_nano"] += shift
            attributes = s["attributes"]
            attributes["mlflow.traceRequestId"] = json.dumps(trace_id)
            if s.get("parent_span_id") is None:
                attributes["mlflow.spanInputs"] = json.dumps({"question": question(i)})
            if json.loads(attributes.get("mlflow.spanType", "null")) == "RETRIEVER":
                attributes["mlflow.spanInputs"] = json.dumps({"query": question(i), "k": k})
                documents = json.loads(attributes["mlflow.spanOutputs"])
                for j, document in enumerate(documents):
                    document["metadata"]["doc_uri"] = f"d{(base + 37 * j) % 5000}"
                attributes["mlflow.spanOutputs"] = json.dumps(documents)
        batch += [Span.from_dict(s) for s in spans]
        if (i + 1 - TRACED) % PER_CALL == 0 or i == traces - 1:
            client.log_spans(experiment, batch)
            batch = []


def ensure_store(work: Path, traces: int, k: int, fresh: bool) -> str:
    db = work / "traces.db"
    uri = f"sqlite:///{db}"
    marker = work / f"traces-{traces}-{k}.done"
    if marker.is_file() and db.is_file() and not fresh:
        return uri
    db.unlink(missing_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "bench.traces", "--write", uri, "0", str(min(TRACED, traces)), str(k)],
                   cwd=HERE.parent, check=True)
    traced = time.perf_counter() - started
    if traces > TRACED:
        copies(uri, traces, k)
    print(f"wrote {min(TRACED, traces)} traces through MLflow Tracing in {traced:.0f} s, then "
          f"{max(0, traces - TRACED):,} copies in {time.perf_counter() - started - traced:.0f} s", file=sys.stderr)
    marker.write_text("")
    return uri


DOCUMENTS = 5000  # the document ids the traces name: d0 ... d4999


class Corpus:
    """What the retriever indexes: the documents the traces name."""

    def __init__(self) -> None:
        self.doc_ids = [f"d{i}" for i in range(DOCUMENTS)]
        self.doc_texts = [""] * DOCUMENTS


def write_corpus(folder: Path, traces: int) -> list[str]:
    """The whole command's corpus (documents, the traced questions, one judgment each) in ``folder``; its overrides.
    A document's text is seven words, so the diagnosis has terms to weigh; a question's judged document is the one
    its trace lists at place ``i % 15`` (past the tenth: not retrieved)."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "documents.jsonl").open("w", encoding="utf-8") as out:
        for j in range(DOCUMENTS):
            words = [WORDS[(j * p) % 20] for p in (1, 3, 7, 11, 13)] + [f"w{j % 97}", f"v{j % 89}"]
            out.write(json.dumps({"id": f"d{j}", "text": " ".join(words)}) + "\n")
    with (folder / "questions.jsonl").open("w", encoding="utf-8") as out:
        for i in range(traces):
            out.write(json.dumps({"id": f"q{i}", "text": question(i)}) + "\n")
    with (folder / "judgments.csv").open("w", encoding="utf-8") as out:
        out.write("query_id,doc_id,grade\n")
        for i in range(traces):
            out.write(f"q{i},d{(i * 7919 + 37 * (i % 15)) % DOCUMENTS},1\n")
    return ["corpus=files", "corpus.name=bench-traces", "corpus.documents.path=documents.jsonl",
            "corpus.questions.path=questions.jsonl", "corpus.judgments.path=judgments.csv", "retriever=traces",
            f"retriever.experiment={EXPERIMENT}"]


def cpu() -> float:
    """CPU seconds of this process and of its children that have ended."""
    return sum(u.ru_utime + u.ru_stime for u in (resource.getrusage(resource.RUSAGE_SELF),
                                                 resource.getrusage(resource.RUSAGE_CHILDREN)))


def timed(action) -> tuple[float, float]:
    wall, used = time.perf_counter(), cpu()
    action()
    return time.perf_counter() - wall, cpu() - used


def child(command: list[str], cwd: Path) -> str:
    """Run ``command`` from ``cwd`` with this checkout first on the path; its output, or an error with its end."""
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [
                              str(HERE.parent), os.environ.get("PYTHONPATH")]))})
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command[:4])} ... failed ({done.returncode}): {done.stderr[-2000:]}")
    return done.stdout


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.traces", description=__doc__.split("\n\n")[0])
    p.add_argument("--traces", type=int, default=10_000)
    p.add_argument("--k", type=int, default=10, help="documents per retriever span")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--work", type=Path, default=HERE / "results" / "traces")
    p.add_argument("--fresh", action="store_true", help="write the traces again")
    p.add_argument("--write", nargs=4, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.write:
        uri, a, b, k = args.write
        write(uri, int(a), int(b), int(k))
        return 0
    uri = ensure_store(args.work, args.traces, args.k, args.fresh)

    import mlflow

    from pipeline.traces.retriever import TracedRetriever
    from retrievers.base import BuildContext

    client = mlflow.MlflowClient(uri)
    experiment = client.get_experiment_by_name(EXPERIMENT).experiment_id
    mlflow.set_tracking_uri(uri)
    ids = [f"q{i}" for i in range(args.traces)]
    texts = [question(i) for i in range(args.traces)]
    corpus = Corpus()
    counted: dict[str, int] = {}

    def search_list() -> None:
        counted["search_traces"] = len(mlflow.search_traces(locations=[experiment], return_type="list"))

    def search_pandas() -> None:
        counted["search_traces (pandas)"] = len(mlflow.search_traces(locations=[experiment]))

    def into_run() -> None:
        retriever = TracedRetriever.from_config(BuildContext(base=args.work), experiment=EXPERIMENT, tracking_uri=uri)
        run = retriever.index(corpus).rank(ids, texts, 100)
        counted["into a run"] = int((run.lengths > 0).sum())

    whole = args.work / "whole"
    overrides = write_corpus(whole, args.traces)
    script = (f"import sys, mlflow; e = mlflow.MlflowClient(sys.argv[1]).get_experiment_by_name({EXPERIMENT!r})"
              f".experiment_id; mlflow.set_tracking_uri(sys.argv[1]); "
              f"print(len(mlflow.search_traces(locations=[e], return_type='list')))")

    def command() -> None:
        said = child([sys.executable, "-m", "pipeline", *overrides, "quiet=true"], whole)
        counted["the whole command"] = int(said.split("rankings from ")[1].split()[0]) if "rankings from " in said \
            else args.traces

    def search_process() -> None:
        counted["search_traces, a process"] = int(child([sys.executable, "-c", script, uri], whole).split()[-1])

    def fresh_store() -> None:  # before each whole command, untimed: its run and links do not pile up
        shutil.copyfile(args.work / "traces.db", whole / "mlflow.db")
        shutil.rmtree(whole / "outputs", ignore_errors=True)
        shutil.rmtree(whole / "mlartifacts", ignore_errors=True)

    measures = {"search_traces": search_list, "into a run": into_run, "the whole command": command,
                "search_traces, a process": search_process, "search_traces (pandas)": search_pandas}
    found: dict[str, list[tuple[float, float]]] = {name: [] for name in measures}
    for name, action in measures.items():  # warm-up: imports, the database's pages in the OS cache
        if name == "the whole command":
            fresh_store()
        action()
    for _ in range(args.rounds):
        for name, action in measures.items():
            if name == "the whole command":
                fresh_store()
            found[name].append(timed(action))
    wall = {n: statistics.median(w for w, _ in v) for n, v in found.items()}
    used = {n: statistics.median(c for _, c in v) for n, v in found.items()}
    base = "search_traces"
    load = os.getloadavg()
    lines = [f"`python -m bench.traces --traces {args.traces} --k {args.k} --rounds {args.rounds}`, "
             f"{time.strftime('%Y-%m-%d %H:%M')}; CPython {sys.version.split()[0]}, mlflow {mlflow.__version__}, "
             f"{os.cpu_count()} cores, load average at the end {load[0]:.1f}, {load[1]:.1f}, {load[2]:.1f}.", "",
             "| reading | traces | wall s (median) | CPU s (median) | ratio to search_traces (wall) | ratio (CPU) |",
             "|---|---:|---:|---:|---:|---:|"]
    for name in measures:
        lines.append(f"| {name} | {counted[name]:,} | {wall[name]:.2f} | {used[name]:.2f} | "
                     f"{wall[name] / wall[base]:.2f} | {used[name] / used[base]:.2f} |")
    ratio = wall["the whole command"] / wall[base]
    lines += ["", f"Into a run / search_traces: {wall['into a run'] / wall[base]:.2f}x wall, "
                  f"{used['into a run'] / used[base]:.2f}x CPU.",
              f"The whole command / search_traces: {ratio:.2f}x wall, "
              f"{used['the whole command'] / used[base]:.2f}x CPU (target: at most 1.5x): "
              f"{'met' if ratio <= 1.5 else 'NOT met'}; / search_traces as a process: "
              f"{ratio * wall[base] / wall['search_traces, a process']:.2f}x."]
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
