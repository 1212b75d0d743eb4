"""What the interpreter given by ``--python`` holds: gpudoctor's dependencies and the GPU
frameworks, each asked in a child (importing a framework here would put its threads and,
for some, its CUDA hooks into the runner).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpucheck import children

# gpudoctor's own dependencies (pyproject's ``dependencies``), by import name, and the
# distribution a person installs for each.
DEPENDENCIES = {"libcst": "libcst", "pynvml": "nvidia-ml-py", "psutil": "psutil", "rich": "rich",
                "pathspec": "pathspec"}
_TIMEOUT = 120.0

_DEPENDENCY_CODE = """
import importlib, json, os, shutil, sys
from pathlib import Path
found = {}
for name in sys.argv[1:]:
    try:
        module = importlib.import_module(name)
    except Exception as error:
        found[name] = {"imports": False, "error": f"{type(error).__name__}: {error}"}
    else:
        found[name] = {"imports": True, "version": str(getattr(module, "__version__", "") or "") or None}
beside = Path(sys.executable).parent / "py-spy"
spy = shutil.which("py-spy") or (str(beside) if os.access(beside, os.X_OK) else None)
print(json.dumps({"python": sys.version.split()[0], "executable": sys.executable,
                  "modules": found, "py_spy": spy}))
"""

# Imports the framework and reads versions only: no device is touched, no CUDA context made.
_FRAMEWORK_CODE = """
import importlib, importlib.metadata as md, json, sys
name, module = sys.argv[1], sys.argv[2]
try:
    importlib.import_module(module)
except BaseException as error:
    print(json.dumps({"imports": False, "error": f"{type(error).__name__}: {error}"[:300]}))
    raise SystemExit(0)
top = sys.modules[module.split(".")[0]]
found = {"imports": True, "version": str(getattr(top, "__version__", "") or "") or None}
if name == "torch":
    found["cuda"] = top.version.cuda
if name == "jax":
    found["jaxlib"] = sys.modules["jaxlib"].__version__ if "jaxlib" in sys.modules else None
    found["plugins"] = sorted(f"{d.metadata['Name']} {d.version}" for d in md.distributions()
                              if (d.metadata["Name"] or "").lower().startswith("jax-cuda"))
if name == "numba":
    try:
        found["numba_cuda"] = md.version("numba-cuda")
    except md.PackageNotFoundError:
        found["numba_cuda"] = None
if found["version"] is None:
    for dist in md.packages_distributions().get(module.split(".")[0], []):
        found["version"] = md.version(dist)
        break
print(json.dumps(found))
"""


@dataclass(frozen=True)
class Dependencies:
    """gpudoctor's dependencies under ``--python``."""

    python: str | None
    modules: dict[str, dict[str, Any]]
    py_spy: str | None
    error: str | None = None  # the interpreter could not even be run

    @property
    def missing(self) -> list[str]:
        return [name for name, found in self.modules.items() if not found.get("imports")]

    def sentence(self) -> str:
        """Say in one sentence what is missing (or that nothing is)."""
        if self.error:
            return f"the interpreter could not be asked about gpudoctor's dependencies: {self.error}"
        spy = ("py-spy found" if self.py_spy
               else "py-spy not found (optional: hung processes get Python stacks only, no native ones)")
        if not self.missing:
            return f"gpudoctor's dependencies all import; {spy}"
        named = ", ".join(f"{name} (pip install {DEPENDENCIES.get(name, name)})" for name in self.missing)
        return (f"gpudoctor's dependencies missing under this interpreter: {named}; the checks that run "
                f"gpudoctor will fail; {spy}")

    def to_json(self) -> dict[str, Any]:
        return {"python": self.python, "modules": self.modules, "py_spy": self.py_spy,
                "missing": self.missing, "error": self.error, "sentence": self.sentence()}


def dependencies(python: str, repo: Path) -> Dependencies:
    """Ask ``python`` which of gpudoctor's dependencies import, and where py-spy is."""
    try:
        done = children.run([python, "-c", _DEPENDENCY_CODE, *DEPENDENCIES], timeout=_TIMEOUT,
                            env=children.environment(repo))
    except OSError as error:
        return Dependencies(None, {}, None, f"{python}: {error.strerror or error}")
    try:
        found = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        why = "timed out" if done.timed_out else f"exit status {done.returncode}: {done.tail(2)}"
        return Dependencies(None, {}, None, why)
    return Dependencies(found["python"], found["modules"], found["py_spy"])


def _framework(python: str, repo: str, name: str, module: str) -> dict[str, Any]:
    try:
        done = children.run([python, "-c", _FRAMEWORK_CODE, name, module], timeout=_TIMEOUT,
                            env=children.environment(Path(repo)))
    except OSError as error:
        return {"imports": False, "error": str(error)}
    try:
        found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        why = "timed out" if done.timed_out else f"exit status {done.returncode}: {done.tail(2)}"
        return {"imports": False, "error": f"importing {module}: {why}"}
    found["seconds"] = done.seconds
    return found


@functools.lru_cache(maxsize=4)
def frameworks(python: str, repo: str) -> dict[str, dict[str, Any]]:
    """Import each GPU framework gpudoctor knows under ``python``, all at once, one child
    each; return ``{name: {"imports": bool, "version": ..., "error": ...}}``.

    Asked once per run (the parts read the same answer): importing TensorFlow or
    PyTorch takes seconds.
    """
    from gpudoctor.knowledge.registry import BY_NAME, FRAMEWORKS

    jobs = [(name, BY_NAME[name].modules[0]) for name in FRAMEWORKS]
    found = children.in_parallel(lambda job: _framework(python, repo, *job), jobs, len(jobs))
    return {name: result for (name, _), result in zip(jobs, found, strict=True)}


def importable(python: str, repo: Path) -> set[str]:
    """The frameworks that import under ``python``."""
    return {name for name, found in frameworks(python, str(repo)).items() if found.get("imports")}
