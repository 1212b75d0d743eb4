"""Autofixes: edits computed by the rules, applied (or shown as a diff) by ``apply``."""
