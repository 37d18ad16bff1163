"""Every name rankscope writes that someone else reads: MLflow tags, files in job and sweep folders, prefixes.

Defined once here and imported everywhere (a tag re-typed as a literal elsewhere is how two modules drift apart).
"""

from __future__ import annotations

PROG = "rankscope"
SAYS_COMPARE, SAYS_GATE, SAYS_SYNC = f"{PROG} compare", f"{PROG} gate", f"{PROG} sync"  # how their lines start

# -- MLflow tags ----------------------------------------------------------------------------------------------
TAG_KIND = "rankscope.kind"  # 'sweep', 'job' or 'run'; 'comparison'; in tuning sweeps 'trial', 'tuned', 'untuned'
TAG_SYSTEM = "rankscope.system"  # the system's display name ('BM25 k1=0.9')
TAG_JOB = "rankscope.job"  # the job's number in its sweep
TAG_ERROR = "rankscope.error"  # why a run FAILED
TAG_SWEEP_DIR = "rankscope.sweep_dir"
TAG_OVERRIDES = "rankscope.overrides"  # the command-line overrides that made the run
TAG_OUTPUT_DIR = "rankscope.output_dir"
TAG_LAUNCHER = "rankscope.launcher"
TAG_CORPUS = "rankscope.corpus"  # the corpus's name
TAG_CORPUS_DIGEST = "rankscope.corpus_digest"  # documents, questions and judgments together
TAG_DOCUMENTS_DIGEST = "rankscope.documents_digest"  # each part on its own: the same data by any route
TAG_QUESTIONS_DIGEST = "rankscope.questions_digest"
TAG_QRELS_DIGEST = "rankscope.qrels_digest"  # the judgments' version
TAG_CORPUS_SOURCE = "rankscope.corpus_source"  # where it was read: a folder, files, or ir_datasets:ID
TAG_IRDS_ID = "rankscope.ir_datasets_id"  # the ir_datasets id, when the corpus came through ir_datasets
TAG_GRADES = "rankscope.grades"  # how the judgments' grades became gains (corpus.grades), when not as read
DATASET_CONTEXT = "mlflow.data.context"  # MLflow's own input tag: what the dataset was used for
TAG_JUDGMENTS = "rankscope.judgments"  # the judgments file the job read: which split it was scored on
TAG_RESOLVED = "rankscope.resolved"  # settings a retriever resolved itself: 'retriever.dims=6' for dims: null
TAG_NOTES = "rankscope.notes"  # what the job went on with (dropped judgments, empty texts ...): one line per kind
TAG_RANKINGS_FROM = "rankscope.rankings_from"  # where a run's rankings came from, when not computed (MLflow traces)
TAG_CONFIG_DIGEST = "rankscope.config_digest"
TAG_CODE_VERSION = "rankscope.code_version"
TAG_VERSION = "rankscope.version"
TAG_RECORD = "rankscope.record"  # the job record a run was logged from
TAG_SUPERSEDED_BY = "rankscope.superseded_by"
TAG_TUNE_ROLE = "rankscope.tune.role"  # 'tuned/tuning', 'tuned/holdout', 'untuned/tuning', 'untuned/holdout'
TAG_SWEEP_PARENT = "rankscope.sweep_parent"
TAG_BEST = "rankscope.best"  # on a sweep's parent: its best system and by which metric
TAG_GATE = "rankscope.gate"  # 'pass', 'regression' or 'error'
TAG_GATE_REASON = "rankscope.gate.reason"
TAG_COMPARE_BASELINE = "rankscope.compare.baseline"
TAG_COMPARE_CANDIDATE = "rankscope.compare.candidate"
TAG_COMPARE_VERDICT = "rankscope.compare.verdict"
TAG_COMPARE_PROMOTED = "rankscope.compare.promoted"
TAG_COMPARE_DIGEST = "rankscope.compare.digest"
TAG_GIT_COMMIT = "mlflow.source.git.commit"
TAG_DESCRIPTION = "mlflow.note.content"  # MLflow's run description (Markdown): the first thing a run's page shows
TAG_COMPARED_IN = "rankscope.compared_in"  # on a compared run: the comparison runs that read it, newest first
TAG_COMPARE_PRIMARY = "rankscope.compare.primary"  # the verdict on the primary metric, in a short line
TAG_COMPARE_COMMAND = "rankscope.compare.by"  # 'compare' or 'gate': which command recorded the comparison
BASELINE_TAG = ("baseline", "true")

