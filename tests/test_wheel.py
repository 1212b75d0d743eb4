"""The wheel built from this checkout works alone, installed as `pipx install` or `uv tool install` would.

The wheel is built from a copy of the working tree (the files a clone has, with their
uncommitted changes: never the editable install in .venv, nor a stale ``build/`` or
``*.egg-info`` of this checkout) and installed with its declared dependencies, no extras,
into a fresh virtual environment without system site packages. The commands then run
with that environment's interpreter, in a scratch folder, with no PYTHONPATH: what they
import can only come from the wheel.

pytest is not a dependency of gpudoctor; the plugin's check installs it into that
environment after the others ran, as a user who has gpudoctor and adds pytest would.

Building (setuptools, in pip's isolated build environment) and installing need the package
index: where pip says it cannot reach it, the tests are skipped with pip's words. pip's
cache is the user's own, so a repeated run downloads nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpudoctor.pytest_plugin.markers import DOCS

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow

# Read before the suite's fixtures point XDG_CACHE_HOME at a scratch folder: pip's cache is
# the user's (or what PIP_CACHE_DIR names), so that a second run downloads nothing.
PIP_CACHE = os.environ.get("PIP_CACHE_DIR") or str(
    Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pip")

# What pip says on its way to "No matching distribution" when the index cannot be reached
# (connection refused, no DNS, a proxy or TLS failure, a timeout): then the tests skip.
UNREACHABLE = ("connection broken by", "NewConnectionError", "ProxyError", "ConnectTimeoutError",
               "ReadTimeoutError", "Max retries exceeded", "Could not fetch URL", "Network is unreachable",
               "Temporary failure in name resolution")

# Files of the package's folder that only the project's own tools read (ruff's per-layer
# settings): they are not shipped, and nothing at run time looks for them.
DEVELOPMENT_ONLY = {"ruff.toml"}

# Folders never part of a source tree (used only where this checkout is not a git repository).
NOT_SOURCE = {".git", ".venv", "venv", "build", "dist", "__pycache__", ".gpudoctor_cache", ".pytest_cache",
              ".ruff_cache", ".mypy_cache", ".hypothesis", ".realcode", ".notebooks", "gpu-check"}


@dataclass(frozen=True)
class Installed:
    wheel: Path
    python: Path
    scratch: Path


def _project_version() -> str:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # a dependency of gpudoctor on Python 3.10
        import tomli as tomllib
    version: str = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    return version


def _source_files() -> list[str]:
    """The checkout's files as a clone has them plus what is new and not ignored (git), else
    every file outside build outputs and caches."""
    if (ROOT / ".git").exists():
        listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                                capture_output=True, check=True).stdout.decode()
        return [name for name in listed.split("\0") if name and (ROOT / name).is_file()]
    return [str(path.relative_to(ROOT)) for path in ROOT.rglob("*") if path.is_file()
            and not any(part in NOT_SOURCE or part.endswith(".egg-info") for part in path.relative_to(ROOT).parts)]


def _copy_tree(names: list[str], into: Path) -> None:
    for name in names:
        target = into / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((ROOT / name).read_bytes())
        target.chmod((ROOT / name).stat().st_mode)


def _clean_environment(**extra: str) -> dict[str, str]:
    """This process's environment without what would reach past the wheel (the checkout on
    PYTHONPATH, another interpreter's home) or change how pytest loads plugins."""
    dropped = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "PYTHONSAFEPATH", "VIRTUAL_ENV",
               "PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTEST_DISABLE_PLUGIN_AUTOLOAD")
    return {**{k: v for k, v in os.environ.items() if k not in dropped}, **extra}


def _pip(python: Path | str, *args: str, cwd: Path) -> None:
    """Run pip; skip the module's tests when pip could not reach the package index."""
    done = subprocess.run([str(python), "-m", "pip", "--disable-pip-version-check", *args], cwd=cwd,
                          env=_clean_environment(PIP_CACHE_DIR=PIP_CACHE), capture_output=True, text=True)
    if done.returncode == 0:
        return
    said = done.stdout + done.stderr
    reasons = [line.strip() for line in said.splitlines() if any(marker in line for marker in UNREACHABLE)]
    if reasons:
        wanted = [line.strip() for line in said.splitlines() if "No matching distribution" in line]
        pytest.skip(f"pip {args[0]} could not reach the package index: {(wanted or [''])[0]} ({reasons[-1][:300]})")
    pytest.fail(f"pip {' '.join(args)} exited {done.returncode}:\n{said[-4000:]}")


