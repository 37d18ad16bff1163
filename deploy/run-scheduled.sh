#!/bin/sh
# Run a scheduled sweep from the repository root: the one command the cron line, the systemd service and the CI
# workflow call (deploy/cron, deploy/systemd, deploy/ci).
#   deploy/run-scheduled.sh nightly [--date YYYY-MM-DD] [Hydra overrides...]
# Environment: RANKSCOPE_PYTHON (default: .venv/bin/python if present, else python3), MLFLOW_TRACKING_URI (default:
# sqlite:///<repository>/mlflow.db), RANKSCOPE_SCHEDULE_ROOT (default: <repository>/multirun/scheduled).
# Exit status: 0 passed, 1 a regression or a failed job, 2 the gate could not decide.
set -eu
cd "$(dirname "$0")/.."
python="${RANKSCOPE_PYTHON:-}"
if [ -z "$python" ]; then
    if [ -x .venv/bin/python ]; then python=.venv/bin/python; else python=python3; fi
fi
exec "$python" -m pipeline.scheduled "$@"
