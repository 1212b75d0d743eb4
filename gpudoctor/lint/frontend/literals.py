"""The values of string literals, read the cheap way when there is nothing to interpret."""

from __future__ import annotations

import warnings

import libcst as cst


def string_value(node: cst.SimpleString) -> str | bytes | None:
    """The value of a string literal; without escapes it is read off directly.

    libcst's ``evaluated_value`` runs ``ast.literal_eval``, a compile per string, which
    showed up in profiles of large code bases (docstrings are strings too).
    """
    raw = node.value
    prefix = raw[: len(raw) - len(raw.lstrip("rRuU"))]
    body = raw[len(prefix):]
    if "\\" not in body and "\r" not in body and prefix.lower() in ("", "u", "r"):
        quote = body[:3] if body[:3] in ('"""', "\'\'\'") else body[:1]
        if len(body) >= 2 * len(quote) and body.endswith(quote):
            return body[len(quote): len(body) - len(quote)]
    try:
        with warnings.catch_warnings():  # "invalid escape sequence" is the user's business, not ours
            warnings.simplefilter("ignore")
            return node.evaluated_value
    except (SyntaxError, ValueError):
        return None


def integer_value(text: str, max_chars: int) -> int | None:
    """The value of an integer literal (``"0x_ff"``, ``"1_000"``), None when it is longer
    than ``max_chars`` (``Limits.max_integer_chars``): too long to be a number a rule reads.
    Past 4,300 decimal digits, CPython will not even turn the number into text (a message
    naming it would fail), nor read a decimal literal that long with ``int()``."""
    if len(text) > max_chars:
        return None
    try:
        return int(text, 0)
    except ValueError:
        return None
