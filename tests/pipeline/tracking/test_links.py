"""The links rankscope prints into the MLflow UI: always in its runs mode, at the address that really serves the
store, and each part of a hint on a line of its own so that it copies whole."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from pipeline.common.names import UI_ADDRESS_SUFFIX
from pipeline.tracking.links import announced, experiment_url, run_location, run_url, served_at, ui_base


def test_every_link_opens_the_runs_mode_and_names_its_experiment():
    uri = "http://tracking.example:8080/"
    assert run_url(uri, "7", "abc") == ("http://tracking.example:8080/#/experiments/7/runs/abc"
                                        "?workflowType=machine_learning")
    assert experiment_url(uri, "2", "rankscope-comparisons", "CHART") == (
        "http://tracking.example:8080/#/experiments/2/runs?workflowType=machine_learning"
        "&viewStateShareKey=rankscope-comparisons&compareRunsMode=CHART")


def test_a_local_store_nobody_serves_gets_the_command_then_the_default_address_each_on_its_own_line(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    lines = run_location(uri, "1", "abc").splitlines()
    assert lines[0] == f"run abc in {uri}"
    command = lines[1].split("open the UI:  ", 1)[1]
    assert command.endswith(f"-m pipeline.ui --backend-store-uri {uri}")  # nothing glued to the path
    assert lines[2].split("its page:  ", 1)[1] == (
        "http://127.0.0.1:5000/#/experiments/1/runs/abc?workflowType=machine_learning")


def test_while_the_ui_serves_the_store_links_use_its_address_and_a_dead_ui_s_file_is_ignored(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    with announced(uri, "http://127.0.0.1:5077"):
        assert served_at(uri) == ui_base(uri) == "http://127.0.0.1:5077"
        assert run_location(uri, "1", "abc").splitlines() == [
            f"run abc in {uri}", "  its page:  http://127.0.0.1:5077/#/experiments/1/runs/abc"
                                 "?workflowType=machine_learning"]
    assert served_at(uri) is None and not (tmp_path / f"mlflow.db{UI_ADDRESS_SUFFIX}").exists()
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (tmp_path / f"mlflow.db{UI_ADDRESS_SUFFIX}").write_text(json.dumps({"url": "http://127.0.0.1:5077",
                                                                         "pid": int(gone.stdout)}))
    assert served_at(uri) is None and ui_base(uri) == "http://127.0.0.1:5000"  # its process is gone
    (tmp_path / f"mlflow.db{UI_ADDRESS_SUFFIX}").write_text(json.dumps({"url": "http://127.0.0.1:5099",
                                                                         "pid": os.getpid()}))
    assert ui_base(uri) == "http://127.0.0.1:5099"


def test_the_ui_port_setting_moves_the_default_address_and_the_printed_command_together(tmp_path, monkeypatch):
    from pipeline.common.names import UI_PORT_ENV

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv(UI_PORT_ENV, "5455")
    lines = run_location(uri, "1", "abc").splitlines()
    assert lines[1].endswith(f"-m pipeline.ui --backend-store-uri {uri} --port 5455")
    assert lines[2] == "  its page:  http://127.0.0.1:5455/#/experiments/1/runs/abc?workflowType=machine_learning"
    monkeypatch.setenv(UI_PORT_ENV, "http://x")  # not a port: the links keep the default (pipeline.ui says why)
    assert ui_base(uri) == "http://127.0.0.1:5000" and run_location(uri, "1", "abc").splitlines()[1].endswith(uri)
