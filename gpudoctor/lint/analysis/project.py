"""The checked project: which file a module name means, and which files can matter."""

from __future__ import annotations

import re
from pathlib import Path

from gpudoctor.lint.analysis.source import ParsedModule, ParseFailure, parse, read_text

# What a file must mention for a rule to report anything in it: a process or thread start,
# a GPU environment write or device configuration, a DataLoader, or a gpudoctor directive.
ACTS = re.compile(
    r"multiprocess|concurrent\.futures|ProcessPool|fork\(|DataLoader|start_processes|\.spawn\(|"
    r"environ\[[^\]\n]+\]\s*=[^=]|environ\.(?:update|setdefault)|putenv|set_memory_growth|"
    r"set_visible_devices|set_logical_device|set_virtual_device|parallelism_threads|"
    r"noqa:\s*GD|gpudoctor:"
)
# What an imported module must mention for a GPU-using importer to matter: it starts
# processes (the importer's GPU work may run in them) or configures the GPU (after the
# importer initialized it).
STARTS = re.compile(
    r"multiprocess|concurrent\.futures|ProcessPool|fork\(|DataLoader|start_processes|\.spawn\(|"
    r"set_memory_growth|set_visible_devices|set_logical_device|set_virtual_device|parallelism_threads|"
    r"CUDA_VISIBLE_DEVICES|CUDA_DEVICE_ORDER|TF_FORCE_GPU|TF_GPU_ALLOCATOR|XLA_|CUPY_GPU|PYTORCH_CUDA"
)
# What a module must mention for its code to have effects worth following into it.
USES_GPU = re.compile(r"tensorflow|keras|cupy|torch|jax|numba|pycuda")
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
        """Cheap text gate for a file to lint: can a finding be reported in it?

        Yes if it starts processes or configures the GPU itself, or if it uses a GPU
        framework and imports a project module that does (its pool may run this file's
        GPU work). Everything else is never parsed.
        """
        path = path.resolve()
        if path not in self._gate:
            text = self.text(path)
            if isinstance(text, ParseFailure):
                self._gate[path] = True  # reported as GD000
            else:
                self._gate[path] = ACTS.search(text) is not None or (
                    USES_GPU.search(text) is not None
                    and any(self._starts(dep) for dep in self._imports(path, text)))
        return self._gate[path]

    def worth_following(self, path: Path) -> bool:
        """Should the analysis walk a module it reached through an import?"""
        text = self.text(path)
        return not isinstance(text, ParseFailure) and (
            ACTS.search(text) is not None or USES_GPU.search(text) is not None)

    def _starts(self, path: Path) -> bool:
        text = self.text(path)
        return not isinstance(text, ParseFailure) and STARTS.search(text) is not None

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
