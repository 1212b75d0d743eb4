"""The plugin's settings for a whole run: command-line options and ini keys, one help text each.

One precedence, pytest-timeout's: a marker on a test wins over the command line, which
wins over the ini file (``pytest.ini``, ``[tool.pytest.ini_options]``, ...), which wins
over the default. Every option has an ini key of the same name (``--gpudoctor-hang-timeout``
and ``gpudoctor_hang_timeout``), so a project sets its defaults once and a run can
change them; ``-o KEY=VALUE`` changes an ini key for one run.

Standard library and pytest only: this module is imported at pytest startup.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpudoctor.pytest_plugin.markers import Plan, plan_for

GROUP = "gpudoctor"

HANG_TIMEOUT_HELP = (
    "give every test a hang_timeout of S seconds: past it, the stacks of the test's process tree are "
    "dumped, the hang is diagnosed and the test fails (a test's own hang_timeout marker wins; "
    "hang_timeout(0) exempts a test; 0 here: no suite-wide deadline). Default: none")
FORK_SAFE_HELP = (
    "check every test as if it were marked fork_safe: fail it if a process of its tree forked while "
    "it had a GPU runtime initialized (a test's own fork_safe marker wins; fork_safe(False) exempts "
    "a test). Default: false")
REQUIRE_NVML_HELP = (
    "fail a test whose gpu_memory_limit or gpu_memory_leak_limit cannot be checked because NVML is "
    "missing or cannot read per-process GPU memory (without it, such tests are listed as not "
    "checked). Default: false")
REPORT_DIR_HELP = (
    "write the full report of a hung test (every process, every stack) to a file in this folder; "
    "the failure message names it. Default: gpudoctor/ in pytest's cache folder (-v also shows it "
    "in the failure; with the cache off and no folder given it is shown there)")
INTERVAL_HELP = (
    "seconds between NVML readings of the GPU memory of a test's processes (each reading lists the "
    "GPU's processes, ~5 ms under a driver-wide lock). Default: 0.5")

HANG_TIMEOUT = "gpudoctor_hang_timeout"
FORK_SAFE = "gpudoctor_fork_safe"
REQUIRE_NVML = "gpudoctor_require_nvml"
REPORT_DIR = "gpudoctor_report_dir"
INTERVAL = "gpudoctor_sample_interval"


@dataclass(frozen=True)
class SuiteOptions:
    """What the run asks of every test, unless the test's own markers say otherwise."""

    hang_timeout: float | None = None  # None: no suite-wide deadline
    fork_safe: bool = False
    require_nvml: bool = False
    report_dir: Path | None = None  # None: pytest's cache folder, when there is one
    interval: float = 0.5


SUITE = pytest.StashKey[SuiteOptions]()


def _seconds(text: str) -> float:
    """Read a number of seconds; 0 means none."""
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"must be a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"must be 0 (none) or a positive number of seconds, got {text!r}")
    return value


def _option_seconds(text: str) -> float:
    try:
        return _seconds(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def add_options(parser: pytest.Parser) -> None:
    """Add the options and ini keys to pytest's parser (``pytest --help`` lists both)."""
    group = parser.getgroup(GROUP, "gpudoctor: fork safety, hangs and GPU memory of each test")
    group.addoption("--gpudoctor-hang-timeout", dest=HANG_TIMEOUT, type=_option_seconds, metavar="S",
                    help=HANG_TIMEOUT_HELP + f"; overrides the {HANG_TIMEOUT} ini key.")
    group.addoption("--gpudoctor-fork-safe", dest=FORK_SAFE, action="store_true", default=None,
                    help=FORK_SAFE_HELP + f"; overrides the {FORK_SAFE} ini key.")
    group.addoption("--gpudoctor-require-nvml", dest=REQUIRE_NVML, action="store_true", default=None,
                    help=REQUIRE_NVML_HELP + f"; overrides the {REQUIRE_NVML} ini key.")
    group.addoption("--gpudoctor-report-dir", dest=REPORT_DIR, metavar="DIR",
                    help=REPORT_DIR_HELP + f"; overrides the {REPORT_DIR} ini key.")
    parser.addini(HANG_TIMEOUT, HANG_TIMEOUT_HELP, default="0")
    parser.addini(FORK_SAFE, FORK_SAFE_HELP, type="bool", default=False)
    parser.addini(REQUIRE_NVML, REQUIRE_NVML_HELP, type="bool", default=False)
    parser.addini(REPORT_DIR, REPORT_DIR_HELP + " (relative to the ini file's folder)", default="")
    parser.addini(INTERVAL, INTERVAL_HELP, default="0.5")


def _ini(config: pytest.Config, name: str) -> object:
    """Read an ini key; a value pytest cannot read is a usage error naming the key."""
    try:
        return config.getini(name)
    except (ValueError, pytest.UsageError) as error:  # pytest's own message names the value, not the key
        raise pytest.UsageError(f"{name} in the pytest configuration: {error}") from None


def _ini_seconds(config: pytest.Config, name: str) -> float:
    try:
        return _seconds(str(_ini(config, name)).strip() or "0")
    except ValueError as error:
        raise pytest.UsageError(f"{name} in the pytest configuration {error}") from None


def _flag(config: pytest.Config, name: str) -> bool:
    given = config.getoption(name)
    return bool(_ini(config, name)) if given is None else bool(given)


def _report_dir(config: pytest.Config) -> Path | None:
    given = config.getoption(REPORT_DIR)
    if given:
        return config.invocation_params.dir / str(given)
    configured = str(_ini(config, REPORT_DIR)).strip()
    if not configured:
        return None
    base = config.inipath.parent if config.inipath is not None else config.rootpath
    return base / configured


def read(config: pytest.Config) -> SuiteOptions:
    """Read the run's settings: command line, then ini file, then defaults."""
    hang = config.getoption(HANG_TIMEOUT)
    if hang is None:
        hang = _ini_seconds(config, HANG_TIMEOUT)
    interval = _ini_seconds(config, INTERVAL)
    if interval == 0:
        raise pytest.UsageError(f"{INTERVAL} in the pytest configuration must be more than 0 seconds")
    return SuiteOptions(hang_timeout=hang or None, fork_safe=_flag(config, FORK_SAFE),
                        require_nvml=_flag(config, REQUIRE_NVML), report_dir=_report_dir(config),
                        interval=interval)


def item_plan(item: pytest.Item) -> Plan | None:
    """Return what the test's markers and the run's settings ask for; None: nothing.

    Raises MarkerError for a marker given arguments it cannot take.
    """
    suite = item.config.stash.get(SUITE, None) or SuiteOptions()
    return plan_for(item, suite.hang_timeout, suite.fork_safe)