# what TAG_KIND says
KIND_SWEEP, KIND_JOB, KIND_RUN, KIND_COMPARISON = "sweep", "job", "run", "comparison"
KIND_TRIAL = "trial"
KIND_QUESTIONS = "questions"  # a question set from traces (pipeline.questions), in the experiment "<name> questions"
EVALUATED_KINDS = (KIND_JOB, KIND_RUN)  # runs that hold one system's evaluation


def interval_tag(key: str) -> str:
    """``rankscope.ndcg_at_10``: a run's primary metric rounded, with its interval (``0.668 [0.622, 0.713]``), for
    the runs table's column (MLflow shows metrics unrounded, their bounds in columns of their own)."""
    return f"rankscope.{key}"


INTERVAL_FIGURE = "{key} with intervals"  # the image key of a sweep's figure of its primary metric per system

# -- a job's folder (and its run's artifacts) -------------------------------------------------------------------
CONFIG_FILE = "config.yaml"
PER_QUESTION_FILE = "per_question.csv"
PER_QUESTION_TABLE = "per_question.json"  # the same table as an MLflow table (log_table)
RUN_FILE = "run.trec"
CHUNKS_FILE = "chunks.tsv"  # a chunked job's ranking of chunks (metrics.chunks): run.trec's documents come from it
SPANS_FILE = "spans.tsv"  # the span judgments a job scored span metrics with, whole documents included
CHUNKING_FILE = "chunking.tsv"  # every chunk of the documents holding evidence (span_precision_omega reads it)
MEANS_FILE = "metrics.csv"
DIAGNOSIS_FILE = "diagnosis.txt"
NOTES_FILE = "notes.txt"  # TAG_NOTES's lines, in full; written only when the job has notes
TRACES_FILE = "traces.csv"  # retriever=traces: every trace read, what became of it, the question it answered
PLOTS_DIR = "plots"
RECORD_FILE = "record.json"  # what the job's MLflow run will hold, written before anything is logged
JOB_LOG_FILE = "rankscope.log"  # Hydra's log of the job (hydra.job.name in conf/config.yaml, plus .log); a failure's
# traceback (a user's engine that raised) is added to it, and the FAILED run logs it

# -- a sweep's folder (and its parent run's artifacts) -----------------------------------------------------------
HANDOFF_FILE = "mlflow_sweep.json"  # the driver's hand-off to its jobs: parent run, experiment, swept keys
LOCK_FILE = ".rankscope.lock"
MULTIRUN_CONFIG = "multirun.yaml"  # Hydra's record of the sweep's configuration
SUMMARY_TEXT = "summary.txt"
SYSTEMS_FILE = "systems.csv"
RANKS_FILE = "first_relevant_rank.csv"
DIFFERENCES_FILE = "differences.csv"
SUMMARY_TABLE = "sweep_summary.json"
REPORT_FILE = "report.html"
SUMMARY_MARKDOWN = "summary.md"  # the report's summary tables as Markdown
SUMMARY_LATEX = "summary.tex"  # ... and as LaTeX (booktabs), as ranx's to_latex makes them
PAIRS_FILE = "pairs.csv"  # every pair of systems on every shown metric: difference, interval, p, Holm p
SLICES_FILE = "slices.csv"  # metrics.slices: every figure by slice (a job's means; a sweep's, with its differences)
DIAGNOSIS_DIR = "diagnosis"  # each system's failing questions, one CSV per system, linked from the report
GATE_FILE = "gate.txt"
SCHEDULE_FILE = "scheduled.txt"
TUNING_TEXT = "tuning.txt"
TUNING_TABLE = "tuning.csv"
OPTIMISATION_RESULTS = "optimization_results.yaml"  # hydra-optuna-sweeper writes it into the sweep folder

