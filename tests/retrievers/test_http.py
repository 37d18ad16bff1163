"""``retriever=http``: a search service over HTTP, asked question by question, its answers checked.

Every test talks to a real HTTP server on 127.0.0.1 (``tests/retrievers/search_server.py``) that answers with the
rankings of a small engine; ``retrievers.http.HttpSearch`` is used as the pipeline uses it, behind the checking
adapter (``retrievers.external.ExternalSearch``).
"""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
import yaml

from metrics.errors import InputError
from metrics.trec import trec_lines
from retrievers.external import BadAnswer, ExternalSearch
from retrievers.http import HttpSearch, at_path, fill, masked_url
from tests.pipeline.config.engines import ListSearch
from tests.retrievers.search_server import SearchServer, closed_port

CONF = Path(__file__).resolve().parents[2] / "conf" / "retriever"


@pytest.fixture(scope="module")
def engine(helpdesk_collection):
    found = ListSearch()
    found.index(list(helpdesk_collection.doc_ids), list(helpdesk_collection.doc_texts))
    return found


@pytest.fixture
def server(engine):
    with SearchServer(engine, secret="Bearer s3cret-value-for-tests", failures=2, delay=1.0) as running:
        yield running


def entry(name: str, **overrides) -> dict:
    """A shipped conf/retriever entry's settings (what Hydra passes to the constructor), with ``overrides``."""
    settings = yaml.safe_load((CONF / f"{name}.yaml").read_text(encoding="utf-8"))
    settings = {k: v for k, v in settings.items() if k not in ("_target_", "defaults") and v != "???"}
    return {**settings, **overrides}


def adapter(engine: HttpSearch, collection) -> ExternalSearch:
    return ExternalSearch(engine=engine, name=engine.name).index(collection)


# --- the default protocol and Elasticsearch's, by config alone ------------------------------------------------


def test_the_default_protocol_posts_the_question_and_k_and_reads_id_score_pairs(server, engine, helpdesk_collection):
    questions = list(helpdesk_collection.query_texts)
    found = HttpSearch(**entry("http", url=server.url("/search"))).search(questions, 5)
    assert found == engine.search(questions, 5)
    sent = sorted((body for _, _, body in server.requests), key=lambda b: b["query"])  # 8 at a time: any order
    assert sent == sorted(({"query": q, "k": 5} for q in questions), key=lambda b: b["query"])  # k: a number
    assert all(headers["Content-Type"] == "application/json" for _, headers, _ in server.requests)


def test_the_elasticsearch_entry_reads_a_search_endpoint_by_config_alone(server, helpdesk_collection):
    c = helpdesk_collection
    plain = adapter(HttpSearch(url=server.url("/search")), c).rank(c.query_ids, c.query_texts, 10)
    es = adapter(HttpSearch(**entry("elasticsearch", url=server.url("/helpdesk/_search"))), c)
    ranked = es.rank(c.query_ids, c.query_texts, 10)
    assert list(trec_lines(ranked, "x")) == list(trec_lines(plain, "x")) and len(list(trec_lines(plain))) > 50
    sent = [body for path, _, body in server.requests if path == "/helpdesk/_search"]
    expected = [{"size": 10, "_source": False, "track_total_hits": False, "query": {"match": {"text": text}}}
                for text in c.query_texts]
    assert sorted(sent, key=str) == sorted(expected, key=str)  # 8 at a time: in any order


def test_many_requests_at_once_keep_the_questions_order(server, engine, helpdesk_collection):
    questions = list(helpdesk_collection.query_texts) * 5
    one = HttpSearch(url=server.url(), concurrency=1).search(questions, 3)
    many = HttpSearch(url=server.url(), concurrency=8).search(questions, 3)
    assert many == one == engine.search(questions, 3)


def test_the_body_template_takes_the_question_and_k_where_the_config_puts_them():
    template = {"q": "{query}", "size": "{k}", "note": "top {k} for {query}", "list": ["{k}", 1, None], "flag": True}
    assert fill(template, "a {k} b", 7) == {"q": "a {k} b", "size": 7, "note": "top 7 for a {k} b",
                                            "list": [7, 1, None], "flag": True}


def test_paths_reach_into_objects_and_lists():
    answer = {"hits": {"hits": [{"_id": "d1", "fields": {"score": [2.5]}}]}}
    assert at_path(answer, "hits.hits.0._id") == "d1" and at_path(answer, "hits.hits.0.fields.score.0") == 2.5
    assert at_path(answer, "") is answer
    with pytest.raises(KeyError, match="total"):
        at_path(answer, "hits.total")


# --- credentials --------------------------------------------------------------------------------------------


def test_a_header_is_read_from_the_environment_variable_the_config_names(server, monkeypatch, helpdesk_collection):
    monkeypatch.setenv("RANKSCOPE_TEST_SEARCH_KEY", server.secret)
    search = HttpSearch(url=server.url("/auth"), headers={"Authorization": "RANKSCOPE_TEST_SEARCH_KEY"})
    assert search.search(["export my data"], 3)
    assert server.requests[-1][1]["Authorization"] == server.secret
    assert server.secret not in repr(search) and server.secret not in search.describe()


def test_without_the_key_the_service_refuses_in_one_line_without_retrying(server, helpdesk_collection):
    c = helpdesk_collection
    with pytest.raises(InputError) as caught:
        adapter(HttpSearch(url=server.url("/auth"), retries=3), c).rank(c.query_ids[:1], c.query_texts[:1], 5)
    message = str(caught.value)
    assert message.startswith(f"{server.url('/auth')}: question q01 (")
    assert "HTTP 401 Unauthorized" in message and "missing or wrong API key" in message and "\n" not in message
    assert len(server.requests) == 1  # a 4xx is an answer: asking again would not change it


