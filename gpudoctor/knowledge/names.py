"""Named string constants: enum members that are also the strings they stand for, so that
tables, messages and JSON keep reading plain text while code and type checkers see a closed
set of names."""

from __future__ import annotations

import sys
from enum import Enum

if sys.version_info >= (3, 11):
    from enum import StrEnum
else:  # pragma: no cover - Python 3.10
    class StrEnum(str, Enum):
        """``enum.StrEnum`` of Python 3.11: a member formats and prints as its value."""

        __str__ = str.__str__
        # typeshed gives Enum.__format__ an Enum self, which str's method does not take
        # (at run time str's is the one a str mixin must use).
        __format__ = str.__format__  # type: ignore[assignment]

__all__ = ["StrEnum"]
