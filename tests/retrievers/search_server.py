"""A real search service on 127.0.0.1: a standard-library ThreadingHTTPServer, in a thread of the test process,
answering with an engine's rankings. Its paths are the behaviours ``retriever=http`` must handle:

- ``/search``: the default protocol, ``{"query": TEXT, "k": K}`` -> ``[{"id": ..., "score": ...}, ...]``;
- ``/INDEX/_search``: Elasticsearch's, ``{"size": K, "query": {"match": {FIELD: TEXT}}}`` ->
  ``{"hits": {"hits": [{"_id": ..., "_score": ...}, ...]}}`` (plus the fields Elasticsearch adds);
- ``/nan``: a NaN score in the third hit; ``/text``: an HTML page, not JSON; ``/shape``: an object where the list of
  hits should be; ``/flaky``: 503 for the first :attr:`SearchServer.failures` requests, then ``/search``;
  ``/down``: always 503; ``/slow``: ``/search`` after :attr:`SearchServer.delay` seconds; ``/auth``: ``/search``
  for requests carrying :attr:`SearchServer.secret` in their Authorization header, 401 otherwise.

Every request is recorded (path, headers, body) for the tests to look at.

Also a command, to try ``retriever=http`` by hand (docs/own-retriever.md): tantivy over a corpus, until Ctrl-C:
``python -m tests.retrievers.search_server [--port PORT] [--corpus FOLDER]`` (default: a free port, which it prints
with the URL to give ``retriever.url``; the help-desk corpus). A port that is taken is one line and status 1: the
next command would otherwise query whatever listens there; so is a corpus folder that cannot be read.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class SearchServer:
    """``with SearchServer(engine) as server: server.url("/search")``; ``engine`` is indexed already."""

    def __init__(self, engine: Any, secret: str = "", failures: int = 2, delay: float = 1.0) -> None:
        self.engine, self.secret, self.failures, self.delay = engine, secret, failures, delay
        self.requests: list[tuple[str, dict[str, str], Any]] = []
        self._lock = threading.Lock()
        self._flaky_seen = 0

    def __enter__(self) -> SearchServer:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.httpd.daemon_threads = True
        self.httpd.handle_error = lambda request, address: None  # a client that gave up (timeouts): not news
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)

    @property
    def port(self) -> int:
        return self.httpd.server_address[1]

    def url(self, path: str = "/search") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def flaky_failure(self) -> bool:
        """Whether this request to ``/flaky`` is one of the first ``failures`` (answered 503)."""
        with self._lock:
            self._flaky_seen += 1
            return self._flaky_seen <= self.failures

    def hits(self, text: str, k: int) -> list[tuple[str, float]]:
        with self._lock:  # one search at a time: an engine need not be thread-safe
            return self.engine.search([text], k)[0]


def closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _handler(server: SearchServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # quiet
            pass

        def answer(self, status: int, payload: Any, content_type: str = "application/json") -> None:
            data = (payload if isinstance(payload, str) else json.dumps(payload)).encode()
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"null")
            path = self.path
            with server._lock:
                server.requests.append((path, dict(self.headers.items()), body))
            if path.endswith("/_search"):
                (text,) = body["query"]["match"].values()  # a match query on one field, whichever
                hits = server.hits(text, int(body["size"]))
                top = max((s for _, s in hits), default=None)
                self.answer(200, {"took": 1, "timed_out": False, "hits": {"max_score": top, "hits": [
                    {"_index": path.split("/")[1], "_id": d, "_score": s, "_ignored": []} for d, s in hits]}})
                return
            if path == "/text":
                self.answer(200, "<html><body>Service temporarily unavailable</body></html>", "text/html")
                return
            if path == "/down" or (path == "/flaky" and server.flaky_failure()):
                self.answer(503, {"error": "overloaded"})
                return
            if path == "/slow":
                time.sleep(server.delay)
            if path == "/auth" and self.headers.get("Authorization") != server.secret:
                self.answer(401, {"error": "missing or wrong API key"})
                return
            hits = [{"id": d, "score": s} for d, s in server.hits(body["query"], int(body["k"]))]
            if path == "/nan" and len(hits) > 2:
                hits[2]["score"] = float("nan")  # json.dumps writes NaN, as a careless service would
            self.answer(200, {"results": hits} if path == "/shape" else hits)

    return Handler


def main(argv: list[str] | None = None) -> None:
    import argparse

    from pipeline.data import helpdesk, load_beir
    from tests.pipeline.config.engines import TantivySearch

    p = argparse.ArgumentParser(prog="python -m tests.retrievers.search_server", description=__doc__.split("\n")[0])
    p.add_argument("--port", type=int, default=0, help="the port to listen on (default: a free one, printed)")
    p.add_argument("--corpus", help="a BEIR-layout folder (default: the embedded help-desk corpus)")
    p.add_argument("--split", default="test")
    args = p.parse_args(argv)
    from pathlib import Path

    from metrics.errors import InputError

    try:
        collection = load_beir(Path(args.corpus), args.split, None, False) if args.corpus is not None else helpdesk()
    except InputError as exc:  # a folder that is not there, or not in BEIR layout: one line, status 1
        sys.exit(f"{p.prog}: {exc}")
    engine = TantivySearch()
    engine.index(list(collection.doc_ids), list(collection.doc_texts))
    server = SearchServer(engine)
    try:
        server.httpd = ThreadingHTTPServer(("127.0.0.1", args.port), _handler(server))
    except OSError as exc:
        sys.exit(f"{p.prog}: cannot listen on 127.0.0.1:{args.port} ({exc.strerror}): another program has it; leave "
                 f"out --port to take a free one")
    port = server.port
    print(f"tantivy over {collection.name} ({len(collection.doc_ids)} documents): http://127.0.0.1:{port}/search"
          f" (Elasticsearch-style: http://127.0.0.1:{port}/{collection.name}/_search)", flush=True)
    try:
        server.httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.httpd.server_close()


if __name__ == "__main__":
    main()
