"""gpudoctor's pytest plugin: GPU-memory budgets, fork safety and hang diagnosis as assertions.

Registered through the ``pytest11`` entry point. Markers: ``fork_safe``,
``hang_timeout``, ``gpu_memory_limit``, ``gpu_memory_leak_limit``; fixtures:
``gpu_monitor``, ``isolated``. Measurement happens during the test's call (in a
watcher process and fork hooks); the verdict is given in
``pytest_runtest_makereport``, with a one-line reason and a named report section.

A test that uses none of them costs a marker lookup: everything else (psutil,
NVML, the probe) is imported only when a test asks for it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Generator
from typing import TYPE_CHECKING

import pytest

from gpudoctor.pytest_plugin import suite_options
from gpudoctor.pytest_plugin.markers import DOCS, MarkerError, Plan
from gpudoctor.pytest_plugin.suite_options import SUITE, item_plan

if TYPE_CHECKING:
    from pathlib import Path

    from gpudoctor.pytest_plugin.isolation import Isolated
    from gpudoctor.pytest_plugin.item_watch import ItemWatch
    from gpudoctor.pytest_plugin.monitor import GpuMonitor



@dataclasses.dataclass
class _State:
    """What the plugin learns over the session."""

    nvml_reason: str | None = None  # once NVML failed, it fails for every later test
    not_checked: dict[str, list[str]] = dataclasses.field(default_factory=dict)


_STATE = pytest.StashKey[_State]()
NOT_CHECKED_PROPERTY = "gpudoctor_gpu_memory"
NOT_CHECKED_PREFIX = "not checked: "
_WATCH = pytest.StashKey["ItemWatch"]()


def pytest_addoption(parser: pytest.Parser) -> None:
    suite_options.add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    for line in DOCS:
        config.addinivalue_line("markers", line)
    config.stash[SUITE] = suite_options.read(config)
    config.stash[_STATE] = _State()
    config.pluginmanager.register(_NotCheckedReports(config), "gpudoctor-not-checked")
    if config.pluginmanager.hasplugin("timeout"):
        from gpudoctor.pytest_plugin import timeout_interop

        config.pluginmanager.register(timeout_interop, "gpudoctor-timeout")


class _NotCheckedReports:
    """Gather the tests whose GPU memory was not checked from their reports, not their items:
    under pytest-xdist the tests run in worker processes, and only their reports reach the
    process that prints the summary."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call" or self.config.stash[SUITE].require_nvml:
            return
        state = self.config.stash[_STATE]
        for name, value in report.user_properties:
            if name == NOT_CHECKED_PROPERTY:
                state.not_checked.setdefault(str(value).removeprefix(NOT_CHECKED_PREFIX), []).append(report.nodeid)


def _watch(item: pytest.Item) -> ItemWatch:
    """Return the item's watch, creating it on first use."""
    watch = item.stash.get(_WATCH, None)
    if watch is None:
        from gpudoctor.pytest_plugin.item_watch import ItemWatch

        watch = item.stash[_WATCH] = ItemWatch(item.config.stash[SUITE].interval)
    return watch


def _with_outer_deadline(item: pytest.Item, plan: Plan) -> Plan:
    """Keep pytest-timeout's deadline when it is shorter than the marker's."""
    if plan.hang is None or not item.config.pluginmanager.hasplugin("gpudoctor-timeout"):
        return plan
    from gpudoctor.pytest_plugin.timeout_interop import OUTER_TIMEOUT

    outer = item.stash.get(OUTER_TIMEOUT, None)
    if outer is None or outer >= plan.hang.seconds:
        return plan
    return dataclasses.replace(plan, hang=dataclasses.replace(plan.hang, seconds=outer))


def _plan(item: pytest.Item) -> Plan | None:
    """Return the test's plan; fail the test with one line naming the test and the marker
    when a marker was given arguments it cannot take."""
    try:
        return item_plan(item)
    except MarkerError as error:
        message = f"invalid marker on {item.name}: {error}"
    pytest.fail(message, pytrace=False)  # outside the except: no "During handling of ..." chain


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    # As pytest-timeout does with timeout(...): a marker's bad argument is an error of the
    # test's setup, before its fixtures run, not a failure of the test itself.
    _plan(item)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    plan = _plan(item)
    if plan is None and _WATCH not in item.stash:
        return (yield)
    plan = _with_outer_deadline(item, plan or Plan())
    watch = _watch(item)
    state = item.config.stash[_STATE]
    gpu = plan.needs_gpu and state.nvml_reason is None
    if plan.hang is not None or gpu:
        watch.start_watcher(gpu)
    if plan.needs_gpu and watch.client is None and watch.error is None:
        watch.error = state.nvml_reason
    if gpu and watch.client is not None and watch.gpu:
        state.nvml_reason = watch.nvml_reason
    with watch.call(plan, item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None],
                              ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    watch = item.stash.get(_WATCH, None)
    if call.when != "call" or watch is None or watch.record is None:
        return report
    from gpudoctor.pytest_plugin.judge import apply, judge

    state, suite = item.config.stash[_STATE], item.config.stash[SUITE]
    judgement = judge(watch.record, state.nvml_reason, suite.require_nvml)
    if judgement.not_checked:
        # On the item, for the reports still to come (JUnit XML reads the teardown's), and on this one.
        note = (NOT_CHECKED_PROPERTY, NOT_CHECKED_PREFIX + judgement.not_checked)
        item.user_properties.append(note)
        report.user_properties.append(note)
    if judgement.failures and not report.skipped:
        from gpudoctor.pytest_plugin.report_files import place

        judgement = dataclasses.replace(judgement, failures=tuple(place(item.config, item.nodeid, f)
                                                                   for f in judgement.failures))
    apply(report, call.excinfo, judgement)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, object, object]:
    try:
        return (yield)
    finally:
        watch = item.stash.get(_WATCH, None)
        if watch is not None:
            watch.close()
            del item.stash[_WATCH]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if state is None or not state.not_checked:
        return
    from gpudoctor.pytest_plugin.summary import not_checked_lines

    terminalreporter.section("gpudoctor: GPU memory not checked", sep="=")
    for line in not_checked_lines(state.not_checked, config.get_verbosity() > 0):
        terminalreporter.write_line(line)


@pytest.fixture
def gpu_monitor(request: pytest.FixtureRequest) -> GpuMonitor:
    """Sample the GPU memory of the test's processes; read it with ``peak()`` and ``per_process()``."""
    from gpudoctor.pytest_plugin.monitor import GpuMonitor

    watch = _watch(request.node)
    state = request.config.stash[_STATE]
    if state.nvml_reason is None:
        watch.start_watcher(gpu=True)
        if watch.client is not None:
            state.nvml_reason = watch.nvml_reason
    else:
        watch.error = state.nvml_reason
    return GpuMonitor(watch)


@pytest.fixture
def isolated(tmp_path: Path) -> Isolated:
    """Run a picklable callable in a sandboxed fresh interpreter: ``isolated(f, *args, timeout=60)``."""
    from gpudoctor.pytest_plugin.isolation import Isolated

    return Isolated(tmp_path)
