"""The checked project: which file a module name means, and which files can matter."""

from __future__ import annotations

import re
from pathlib import Path

from gpudoctor.lint.analysis.source import ParsedModule, ParseFailure, parse, read_text

# A file that mentions none of these cannot start a process, touch a GPU or configure
# one, so it is never parsed (unless a file that can matter imports it).
GATE = re.compile(
    r"multiprocess|concurrent\.futures|ProcessPool|fork|Process|Pool|DataLoader|"
    r"tensorflow|keras|cupy|torch|jax|numba|pycuda|CUDA_|XLA_|TF_|environ|putenv|Thread"
)
_IMPORT_LINE = re.compile(r"^\s*(?:from\s+(\.*[\w.]*)\s+import|import\s+([\w., ]+))", re.M)


class Project:
    """Files under one root, parsed on demand and each at most once."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self._roots = [self.root] + ([self.root / "src"] if (self.root / "src").is_dir() else [])
        self._texts: dict[Path, str | ParseFailure] = {}
        self._parsed: dict[Path, ParsedModule | ParseFailure] = {}
        self._gate: dict[Path, bool] = {}

    def text(self, path: Path) -> str | ParseFailure:
        path = path.resolve()
        if path not in self._texts:
            self._texts[path] = read_text(path)
        return self._texts[path]

    def parsed(self, path: Path) -> ParsedModule | ParseFailure:
        path = path.resolve()
        if path not in self._parsed:
            text = self.text(path)
            self._parsed[path] = text if isinstance(text, ParseFailure) else parse(str(path), text)
        return self._parsed[path]

    def resolve(self, importer: Path, name: str, level: int = 0) -> Path | None:
        """Return the project file a module name refers to, from ``importer``'s point of view."""
        parts = [p for p in name.split(".") if p]
        if level:
            base = importer.resolve().parent
            for _ in range(level - 1):
                base = base.parent
            return _module_file(base, parts)
        for base in (importer.resolve().parent, *self._roots):
            found = _module_file(base, parts)
            if found is not None:
                return found
        return None

    def may_matter(self, path: Path) -> bool:
        """Cheap text gate: could this file, or a project module it imports, matter?"""
        return self._may_matter(path.resolve(), set())

    def _may_matter(self, path: Path, seen: set[Path]) -> bool:
        if path in self._gate:
            return self._gate[path]
        seen.add(path)
        text = self.text(path)
        if isinstance(text, ParseFailure):
            verdict = True  # reported as GD000
        else:
            verdict = GATE.search(text) is not None or any(
                dep not in seen and self._may_matter(dep, seen) for dep in self._imports(path, text)
            )
        self._gate[path] = verdict
        return verdict

    def _imports(self, path: Path, text: str) -> list[Path]:
        found = []
        for match in _IMPORT_LINE.finditer(text):
            if match.group(1) is not None:
                dotted = match.group(1)
                level = len(dotted) - len(dotted.lstrip("."))
                names = [dotted.lstrip(".")]
            else:
                level = 0
                names = [n.split(" as ")[0].strip() for n in match.group(2).split(",")]
            for name in names:
                target = self.resolve(path, name, level) if name or level else None
                if target is not None:
                    found.append(target)
        return found


def _module_file(base: Path, parts: list[str]) -> Path | None:
    if not parts:
        init = base / "__init__.py"
        return init if init.is_file() else None
    folder = base.joinpath(*parts)
    for candidate in (folder.with_suffix(".py"), folder / "__init__.py"):
        if candidate.is_file():
            return candidate.resolve()
    return None
