"""Secrets never reach what rankscope logs: URIs with credentials, tokens, values under secret-named keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.common import redact
from pipeline.common.redact import (
    MASK,
    mask_yaml_file,
    one_line,
    redact_text,
    redact_texts,
    redact_tree,
    redact_value,
    remember_clean,
)


@pytest.mark.parametrize("text, secret, kept", [
    ("http://alice:s3cret@mlflow.example:5000", "s3cret", "http://alice:***@mlflow.example:5000"),
    ("postgresql://bob:hunter2@db/mlflow", "hunter2", "postgresql://bob:***@db/mlflow"),
    ("https://ghtoken123@github.example/repo", "ghtoken123", "https://***@github.example/repo"),
    (r"tracking.uri=http\://alice\:s3cret@127.0.0.1\:5000", "s3cret", "alice"),  # as Hydra escapes overrides
    ("s3://bucket/x?X-Amz-Signature=abcdef&region=eu", "abcdef", "region=eu"),
    ("https://h/api?access_token=tok987&page=2", "tok987", "page=2"),
    ("api_key=AbC123xyz and more", "AbC123xyz", "and more"),
    ("password: hunter2", "hunter2", "password: ***"),
    ("Authorization: Bearer abcdefghijklmnopqrstuvwxyz", "abcdefghijklmnopqrstuvwxyz", "Bearer"),
    ("token ghp_0123456789abcdefghijABCDEFGHIJ here", "ghp_0123456789abcdefghijABCDEFGHIJ", "here"),
    # key-shaped values, whatever key or text holds them
    ("note=sk-test-abc123xyz", "abc123xyz", "note="),
    ("an OpenAI key sk-proj-0a1b2c3d4e in a question", "0a1b2c3d4e", "in a question"),
    ("ghp_abc12345xyz", "abc12345xyz", ""),
    ("AKIA0123456789ABCDEF and more", "0123456789ABCDEF", "and more"),
    ("headers: Bearer abc123def", "abc123def", "Bearer"),
    ("custom_trigger=ZZZ_api_key=ZZZsecret123", "ZZZsecret123", "custom_trigger=ZZZ_api_key="),  # a run tag
])
def test_credentials_in_text_are_masked(text, secret, kept):
    safe = redact_text(text)
    assert secret not in safe
    assert MASK in safe and kept in safe


@pytest.mark.parametrize("text", [
    "sqlite:////home/me/mlflow.db", "../shared/datasets/scifact", "retriever.k1=0.9", "ndcg@5",
    "http://127.0.0.1:5000", "BM25 k1=0.9 b=0.4", "sk-learn pipelines", "risk-free", "the bearer of news",
    "task-12345678",
])
def test_ordinary_values_pass_unchanged(text):
    assert redact_text(text) == text


# Shapes that must be masked wherever they stand: (what it is, a text holding it, the secret). Every test key below is
# made up; each has the length and alphabet of a real one.
LETTERS_40 = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMN"
MUST_MASK = [
    ("OpenAI key, letters only", f"my key is sk-{LETTERS_40}, it stopped working", f"sk-{LETTERS_40}"),
    ("OpenAI project key", "sk-proj-" + "Ab3dEf6hIj" * 5, "Ab3dEf6hIj" * 5),
    ("Stripe secret key", "use sk_live_51HabcdEFGHijklMNOPqrstUVWXyz0123456789abcdefGHIJ now",
     "51HabcdEFGHijklMNOPqrstUVWXyz0123456789abcdefGHIJ"),
    ("Stripe test key", "sk_test_4eC39HqLyjWDarjtT1zdp7dc", "4eC39HqLyjWDarjtT1zdp7dc"),
    ("Stripe restricted key", "rk_live_51HabcdEFGHijklMNOPqrstUVWX", "51HabcdEFGHijklMNOPqrstUVWX"),
    ("Stripe publishable key", "pk_live_51HabcdEFGHijklMNOPqrst", "51HabcdEFGHijklMNOPqrst"),
    ("Stripe webhook secret", "whsec_" + "Q2x1c3Rlcg" * 3, "Q2x1c3Rlcg" * 3),
    ("GitHub token", "ghp_" + "aB3" * 12, "aB3" * 12),
    ("GitHub token in an assignment", "export X=ghp_" + "aB3" * 12, "aB3" * 12),
    ("Slack bot token", "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "AbCdEfGhIjKlMnOpQrStUvWx"),
    ("Slack app token", "xapp-1-A0123456789-0123456789012-abcdef0123456789", "abcdef0123456789"),
    ("AWS access key id", "aws AKIAIOSFODNN7EXAMPLE here", "IOSFODNN7EXAMPLE"),
    ("AWS temporary key id", "ASIAIOSFODNN7EXAMPLE", "IOSFODNN7EXAMPLE"),
    ("JSON Web Token", "auth eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
     "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c done", "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"),
    ("unsigned JSON Web Token", "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSJ9.", "eyJzdWIiOiJhbGljZSJ9"),
    ("Hugging Face token", "hf_" + "aBcDeFgHiJ" * 3, "aBcDeFgHiJ" * 3),
    ("password in a pair", "password=hunter2", "hunter2"),
    ("password in a sentence", "my password: Hunter2 is not taken", "Hunter2"),
    ("token in brackets", "(API_TOKEN=s3cr3t-value)", "s3cr3t-value"),
    ("Authorization header", "Authorization: Token 0123456789abcdef0123456789abcdef01234567",
     "0123456789abcdef0123456789abcdef01234567"),
    ("Basic credentials", "Basic YWxpY2U6czNjcmV0", "YWxpY2U6czNjcmV0"),
    ("access token in a query", "https://h/search?q=x&access_token=tok987&page=2", "tok987"),
]

# Look-alikes that must pass unchanged: ids, digests, UUIDs, settings named like secrets, and prose.
MUST_KEEP = [
    ("an MLflow run id", "run 0f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"),
    ("a qrels digest", "qrels version d18bbac533c1f2d7 (parent e3b0c44298fc1c14)"),
    ("a SHA-256 digest", "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
    ("a UUID", "trace 123e4567-e89b-12d3-a456-426614174000"),
    ("a chunk id", "chunk-12-0 and doc_1234 and MED-10"),
    ("a task id", "task-12345678"),
    ("a word after sk-", "sk-learn pipelines and sk-learn-compatible estimators"),
    ("a word with sk_ in it", "the desk_test_suite and risk_live_feeds"),
    ("a token that is set", "token: set"),
    ("a switch named like a token", "LABEL_STUDIO_ENABLE_LEGACY_API_TOKEN=true"),
    ("a sentence after 'token:'", "no Label Studio API token: set the environment variable LABEL_STUDIO_API_KEY"),
    ("a variable's name, not its value", "label_studio.token_env=LABEL_STUDIO_API_KEY"),
    ("a tokenizer setting", "retriever.tokenizer=whitespace"),
    ("a count of tokens", "max_tokens: 512, tokens=1200, system/cache_tokenised=12"),
    ("an author in a query", "https://h/search?author=smith&page=2"),
    ("prose after 'basic'", "a basic understanding of retrieval-augmented generation"),
    ("prose after 'token'", "the token boundary-detection step"),
    ("a JWT-like word", "eyJ is how base64 JSON starts"),
    ("a long upper-case word", "AKIA is a prefix; AKIAXYZ is too short"),
]


@pytest.mark.parametrize("what, text, secret", MUST_MASK, ids=[m[0] for m in MUST_MASK])
def test_every_known_secret_shape_is_masked(what, text, secret):
    safe = redact_text(text)
    assert secret not in safe and MASK in safe, safe
    assert redact_texts([text]) == [safe]


@pytest.mark.parametrize("what, text", MUST_KEEP, ids=[m[0] for m in MUST_KEEP])
def test_look_alikes_pass_unchanged(what, text):
    assert redact_text(text) == text
    assert redact_texts([text]) == [text]


def test_what_surrounds_a_masked_value_is_kept():
    assert redact_text("(LABEL_STUDIO_API_TOKEN=abc123).") == "(LABEL_STUDIO_API_TOKEN=***)."
    assert redact_text("password=hunter2.") == "password=***."
    assert redact_text("password=ab)cd") == "password=***"  # a bracket inside a value is part of it
    assert redact_text("the key: sk-" + LETTERS_40 + ".") == "the key: ***."


def _messages(path: Path) -> list[tuple[int, str]]:
    """Every string literal of a module that is not a docstring: f-strings with their fields as 'X'."""
    import ast

    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and body and \
                isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            skipped.add(id(body[0].value))
        if isinstance(node, ast.JoinedStr):
            skipped.update(id(part) for part in ast.walk(node) if part is not node)
    found = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.append((node.lineno, node.value))
        elif isinstance(node, ast.JoinedStr):
            found.append((node.lineno, "".join(v.value if isinstance(v, ast.Constant) else "X" for v in node.values)))
    return found


# rankscope's own texts that do hold a credential's place: URIs it builds with a password, and examples of them
BUILDS_CREDENTIALS = {"pipeline/server.py", "pipeline/team/postgres.py", "bench/lost_store.py",
                      "pipeline/common/redact.py", "pipeline/common/privacy.py"}  # and the masking itself


def test_rankscope_s_own_messages_pass_through_masking_unchanged():
    """Every line rankscope prints goes through redact_text: none of its own words may be taken for a secret (the
    wrong-token line lost its 'true)', the no-token line its 'set')."""
    root = Path(__file__).resolve().parents[3]
    garbled = []
    for package in ("pipeline", "metrics", "retrievers", "bench"):
        for path in sorted((root / package).rglob("*.py")):
            name = path.relative_to(root).as_posix()
            if name not in BUILDS_CREDENTIALS:
                garbled += [f"{name}:{line}: {text!r}" for line, text in _messages(path) if redact_text(text) != text]
    assert not garbled, "\n".join(garbled)


def test_values_under_secret_keys_are_masked_whatever_they_look_like():
    assert redact_value("tracking.token", "plain") == MASK
    assert redact_value("auth.password", "x") == MASK
    assert redact_value("retriever.k1", 0.9) == 0.9
    assert redact_value("corpus.path", "../data") == "../data"


def test_an_http_retrievers_headers_keep_the_variables_name_and_mask_anything_else():
    tree = {"retriever": {"headers": {"Authorization": "SEARCH_KEY", "X-Token": "literal-key-123"}}}
    assert redact_tree(tree) == {"retriever": {"headers": {"Authorization": "SEARCH_KEY", "X-Token": MASK}}}
    assert redact_value("retriever.headers.X-Key", "abc123") == MASK
    assert redact_value("retriever.headers.X-Key", "ES_AUTH") == "ES_AUTH"
    overrides = "retriever=http +retriever.headers.Authorization=ES_AUTH +retriever.headers.X-Key=abc123 k=1"
    assert redact_text(overrides) == ("retriever=http +retriever.headers.Authorization=ES_AUTH "
                                      "+retriever.headers.X-Key=*** k=1")


def test_a_config_tree_is_redacted_leaf_by_leaf():
    tree = {"tracking": {"uri": "https://u:pw@h", "api_key": "k"}, "metrics": {"k": [3, 5]}}
    assert redact_tree(tree) == {"tracking": {"uri": "https://u:***@h", "api_key": MASK}, "metrics": {"k": [3, 5]}}


def test_a_multi_line_error_becomes_one_line_with_its_cause():
    try:
        try:
            raise LookupError("Key 'foo' not in 'BM25Config'\n    full_key: retriever.foo\n    object_type=BM25Config")
        except LookupError as cause:
            raise ValueError("Could not override 'retriever.foo'.\nTo append use +retriever.foo=1") from cause
    except ValueError as exc:
        line = one_line(exc)
    assert "\n" not in line
    assert line.startswith("Could not override 'retriever.foo': ")
    assert "not in 'BM25Config'" in line and "+retriever.foo=1" in line and "full_key" not in line


@pytest.mark.parametrize("text", [
    "http://alice:s3cret@h", r"x=http\://u\:p@h", "HTTPS://TOKEN@H", "?Access_Token=abc&x=1", "Api-Key: abc",
    "PassWord=hunter2", "pwd=x", "BASIC abcdefghijklmnop", "sk-0123456789abcdefghijk", "AKIA0123456789ABCDEF",
    "xoxb-0123456789", "hf_0123456789abcdefghijk", "glpat-0123456789abcdefghijk", "credentials: abc",
    "\u017fecret=abc", "to\u212aen=abc", "retriever.HEADERS.x=abc",
    "see github_pat_11ABCDEFQ0xyzXYZ1234567890_ABCDEFZZZZZ", "credent\u0130al=abc", "credent\u0131al=abc",
    "?s\u0130gnature=abc", "\u0130\u0131 plain \u0307",
    "what causes tokenization errors?", "plain question about BM25", "",
])
def test_the_quick_check_never_skips_text_a_pattern_would_change(text):
    from pipeline.common.redact import _redact_all

    assert redact_text(text) == _redact_all(text)


SECRETS_AND_NOT = [
    "http://alice:s3cret@h", "api_key=AbC123xyz and more", "token ghp_0123456789abcdefghijABCDEFGHIJ here",
    "\u017fecret=abc", "to\u212aen=abc", "password:", " hunter2", "tok", "en=abc123", "https://", "u:p@h", "",
    "line one\npassword=x\nline three", "what causes tokenization errors?", "plain question about BM25",
    "Stra\u00dfe stra\u00dfe", "\u00df" * 40, "tokentokentoken", "api", "xoxb-0123456789", "retriever.HEADERS.x=abc",
    "evidence: first result 123 shares 'high' (40%)", "\n", "sk-", "0123456789abcdefghijk", "credent\u0130al=abc",
    "\u0130\u0130 api_key=abc", "github_pat_11ABCDEFQ0xyzXYZ1234567890_ABCDEFZZZZZ",
]


@pytest.mark.parametrize("texts", [SECRETS_AND_NOT, SECRETS_AND_NOT[::-1], [], ["password=x"], ["plain"],
                                   ["tok", "en=abc123"], ["api", "api_key=abc123"], ["", "api_key=abc123"],
                                   ["plain"] * 50 + ["api_key=x"] + ["plain"] * 50])
def test_redact_texts_is_redact_text_on_each(texts):
    """The joined search marks exactly the texts holding a literal: one split over two texts is in neither."""
    assert redact_texts(texts) == [redact_text(t) for t in texts]


def test_a_text_redacted_before_is_looked_up_not_searched_again(monkeypatch):
    """A sweep's jobs repeat most of their cells: the second time, a text's redaction is the one remembered (the
    same as redacting it), and only texts not seen before are searched."""
    monkeypatch.setattr(redact, "_REDACTED", {})
    texts = ["plain", "api_key=abc123", "http://u:p@host"]
    assert redact_texts(texts) == [redact_text(t) for t in texts]
    searched = []
    real = redact._redact_unseen
    monkeypatch.setattr(redact, "_redact_unseen", lambda unseen: searched.append(list(unseen)) or real(unseen))
    assert redact_texts([*texts, "token=xyz"]) == [redact_text(t) for t in [*texts, "token=xyz"]]
    assert searched == [["token=xyz"]]
    redact._REDACTED["plain"] = "remembered"  # what is remembered is what comes back
    assert redact_texts(["plain"]) == ["remembered"]
    monkeypatch.setattr(redact, "REMEMBERED_TEXTS", 5)  # beyond the bound everything is forgotten at once
    redact_texts(["a", "b"])
    assert set(redact._REDACTED) == {"a", "b"}


def test_every_character_ignorecase_takes_for_a_letter_folds_to_that_letter():
    """The quick check looks for the literals in the folded text: a character the patterns (IGNORECASE) read as an
    ASCII letter must fold to it ('ſ', the Kelvin sign, 'İ', 'ı'), or a key spelt with it would skip redaction."""
    import re
    import string

    from pipeline.common.redact import _fold

    everything = "".join(map(chr, range(0x80, 0x110000)))
    readers = [m.group() for m in re.finditer("[a-z]", everything, re.IGNORECASE)]
    assert len(readers) >= 4
    for c in readers:
        letters = [x for x in string.ascii_lowercase if re.fullmatch(x, c, re.IGNORECASE)]
        assert letters and all(x in _fold(c) for x in letters), c


def test_a_yaml_file_hydra_wrote_is_rewritten_with_its_secrets_masked(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("tracking:\n  uri: http://alice:s3cret@mlflow.example\ntags:\n  api_key: AbC123\n"
                    "retriever:\n  k1: 0.9\n  lr: 1e-3\n  when: 2024-01-01\n", encoding="utf-8")
    assert mask_yaml_file(path)
    text = path.read_text(encoding="utf-8")
    assert "s3cret" not in text and "AbC123" not in text
    assert "k1: 0.9" in text and "lr: 1e-3" in text  # YAML 1.1 reads 1e-3 as text: kept as written


def test_a_yaml_file_without_secrets_is_left_byte_for_byte(tmp_path):
    path = tmp_path / "overrides.yaml"
    original = "- retriever=bm25\n- retriever.k1=0.9\n- corpus=scifact\n"
    path.write_text(original, encoding="utf-8")
    assert not mask_yaml_file(path)
    assert path.read_text(encoding="utf-8") == original


def test_a_yaml_file_found_clean_is_not_read_again_until_it_changes(tmp_path, monkeypatch):
    """A sweep's every job checks the sweep's multirun.yaml: once found clean, an unchanged file is not parsed again;
    one written again (with a secret now) is."""
    path = tmp_path / "multirun.yaml"
    path.write_text("tags:\n  note: plain\n", encoding="utf-8")
    assert not mask_yaml_file(path)
    reads = []
    original_read = Path.read_text
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: reads.append(self) or original_read(self, *a, **k))
    assert not mask_yaml_file(path) and reads == []
    path.write_text("tags:\n  api_key: AbC123xyz\n", encoding="utf-8")
    assert mask_yaml_file(path) and reads == [path]
    assert "AbC123xyz" not in original_read(path, encoding="utf-8")


def test_a_yaml_file_remembered_clean_is_masked_once_rewritten(tmp_path):
    path = tmp_path / "hydra.yaml"
    path.write_text("a: 1\n", encoding="utf-8")
    remember_clean(path)
    assert not mask_yaml_file(path)
    path.write_text("tracking:\n  uri: http://alice:s3cret@mlflow.example\n", encoding="utf-8")
    assert mask_yaml_file(path) and "s3cret" not in path.read_text(encoding="utf-8")
