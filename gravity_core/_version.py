"""The package's version (read by the build backend, ``gravity --version`` and KB lineages)."""

__version__ = "0.1.0"
