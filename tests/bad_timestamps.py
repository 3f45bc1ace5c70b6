"""Numeric message timestamps that are not a usable time, shared by the adapters' tests (#19).

``datetime.fromtimestamp`` raised ``OverflowError`` or ``ValueError`` for most of them.
"""

from __future__ import annotations

from datetime import UTC, datetime

BAD_NUMBERS: dict[str, object] = {
    "1e20": 1e20,
    "-1e20": -1e20,
    "nan": float("nan"),
    "inf": float("inf"),
    "-inf": float("-inf"),
    "year 10000": 253402300800,
    "before year 1": -62135596801,
    "huge int": 10**400,
    "True": True,
    "False": False,
}

GOOD_NUMBERS: dict[str, tuple[object, datetime]] = {
    "epoch": (0, datetime(1970, 1, 1, tzinfo=UTC)),
    "negative, in 1969": (-86400, datetime(1969, 12, 31, tzinfo=UTC)),
    "float keeps microseconds": (1710000000.25, datetime(2024, 3, 9, 16, 0, 0, 250000, tzinfo=UTC)),
    "first second of year 1": (-62135596800, datetime(1, 1, 1, tzinfo=UTC)),
    "last second of 9999": (253402300799, datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)),
}
