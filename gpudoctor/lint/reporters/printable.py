"""Show a file name (or a message that holds one) on one line of text a terminal can print.

The escaping lives in ``gpudoctor.printable``, shared with the probe (which shows command
lines, output and stack frames of other processes the same way); the linter's modules
import it from here.
"""

from __future__ import annotations

from gpudoctor.printable import printable

__all__ = ["printable"]