# -- a question set's folder (python -m pipeline.questions from-traces) and its run's artifacts ------------------------
QUESTIONS_FILE = "questions.jsonl"  # id, text (masked), stratum, how often asked, first and last asked
JUDGMENTS_FILE = "judgments.csv"  # query_id, doc_id, grade, source, trace_id: the assessments found on the traces
QUESTION_TRACES_FILE = "question_traces.csv"  # query_id, trace_id, time, duplicate (exact or near), span_id
QUESTION_SET_FILE = "question_set.json"  # where the set came from: experiment, store, window, filter, sampling

# -- a comparison's run ------------------------------------------------------------------------------------------
COMPARISON_TABLE = "comparison.json"
ONE_SIDE_FILE = "questions_on_one_side.txt"

# -- the cache folder (cache.dir) ---------------------------------------------------------------------------------
CHUNKS_DIR = "chunks"  # chunkings, one .npz per (corpus, chunker settings)

# -- local copies of the public collections ----------------------------------------------------------------------
# The one way to point rankscope at a BEIR-layout copy on disk: the preset conf/corpus/<name>.yaml reads it
# (${oc.env:...}), and so do the tests (tests/datasets.py) and the benchmarks (bench/paths.py)
LOCAL_COPY_ENV = {"scifact": "RANKSCOPE_SCIFACT", "cranfield": "RANKSCOPE_CRANFIELD"}

# -- the tracking store -----------------------------------------------------------------------------------------
DB_NAME = "mlflow.db"
LOCK_SUFFIX = ".lock"  # mlflow.db.lock: held while a process makes its first connection to the store
CREATING_SUFFIX = ".creating"  # mlflow.db.creating: a new store while MLflow builds its tables
UI_ADDRESS_SUFFIX = ".ui"  # mlflow.db.ui: the address python -m pipeline.ui serves the store on, while it runs
UI_PORT_ENV = "RANKSCOPE_UI_PORT"  # the port pipeline.ui serves on by default, and that links name before it runs
ARTIFACT_DIR = "mlartifacts"
LOOPBACK = "127.0.0.1"  # where servers listen unless exposed
SERVED_ARTIFACT_ROOT = "mlflow-artifacts:/"  # runs on a server record this; it maps it to its artifacts destination
DEFAULT_EXPERIMENT = "rankscope"
# in the environment of every server process python -m pipeline.server starts: PID:START of the command that started it,
# by which a later command tells a server of its own left behind from another program's (pipeline.team.processes)
SERVER_OWNER_ENV = "RANKSCOPE_SERVER_OWNER"

# -- MLflow metric names ---------------------------------------------------------------------------------------------
# A retrieval metric is logged under its MLflow key (``ndcg_at_5``, metrics.spec), its interval's bounds beside it
# (``ndcg_at_5_ci_lower``, ``ndcg_at_5_ci_upper``: they sort next to the mean, lower first). Everything else a run
# counts (cache reuse, stage times, question counts, failure classes) is housekeeping, named ``system/<name>``: the
# MLflow UI charts exactly that form (one slash) in its "System metrics" section, after the retrieval metrics, while
# any other prefix (``cache/``, and ``system/a/b`` too) becomes a section of its own listed first.
LOWER, UPPER = "_ci_lower", "_ci_upper"
HOUSEKEEPING = "system/"
CACHE_PREFIX = HOUSEKEEPING + "cache_"
TIME_PREFIX = HOUSEKEEPING + "time_"
QUESTIONS_PREFIX = HOUSEKEEPING + "questions_"
JOBS_PREFIX = HOUSEKEEPING + "jobs_"
FAILURES_PREFIX = HOUSEKEEPING + "failures_"
NOTES_PREFIX = HOUSEKEEPING + "notes_"
DOCUMENTS_METRIC = HOUSEKEEPING + "documents"
INDEX_MB_METRIC = HOUSEKEEPING + "index_mb"  # the retriever's index in memory (its arrays), MiB
# what a job spent rather than what it measured: stage times, cache reuse and the index it built (0 when its ranking
# came from a memo, absent when an engine cannot tell); they differ by launcher, machine and reuse, its figures never
RESOURCE_PREFIXES = (TIME_PREFIX, CACHE_PREFIX, INDEX_MB_METRIC)
# judgments below the relevance level: 0 when the judgments list only relevant documents (BEIR's usually do)
NOT_RELEVANT_METRIC = HOUSEKEEPING + "judgments_not_relevant"