def test_a_header_names_a_variable_that_must_be_set(monkeypatch):
    monkeypatch.delenv("RANKSCOPE_TEST_UNSET", raising=False)
    with pytest.raises(ValueError, match=r"headers\.Authorization: environment variable RANKSCOPE_TEST_UNSET is not"):
        HttpSearch(url="http://127.0.0.1:9/", headers={"Authorization": "RANKSCOPE_TEST_UNSET"})


def test_a_key_written_into_the_config_is_refused_without_being_repeated():
    with pytest.raises(ValueError) as caught:
        HttpSearch(url="http://127.0.0.1:9/", headers={"X-Api-Key": "sk-live-abc123"})
    assert "must name the environment variable" in str(caught.value) and "abc123" not in str(caught.value)


def test_credentials_in_the_url_are_sent_as_basic_authentication_and_masked_when_shown(server, engine):
    url = server.url("/search").replace("http://", "http://alice:pa%24%24word@")
    search = HttpSearch(url=url)
    assert search.search(["export my data"], 3) == engine.search(["export my data"], 3)
    path, headers, _ = server.requests[-1]
    assert path == "/search" and headers["Authorization"] == "Basic " + base64.b64encode(b"alice:pa$$word").decode()
    assert search.describe() == server.url("/search").replace("http://", "http://alice:***@")
    assert "word" not in repr(search)
    assert masked_url("https://tok3n@example.org/x?y=1") == "https://***@example.org/x?y=1"


def test_a_url_that_is_not_http_is_refused():
    with pytest.raises(ValueError, match="url must be http://HOST"):
        HttpSearch(url="localhost:9200/_search")


# --- bad answers: one line naming the question, the URL and the answer -------------------------------------------


@pytest.mark.parametrize("path, reason", [
    ("/nan", "hit 3: the score NaN is not a finite number"),
    ("/text", "the answer is not JSON (Expecting value: line 1 column 1 (char 0))"),
    ("/shape", "expected the answer to be a list of hits, got dict"),
])
def test_a_bad_answer_stops_with_one_line_naming_the_question_the_url_and_the_answer(server, helpdesk_collection,
                                                                                    path, reason):
    c = helpdesk_collection
    search = adapter(HttpSearch(url=server.url(path).replace("http://", "http://bob:hunter2@")), c)
    with pytest.raises(InputError) as caught:
        search.rank(c.query_ids, c.query_texts, 10)
    message = str(caught.value)
    masked = server.url(path).replace("http://", "http://bob:***@")
    assert message.startswith(f"{masked}: question q01 ('how much does the Pro plan cost'): {reason}: ")
    assert "hunter2" not in message and "\n" not in message
    answer = message.split(f"{reason}: ", 1)[1]
    assert len(answer) <= 203  # the first 200 characters, then "..."
    if path == "/text":
        assert answer == "<html><body>Service temporarily unavailable</body></html>"


def test_an_answer_for_another_key_names_what_is_missing(server, helpdesk_collection):
    c = helpdesk_collection
    search = adapter(HttpSearch(url=server.url("/search"), score="_score"), c)
    with pytest.raises(InputError, match=r"question q01 .*: hit 1 has no '_score' \(expected 'id' and '_score'\)"):
        search.rank(c.query_ids, c.query_texts, 10)


# --- an unwell service: tried again, then one line ----------------------------------------------------------------


def test_a_5xx_is_tried_again_with_back_off_until_the_service_answers(server, engine):
    search = HttpSearch(url=server.url("/flaky"), retries=3, backoff=0.01, concurrency=1)
    assert search.search(["export my data", "reset my password"], 3) == engine.search(
        ["export my data", "reset my password"], 3)
    assert len(server.requests) == server.failures + 2


def test_a_service_that_keeps_failing_stops_after_the_retries(server, helpdesk_collection):
    c = helpdesk_collection
    search = adapter(HttpSearch(url=server.url("/down"), retries=2, backoff=0.01, concurrency=1), c)
    with pytest.raises(InputError) as caught:
        search.rank(c.query_ids, c.query_texts, 10)
    assert str(caught.value) == (f"{server.url('/down')}: question q01 ('how much does the Pro plan cost'): no "
                                 f"answer after 3 attempt(s) (HTTP 503 Service Unavailable)")
    assert len(server.requests) == 3


def test_an_unreachable_service_stops_after_the_retries_in_one_line(helpdesk_collection):
    c = helpdesk_collection
    url = f"http://127.0.0.1:{closed_port()}/search"
    with pytest.raises(InputError) as caught:
        adapter(HttpSearch(url=url, retries=1, backoff=0.01), c).rank(c.query_ids, c.query_texts, 10)
    message = str(caught.value)
    assert message.startswith(f"{url}: question q01 (") and "no answer after 2 attempt(s)" in message
    assert "refused" in message.lower() and "\n" not in message


def test_a_service_slower_than_the_timeout_is_tried_again_then_given_up(server):
    search = HttpSearch(url=server.url("/slow"), timeout=0.2, retries=1, backoff=0.01)
    with pytest.raises(BadAnswer, match=r"no answer after 2 attempt\(s\) \(.*timed out"):
        search.search(["export my data"], 3)


@pytest.mark.parametrize("settings, message", [
    ({"concurrency": 0}, "concurrency must be at least 1"),
    ({"retries": -1}, "retries must be at least 0"),
    ({"timeout": 0}, "timeout must be > 0"),
    ({"id": ""}, "give the path of the document id"),
])
def test_settings_out_of_range_are_refused(settings, message):
    with pytest.raises(ValueError, match=message):
        HttpSearch(url="http://127.0.0.1:9/", **settings)
