"""The test search service as a command (docs/own-retriever.md): it listens on a free port unless told one, says
its URL, and refuses a port that is taken in one line (the next command would query whatever listens there)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("tantivy")

REPO = Path(__file__).resolve().parents[2]
COMMAND = [sys.executable, "-m", "tests.retrievers.search_server"]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def test_without_a_port_each_takes_a_free_one_and_says_the_url_to_use():
    """Two at once (a fixed default port let the second fail with a traceback, or query the first)."""
    processes = [subprocess.Popen(COMMAND, cwd=REPO, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(2)]
    try:
        urls = []
        for process in processes:
            line = process.stdout.readline()  # printed once it listens
            assert line.startswith("tantivy over helpdesk (28 documents): http://127.0.0.1:"), process.stderr.read()
            urls.append(line.split(": ", 1)[1].split()[0])
        assert len(set(urls)) == 2 and all(url.endswith("/search") for url in urls)
        for url in urls:
            request = urllib.request.Request(url, data=json.dumps({"query": "refund", "k": 3}).encode(),
                                             headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=60) as answer:
                hits = json.loads(answer.read())
            assert 0 < len(hits) <= 3 and {"id", "score"} <= set(hits[0])
    finally:
        for process in processes:
            process.send_signal(signal.SIGINT)
            process.communicate(timeout=60)
    assert [process.returncode for process in processes] == [0, 0]


def test_a_port_that_is_taken_is_one_line_and_status_1():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([*COMMAND, "--port", str(port)], cwd=REPO, env=ENV, capture_output=True, text=True,
                              timeout=120)
    assert done.returncode == 1 and done.stdout == "" and "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"python -m tests.retrievers.search_server: cannot listen on 127.0.0.1:{port} (")
    assert line.endswith("leave out --port to take a free one")


def test_a_corpus_folder_that_is_not_there_is_one_line_and_status_1(tmp_path):
    done = subprocess.run([*COMMAND, "--corpus", str(tmp_path / "scifact")], cwd=REPO, env=ENV, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 1 and done.stdout == "" and "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line == f"python -m tests.retrievers.search_server: {tmp_path / 'scifact'}: corpus folder does not exist"
