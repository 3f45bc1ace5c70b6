"""GRAVITY core: framework-neutral build and query of entity, event and topic anchors.

Submodules are imported where used (``gravity_core.build``, ``gravity_core.store``,
``gravity_core.loaders`` ...); importing this package does no work.
"""

from gravity_core.errors import (
    AnchorStoreError,
    ConfigurationError,
    GravityError,
    InputDataError,
    MissingDependencyError,
    ProviderError,
    StorageAccessError,
    UnexpectedModelOutput,
)

__version__ = "0.1.0"

__all__ = [
    "AnchorStoreError",
    "ConfigurationError",
    "GravityError",
    "InputDataError",
    "MissingDependencyError",
    "ProviderError",
    "StorageAccessError",
    "UnexpectedModelOutput",
    "__version__",
]
