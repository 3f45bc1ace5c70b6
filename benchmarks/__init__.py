"""GRAVITY's benchmarks: ``python -m benchmarks`` (or ``make bench``) runs them all and writes ``results/``.

Each benchmark times GRAVITY and its comparison in one process, interleaved after a warm-up, and
reports ratios next to their targets (the report: docs/benchmarks.md).
"""

__all__: list[str] = []
