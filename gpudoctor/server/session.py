"""Linting that outlives one run: what ``gpudoctor server`` lints the open documents with.

Nothing here speaks the Language Server Protocol (server.py does). A ``Session`` lints the
documents an editor has open, with the text the editor holds (saved or not) and the
settings the command line would use for each file: the nearest ``pyproject.toml``, read
again on every run, so that an edit of it counts at once.

What makes a run after an edit cheap is kept between runs: the interpreter with
gpudoctor's modules and libcst loaded, and one result cache per project and settings
(the same ``.gpudoctor_cache`` the command line uses; its entries are keyed by the
digests of the bytes analysed, so an unsaved text neither reads nor spoils an entry of
the saved file). A run re-analyses the edited files and every file whose analysis read
one of them; the others come from the cache.
"""

from __future__ import annotations

import argparse
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from gpudoctor.lint.cache import Cache
    from gpudoctor.lint.findings import Finding
    from gpudoctor.lint.settings import Settings

__all__ = ["Linted", "Session"]

# Result caches kept open at once (a project and its settings each); the one used least
# recently is dropped first (it is on disk, and read again if needed).
MAX_CACHES = 8


@dataclass
class Linted:
    """What one run found: the findings of each document linted (an empty list clears what
    an editor shows for it), and what the run had to say (one line each)."""

    findings: dict[Path, list[Finding]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    analysed: int = 0  # documents analysed in this run (the others came from the cache)


class Session:
    """Lint documents, again and again, in one process."""

    def __init__(self, cache: bool = True) -> None:
        self._use_cache = cache
        self._caches: OrderedDict[str, Cache | None] = OrderedDict()

    def settings(self, path: Path) -> Settings:
        """The settings ``gpudoctor lint PATH`` would use for ``path``."""
        from gpudoctor.lint.inputs import build_settings

        plain = argparse.Namespace(target_version=None, platform=None, select=None, extend_select=None,
                                   ignore=None, extend_exclude=None)
        return build_settings(plain, [str(path)])

    def lint(self, paths: Sequence[Path], texts: Mapping[Path, bytes]) -> Linted:
        """Lint ``paths`` (absolute paths of the open documents), each with its text in
        ``texts`` where the editor holds one (else as it is on disk).

        Documents of one project are linted together, with one project's settings; a file
        the project's configuration excludes, as ``gpudoctor lint --force-exclude`` would
        leave it out, gets no findings."""
        from gpudoctor.lint.discovery import in_default_excludes
        from gpudoctor.lint.engine import lint_paths
        from gpudoctor.lint.notebook import read as read_notebook

        out = Linted()
        groups: dict[tuple[object, ...], tuple[Settings, list[Path]]] = {}
        for path in paths:
            settings = self.settings(path)
            if settings.excluded(path) or in_default_excludes(path, settings.project_root):
                out.findings[path] = []
                continue
            key = (settings.project_root, settings.config_file, settings.cache_root)
            groups.setdefault(key, (settings, []))[1].append(path)
        for settings, group in groups.values():
            given = {path: texts[path] for path in group if path in texts}
            result = lint_paths(group, settings, cache=self._cache(settings), contents=given)
            for path in group:
                out.findings[path] = []
            for finding in result.findings:
                out.findings.setdefault(Path(finding.site.path), []).append(finding)
            out.warnings.extend(result.warnings)
            out.errors.extend(result.internal_errors)
            out.analysed += result.analysed
        # Notebooks are read once per text and remembered for the process: in a server
        # every edit is a new text.
        read_notebook.cache_clear()
        return out

    def _cache(self, settings: Settings) -> Cache | None:
        """The result cache of these settings, kept open between runs."""
        if not self._use_cache:
            return None
        from gpudoctor.lint.execution import cache_for

        key = f"{settings.target_minor}|{settings.platform}|{settings.project_root}|{settings.cache_root}"
        if key not in self._caches:
            self._caches[key] = cache_for(settings, None)
            while len(self._caches) > MAX_CACHES:
                self._caches.popitem(last=False)
        self._caches.move_to_end(key)
        return self._caches[key]
