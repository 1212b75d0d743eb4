"""Find the installed GPU frameworks and their CUDA flavour without importing them.

The supervisor must never import a GPU framework (PyTorch poisons fork as soon as it
touches CUDA, and importing TensorFlow costs seconds), so facts come from package
metadata and from small text files the wheels ship (``build_info.py``,
``torch/version.py``). Only a fact no file records is asked of a spawned child.
"""

from __future__ import annotations

import importlib.metadata as metadata
import re
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

# The frameworks the report covers, by import name: the linter's knowledge records (plain
# data; importing them imports no framework and no libcst).
from gpudoctor.knowledge.registry import BY_NAME, FRAMEWORKS

_CHILD_TIMEOUT = 60.0


@dataclass(frozen=True)
class Framework:
    """One framework as installed in this environment."""

    name: str
    installed: bool
    version: str | None = None
    distribution: str | None = None
    cuda: str | None = None  # the CUDA the build targets; None: CPU-only or unknown
    cuda_build: bool | None = None  # None: could not tell
    detail: str | None = None


def _read(dist: metadata.Distribution, suffix: str) -> str | None:
    """Return the text of the file of ``dist`` whose path ends with ``suffix``."""
    for path in dist.files or ():
        if str(path).replace("\\", "/").endswith(suffix):
            try:
                return Path(str(path.locate())).read_text(errors="replace")
            except OSError:
                return None
    return None


def _child_fact(code: str) -> str | None:
    """Run ``code`` in a fresh interpreter and return its last stdout line, or None."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=_CHILD_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = done.stdout.strip().splitlines()
    return lines[-1] if done.returncode == 0 and lines else None


def _tensorflow(dist: metadata.Distribution) -> Framework:
    text = _read(dist, "tensorflow/python/platform/build_info.py")
    if text is None:
        fact = _child_fact(
            "import tensorflow as tf; print(tf.sysconfig.get_build_info().get('is_cuda_build'))"
        )
        cuda_build = None if fact is None else fact == "True"
        cuda = None
    else:
        found = re.search(r"'is_cuda_build',\s*(True|False)", text)
        cuda_build = None if found is None else found.group(1) == "True"
        version = re.search(r"'cuda_version',\s*'([^']*)'", text)
        cuda = version.group(1) if version else None
    detail = {True: "built with CUDA", False: "CPU-only build", None: "CUDA build unknown"}
    return Framework("tensorflow", True, dist.version, dist.metadata["Name"], cuda, cuda_build,
                     detail[cuda_build])


def _cupy(dist: metadata.Distribution) -> Framework:
    name = dist.metadata["Name"]
    flavour = re.fullmatch(r"cupy-cuda(\d+)(x?)", name.lower())
    if flavour is not None:
        digits, wildcard = flavour.groups()
        cuda = f"{digits}.x" if wildcard else f"{digits[:-1]}.{digits[-1]}"
        return Framework("cupy", True, dist.version, name, cuda, True, f"CUDA runtime {cuda}")
    # A source build links whatever CUDA it found; only the module knows, and
    # importing cupy does not initialize CUDA, so a child may ask it.
    fact = _child_fact("import cupy; print(cupy.cuda.runtime.runtimeGetVersion())")
    runtime = f"{int(fact) // 1000}.{(int(fact) % 1000) // 10}" if fact and fact.isdigit() else None
    return Framework("cupy", True, dist.version, name, runtime, True,
                     f"CUDA runtime {runtime}" if runtime else "CUDA runtime unknown")


def _torch(dist: metadata.Distribution) -> Framework:
    text = _read(dist, "torch/version.py") or ""
    found = re.search(r"^cuda(?::[^=]*)?=\s*(None|'[^']*')", text, re.MULTILINE)
    if found is None:
        return Framework("torch", True, dist.version, dist.metadata["Name"],
                         detail="CUDA build unknown")
    cuda = None if found.group(1) == "None" else found.group(1).strip("'")
    return Framework("torch", True, dist.version, dist.metadata["Name"], cuda, cuda is not None,
                     f"CUDA {cuda}" if cuda else "CPU-only build")


def _jax(dist: metadata.Distribution, installed: Mapping[str, str]) -> Framework:
    plugins = sorted(n for n in installed if re.fullmatch(r"jax-cuda\d+-(plugin|pjrt)", n))
    cuda = plugins[0].split("-")[1].removeprefix("cuda") if plugins else None  # jax-cuda12-plugin: "12"
    parts = [f"jaxlib {installed['jaxlib']}"] if "jaxlib" in installed else []
    parts += [f"{n} {installed[n]}" for n in plugins]
    return Framework("jax", True, dist.version, dist.metadata["Name"], cuda, bool(plugins),
                     ", ".join(parts) or None)


def _numba(dist: metadata.Distribution, installed: Mapping[str, str]) -> Framework:
    detail = f"numba-cuda {installed['numba-cuda']}" if "numba-cuda" in installed else None
    return Framework("numba", True, dist.version, dist.metadata["Name"], detail=detail)


def report() -> dict[str, Framework]:
    """Return every framework of ``FRAMEWORKS``, installed or not."""
    owners = metadata.packages_distributions()
    installed = {
        (dist.metadata["Name"] or "").lower().replace("_", "-"): dist.version
        for dist in metadata.distributions()
    }
    found: dict[str, Framework] = {}
    for name in FRAMEWORKS:
        # The distributions that own the framework's top-level import package.
        dists = sorted(owners.get(BY_NAME[name].modules[0].split(".", 1)[0], []))
        if not dists:
            found[name] = Framework(name, installed=False)
            continue
        dist = metadata.distribution(dists[0])
        if name == "tensorflow":
            found[name] = _tensorflow(dist)
        elif name == "cupy":
            found[name] = _cupy(dist)
        elif name == "torch":
            found[name] = _torch(dist)
        elif name == "jax":
            found[name] = _jax(dist, installed)
        elif name == "numba":
            found[name] = _numba(dist, installed)
        else:
            found[name] = Framework(name, True, dist.version, dist.metadata["Name"])
    return found