# -- judging (python -m pipeline.judge): pools, qrels versions, re-scored runs ------------------------------------
KIND_QRELS = "qrels"  # TAG_KIND of a qrels version's run (in the experiment '<experiment> judgments')
KIND_RESCORE = "rescore"  # TAG_KIND of a re-scoring's parent run; its children are of KIND_JOB
TAG_QRELS_PARENT = "rankscope.qrels_parent"  # on a qrels version's run: the digest of the version it extends
TAG_ASSESSORS = "rankscope.assessors"  # on a qrels version's run: who judged its new pairs
TAG_JUDGED_AT = "rankscope.judged_at"  # ... and when the last of them was judged (ISO 8601)
TAG_RESCORED_FROM = "rankscope.rescored_from"  # on a re-scored run: the run whose run.trec it scored again
TAG_QRELS_RUN = "rankscope.qrels_run"  # on a re-scored run: the run of the qrels version that scored it
JUDGMENTS_EXPERIMENT = "{experiment} judgments"  # where qrels versions are logged
RESCORED_EXPERIMENT = "{experiment} qrels {digest}"  # one experiment per qrels version: charts never mix versions
QRELS_DATASET_CONTEXT = "judgments"  # a qrels version's dataset input: what it was used for
JUDGE_SHEET = "to_judge.csv"  # what pool writes for a spreadsheet, by default
POOL_FILE = "pool.csv"  # a pool's pairs in judging order
POOL_META = "pool.json"  # what was pooled: runs, corpus, base qrels version, depth, order, scale
POOL_CHUNKS = "pool_chunks.csv"  # a span pool's chunks behind each pair: query_id, doc_id, start, end, rank, systems
HIGHLIGHTS_FILE = "highlights.csv"  # a span version: every assessor's highlights, as read and checked
SET_ASIDE_FILE = "set_aside.csv"  # ... the marks not used (a changed document, a text that no longer matches ...)
QRELS_TREC = "qrels.trec"  # a qrels version as TREC qrels ...
QRELS_BEIR = "qrels.tsv"  # ... and as BEIR's qrels TSV
ANNOTATIONS_FILE = "annotations.csv"  # every assessor's grade, before merging
CONTRADICTIONS_FILE = "contradictions.csv"  # new grades that contradict the parent version's
DISAGREEMENTS_FILE = "disagreements.csv"  # pairs assessors graded differently
ADJUDICATIONS_FILE = "adjudications.csv"  # an adjudication round's grades, each settling a tie
VERSION_TEXT = "version.txt"  # what pull said of the version: counts, agreement, contradictions
CHANGES_TEXT = "judgments.txt"  # what re-scoring changed: the report's "Judgments" section
CHANGES_TABLE = "judgments.csv"
# -- slices of the questions (metrics.slices, docs/slices.md) ---------------------------------------------------------
SLICE_COLUMN = "slice:"  # a per-question table's column of the slice each question is in: 'slice:team'
SLICE_PREFIX = "slice/"  # a job's MLflow metric of its primary metric in one slice: 'slice/team/billing/ndcg_at_5'
TAG_COMPARE_SLICE = "rankscope.compare.slice"  # a comparison of one slice's questions: 'team=billing'

CONDENSED = "condensed"  # metrics.judged_only: condensed-list figures, logged as condensed/<key>, never mixed