def _run(installed: Installed, *command: str) -> subprocess.CompletedProcess[str]:
    """Run a command of the fresh environment (its bin/) in the scratch folder."""
    binary = installed.python.parent / command[0]
    return subprocess.run([str(binary), *command[1:]], cwd=installed.scratch, env=_clean_environment(),
                          capture_output=True, text=True)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    top = tmp_path_factory.mktemp("wheel")
    source, dist, scratch = top / "source", top / "dist", top / "scratch"
    scratch.mkdir()
    _copy_tree(_source_files(), source)
    _pip(sys.executable, "wheel", "--no-deps", "--wheel-dir", str(dist), str(source), cwd=top)
    [wheel] = dist.glob("*.whl")
    subprocess.run([sys.executable, "-m", "venv", str(top / "env")], check=True, capture_output=True,
                   env=_clean_environment())
    python = top / "env" / "bin" / "python"
    _pip(python, "install", str(wheel), cwd=top)
    return Installed(wheel, python, scratch)


def test_the_wheel_holds_the_package_and_nothing_else(installed: Installed) -> None:
    shipped = set(zipfile.ZipFile(installed.wheel).namelist())
    version = _project_version()
    assert installed.wheel.name == f"gpudoctor-{version}-py3-none-any.whl"
    outside = {name for name in shipped if not name.startswith(("gpudoctor/", f"gpudoctor-{version}.dist-info/"))}
    assert outside == set(), "tests, fixtures, benchmarks or other files outside the package are in the wheel"
    package = {name for name in _source_files() if name.startswith("gpudoctor/")
               and Path(name).name not in DEVELOPMENT_ONLY}
    assert package - shipped == set(), "files of the package the wheel does not ship"
    assert {f"gpudoctor-{version}.dist-info/entry_points.txt", f"gpudoctor-{version}.dist-info/licenses/LICENSE"} \
        <= shipped


def test_it_imports_from_the_fresh_environment_and_says_its_version(installed: Installed) -> None:
    where = _run(installed, "python", "-c", "import gpudoctor; print(gpudoctor.__file__)")
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(installed.python.parents[1])
    shown = _run(installed, "gpudoctor", "--version")
    assert (shown.returncode, shown.stdout.strip(), shown.stderr) == (0, f"gpudoctor {_project_version()}", "")


def test_lint_reports_a_finding_and_exits_1(installed: Installed) -> None:
    (installed.scratch / "pool.py").write_bytes((ROOT / "fixtures" / "seeds" / "seed001_ex1.py").read_bytes())
    linted = _run(installed, "gpudoctor", "lint", "pool.py")
    assert linted.returncode == 1, linted.stdout + linted.stderr
    assert linted.stdout.startswith("pool.py:19:10: GD101 the Pool forks its worker processes after CuPy "
                                    "initialized CUDA"), linted.stdout
    assert "Traceback" not in linted.stderr


def test_rule_prints_its_documentation(installed: Installed) -> None:
    # The rule's documentation is its class docstring, read at run time.
    shown = _run(installed, "gpudoctor", "rule", "GD101")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("# GD101 fork-after-gpu-init\n")
    assert "## What it does" in shown.stdout and "## Example" in shown.stdout


def test_probe_reports_the_machine_and_runs_a_scenario(installed: Installed) -> None:
    # One scenario that needs no GPU and no framework: its script is read from the wheel and
    # run under the installed supervisor. The hang limit is far above what the variants take
    # (well under a second), so a loaded machine cannot turn the safe one into "hung".
    probed = _run(installed, "gpudoctor", "probe", "--json", "--quiet", "--scenario", "process-in-daemonic-worker",
                  "--hang-after", "600")
    assert probed.returncode == 0, probed.stdout[-2000:] + probed.stderr[-4000:]
    assert "Traceback" not in probed.stderr
    report = json.loads(probed.stdout)
    nvml = report["machine"]["nvml"]
    if not nvml["available"]:  # no GPU here: the report says why, once
        assert nvml["reason"] and nvml["devices"] == []
    assert report["machine"]["executable"] == str(installed.python)
    assert {(s["variant"], s["status"]) for s in report["scenarios"]} == {("unsafe", "crashed"), ("safe", "ok")}


def test_pytest_in_that_environment_finds_the_plugin(installed: Installed) -> None:
    # pytest is no dependency of gpudoctor: installed here, after the checks above, as a
    # user would add it to the environment that has gpudoctor.
    _pip(installed.python, "install", "pytest", cwd=installed.scratch)
    listed = _run(installed, "python", "-m", "pytest", "--markers")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    missing = [line for line in DOCS if f"@pytest.mark.{line}" not in listed.stdout]
    assert missing == [], listed.stdout
