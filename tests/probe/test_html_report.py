"""The HTML report from JSON documents: self-contained, escaped, written atomically, chart optional."""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from html import unescape
from pathlib import Path
from typing import Any

import pytest

from gpudoctor.errors import GpudoctorError
from gpudoctor.probe import html_report, install_hint, stacks, timeline
from tests.probe.html_checks import Page, assert_self_contained

MIB = 1 << 20
MACHINE: dict[str, Any] = {
    "python": "3.11.7", "platform": "linux", "start_method": "fork",
    "start_methods": ["fork", "spawn", "forkserver"],
    "nvml": {"available": False, "reason": "no NVIDIA driver: libnvidia-ml.so.1 not found",
             "driver_version": None, "cuda_driver_version": None, "devices": []},
    "frameworks": {"tensorflow": {"installed": True, "version": "2.21.0", "detail": "CPU-only build"},
                   "cupy": {"installed": False}},
    "host": {"cpu_count": 2, "memory_total": 8 << 30, "memory_available": 6 << 30,
             "cgroup_memory_limit": None, "shm_total": 1 << 30, "env": {"CUDA_VISIBLE_DEVICES": "0"}},
}


def _process(pid: int, start: str, verdict: str, **extra: Any) -> dict[str, Any]:
    found = {"pid": pid, "ppid": 1, "cmdline": ["python", "<script>alert(1)</script>"], "start": start,
             "verdict": verdict, "exit_code": None, "threads_at_fork": None, "runtimes_at_fork": [],
             "rss_peak": 40 * MIB, "gpu_memory_peak": {}, "explanation": "waiting", "blocked_in": None,
             "stack": None, "stack_source": None}
    found.update(extra)
    return found


RUN: dict[str, Any] = {
    "command": ["/usr/bin/python", "/home/me/train.py"], "verdict": "hung", "exit_code": None,
    "explanation": "Hung: <b>2</b> processes", "stop_reason": "hung", "duration": 4.0,
    "processes": [
        _process(10, "root", "hung"),
        _process(11, "fork", "hung", threads_at_fork=7, runtimes_at_fork=["tensorflow"],
                 stack="Thread 11 (idle)\n  parallelFor (libtensorflow.so)", stack_source="py-spy",
                 blocked_in="Eigen::ThreadPoolDevice::parallelFor"),
    ],
    "matches": [],
    "events": [{"event": "fork-parent", "pid": 10, "t": 1.0, "runtimes": ["tensorflow"]},
               {"event": "fork-child", "pid": 11, "t": 1.01}],
    # The parent computes for a second and then waits; its fork child never runs.
    "samples": [{"t": t / 2, "kind": "rss", "bytes": (20 + t) * MIB, "pid": pid, "in_tree": True,
                 "cpu": 0.1 + (min(t, 2) * 0.5 if pid == 10 else 0.0)}
                for t in range(8) for pid in (10, 11) if pid == 10 or t >= 2],
    "memory_limit": 64 * MIB, "memory_measure": "pss",
    "notes": [],
}


def _scenario(variant: str, status: str) -> dict[str, Any]:
    return {**RUN, "name": "tensorflow-fork-after-init", "variant": variant, "status": status,
            "reason": "blocked in <parallelFor>", "rule": "GD101", "rule_name": "fork-after-gpu-init",
            "description": "fork after an op", "expected": ["hung"], "as_expected": status == "hung",
            "duration_s": 4.2}


def _skipped(variant: str) -> dict[str, Any]:
    return {"name": "cupy-fork-after-init", "variant": variant, "status": "skipped",
            "reason": "cupy not installed", "rule": "GD101", "explanation": "Skipped.",
            "duration_s": 0.0, "processes": [], "events": [], "samples": [], "as_expected": None}


SCENARIOS = {"machine": MACHINE, "scenarios": [_scenario("unsafe", "hung"), _scenario("safe", "ok"),
                                                _skipped("unsafe"), _skipped("safe")]}


def test_scenario_page_is_self_contained_and_escaped() -> None:
    text = html_report.scenarios_page(SCENARIOS)
    page = assert_self_contained(text)
    assert "<script>alert(1)</script>" not in text and "&lt;script&gt;" in text
    assert "<b>2</b>" not in text  # the explanation is text, not markup
    assert "verdicts" in page.ids
    assert {"tensorflow-fork-after-init-unsafe", "tensorflow-fork-after-init-safe"} <= set(page.ids)
    assert "cupy-fork-after-init-unsafe" not in page.ids  # skipped: a table row, no section
    assert "cupy not installed" in page.text and "CUDA_VISIBLE_DEVICES=0" in page.text
    assert "Eigen::ThreadPoolDevice::parallelFor" in page.text  # the captured stack
    assert page.tags.count("details") == 2


def test_each_scenario_that_ran_shows_its_unsafe_and_safe_code_beside_the_verdicts() -> None:
    html = html_report.scenarios_page(SCENARIOS)
    page = Page(html)
    assert {"scenario-tensorflow-fork-after-init", "code-tensorflow-fork-after-init-unsafe",
            "code-tensorflow-fork-after-init-safe"} <= set(page.ids)
    assert not {i for i in page.ids if "cupy" in i}  # skipped: a row of the table only
    section = html[html.index('id="scenario-tensorflow-fork-after-init"'):]
    section = section[:section.index("</section>")]
    unsafe = section[section.index('id="code-tensorflow-fork-after-init-unsafe"'):]
    unsafe = unsafe[:unsafe.index("</pre>")]
    lines = re.findall(r'<span class="(changed|same)">(.*?)</span>', unsafe)
    assert ("same", "def unsafe() -&gt; None:") in lines  # read from the script, escaped
    # The one line that differs from the safe variant is marked: the start method.
    assert [unescape(text).strip() for kind, text in lines if kind == "changed"] == \
        ['with multiprocessing.get_context("fork").Pool(2) as pool:']
    # Beside each variant's code, its verdict.
    assert re.search(r"<h3>unsafe <span class=\"badge hung\">hung</span>", section)
    assert re.search(r"<h3>safe <span class=\"badge ok\">ok</span>", section)


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="needs matplotlib (report extra)")
def test_chart_is_inline_svg_with_the_events_marked() -> None:
    page = assert_self_contained(html_report.command_page({"machine": MACHINE, "run": RUN}))
    assert page.tags.count("svg") == 1
    assert "TensorFlow initialized (seen at fork)" in page.text
    assert "fork" in page.text and "stopped: hung" in page.text
    assert "pid 11 (fork, hung)" in page.text
    assert "GPU memory: no NVIDIA driver" in page.text
    assert "gpudoctor probe — python train.py" in page.text  # the title names the program


def test_without_matplotlib_the_page_says_what_the_chart_needs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # "import matplotlib" now raises ImportError
    monkeypatch.setattr(install_hint, "source_checkout", lambda: None)  # an installed package
    assert timeline.svg(RUN, "x") is None
    page = assert_self_contained(html_report.scenarios_page(SCENARIOS))
    assert "svg" not in page.tags
    assert page.text.count(f"{sys.executable} -m pip install matplotlib py-spy") == 2
    assert "make demo" not in page.text and "gpudoctor[report]" not in page.text


def test_the_install_hint_of_a_source_checkout_names_its_own_commands(monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    """gpudoctor is not on the package index: from a clone the hint installs the clone's
    extra with the interpreter that runs gpudoctor (a project's environment or the clone's
    .venv), never a bare `pip install 'gpudoctor[report]'`."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setattr(install_hint, "source_checkout", lambda: tmp_path)
    text = Page(html_report.command_page({"machine": MACHINE, "run": RUN})).text
    assert f"{sys.executable} -m pip install -e '{tmp_path}[report]'" in text
    assert "pip install 'gpudoctor[report]'" not in text
    monkeypatch.setattr(sys, "prefix", str(tmp_path / ".venv"))  # the clone's own .venv
    assert install_hint.commands()[1:] == ("make demo",)


def test_tests_run_from_a_source_checkout() -> None:
    root = install_hint.source_checkout()
    assert root is not None and (root / "gpudoctor" / "__init__.py").is_file()


def test_python_only_stacks_say_how_to_get_native_frames(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.probe.test_stack_frames import FAULTHANDLER

    monkeypatch.setattr(stacks, "find_py_spy", lambda: None)
    monkeypatch.setattr(install_hint, "source_checkout", lambda: None)
    worker = _process(11, "fork", "hung", stack=FAULTHANDLER, stack_source="faulthandler")
    text = Page(html_report.command_page({"machine": MACHINE, "run": {**RUN, "processes": [worker]}})).text
    assert "the native frames (where C/C++ code such as a framework's thread pool waits) need py-spy" in text
    assert f"{sys.executable} -m pip install matplotlib py-spy" in text
    monkeypatch.setattr(stacks, "find_py_spy", lambda: "/usr/bin/py-spy")  # there, not used (--no-native-stacks)
    assert "need py-spy" not in Page(html_report.command_page({"machine": MACHINE, "run": {**RUN, "processes": [
        worker]}})).text


def _ids(svg: str) -> set[str]:
    found = re.findall(r'\bid="([^"]+)"', svg)
    assert len(found) == len(set(found)), "an id used twice"
    return set(found)


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="needs matplotlib (report extra)")
def test_the_timeline_has_a_memory_line_and_a_cpu_lane_per_process_and_the_limit() -> None:
    drawn = timeline.svg(RUN, "run0")
    assert drawn is not None
    ids = _ids(drawn)
    assert {i for i in ids if re.fullmatch(r"run0-memory-\d+", i)} == {"run0-memory-10", "run0-memory-11"}
    assert {i for i in ids if re.fullmatch(r"run0-cpu-\d+", i)} == {"run0-cpu-10", "run0-cpu-11"}
    assert "run0-memory-limit" in ids
    text = Page(drawn).text
    assert "--memory-limit 64.0 MiB (whole tree, PSS)" in text
    assert "idle 2.5 s" in text  # the child, idle from its first sample to its last
    assert "100%" in text and "200%" not in text  # one core's worth at most
    assert "pid 10 root, hung" in text and "pid 11 fork, hung" in text  # the lanes' labels


def test_cpu_use_is_the_cpu_time_between_samples_and_idle_stretches_join() -> None:
    samples = [{"t": t, "kind": "rss", "bytes": 1, "pid": 7, "cpu": c}
               for t, c in ((0.0, 0.0), (0.5, 0.5), (1.0, 0.5), (1.5, 0.501), (2.0, 0.9))]
    use = timeline.cpu_use([*samples, {"t": 0.1, "kind": "rss", "bytes": 1, "pid": 8, "cpu": 1.0}])
    assert list(use) == [7]  # pid 8 was sampled once: no interval to measure
    assert [round(p) for _, _, p in use[7]] == [100, 0, 0, 80]
    assert timeline.idle_stretches(use[7]) == [(0.5, 1.5)]


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="needs matplotlib (report extra)")
def test_a_limit_far_above_the_data_is_named_in_the_legend() -> None:
    drawn = timeline.svg({**RUN, "memory_limit": 8 << 30}, "x")
    assert drawn is not None and "x-memory-limit" in _ids(drawn)
    assert "--memory-limit 8.0 GiB (whole tree, PSS), above the scale" in Page(drawn).text


def _spans(html: str, css: str) -> list[str]:
    """The text of each ``<span>`` whose classes include ``css`` (tags inside removed)."""
    found = re.findall(r'<span class="([^"]*)">(.*?)</span>(?=<span|</pre>)', html)
    return [unescape(re.sub(r"<[^>]+>", "", text)) for classes, text in found if css in classes.split()]


def test_stacks_highlight_the_users_frames_mark_the_blocked_one_and_hide_the_bootstrap() -> None:
    from tests.probe.test_stack_frames import PY_SPY

    launcher = _process(20, "root", "hung", stack=PY_SPY, stack_source="py-spy",
                        blocked_in=stacks.blocked_in_native(PY_SPY))
    html = html_report.command_page({"machine": MACHINE, "run": {**RUN, "processes": [launcher]}})
    stack = html[html.index('<pre class="stack">'):]
    assert _spans(stack, "f-user") == ["    <module> (launcher.py:3)"]
    assert _spans(stack, "f-blocked") == ["    Popen._try_wait (subprocess.py:1959)◀ blocked here"]
    assert "    select_poll_poll_impl (selectmodule.c:655)" in _spans(stack, "f-native")
    assert "sitecustomize" not in stack and "waitpid" not in stack
    assert "1 frame of gpudoctor's own bootstrap" in Page(stack).text
    assert "<details open>" in html  # the blocked process's stack is unfolded


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="needs matplotlib (report extra)")
def test_a_process_too_short_lived_for_a_lane_is_named_under_the_chart() -> None:
    brief = _process(12, "spawn", "ok")  # no sample at all
    page = Page(html_report.command_page({"machine": MACHINE, "run": {**RUN, "processes": [*RUN["processes"], brief]}}))
    assert "No CPU lane for pid 12: sampled less than twice" in page.text
    assert "No CPU lane" not in Page(html_report.command_page({"machine": MACHINE, "run": RUN})).text


def test_an_attached_trees_chart_ends_with_the_watch() -> None:
    run = {**RUN, "stop_reason": "attached", "duration": 7.7, "events": []}
    assert [(m.t, m.label) for m in timeline.marks(run, {})] == [(3.5, "end of the watch (nothing stopped)")]


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="needs matplotlib (report extra)")
def test_a_command_page_has_its_sections_in_order() -> None:
    from tests.probe.test_stack_frames import PY_SPY

    root = _process(10, "root", "hung", stack=PY_SPY, stack_source="py-spy",
                    blocked_in=stacks.blocked_in_native(PY_SPY))
    html = html_report.command_page({"machine": MACHINE, "run": {**RUN, "processes": [root, RUN["processes"][1]]}})
    headings = re.findall(r"<h[23][^>]*>([^<]+)", html)
    assert [h.strip() for h in headings] == ["Machine", "Verdict", "Explanation",
                                             "Timeline: memory and CPU per process", "Processes", "Stacks"]
    ids = _ids(html[html.index("<svg"):html.index("</svg>")])
    assert {"run0-memory-10", "run0-memory-11", "run0-cpu-10", "run0-cpu-11", "run0-memory-limit"} <= ids
    assert _spans(html, "f-user") == ["    <module> (launcher.py:3)"]
    assert "sitecustomize" not in html


def test_marks_merge_simultaneous_events() -> None:
    run = {**RUN, "events": [{"event": "fork-child", "pid": p, "t": 1.0 + p / 1000} for p in (11, 12, 13)]}
    found = timeline.marks(run, {})
    assert [m.label for m in found] == ["fork ×3", "stopped: hung"]


def test_write_is_atomic_and_replaces(tmp_path: Path) -> None:
    target = tmp_path / "report.html"
    target.write_text("old")
    html_report.write(target, "<!doctype html>new")
    assert target.read_text() == "<!doctype html>new"
    assert os.listdir(tmp_path) == ["report.html"]
    with pytest.raises(GpudoctorError, match="is a directory"):
        html_report.check_target(str(tmp_path))


INJECTED = """\
import os
import re
from html import unescape
import sys

print("<script>alert(1)</script>", flush=True)
print(os.environ["CUDA_VISIBLE_DEVICES"], flush=True)
sys.stderr.write("RuntimeError: Cannot re-initialize CUDA in forked subprocess <script>alert(2)</script>\\n")
sys.exit(1)
"""


@pytest.mark.timeout(120)
def test_what_a_supervised_program_controls_is_shown_as_text(tmp_path: Path) -> None:
    """Its output, an environment value and its folder's name, each holding markup: the page
    shows them as text and holds no element they would have made."""
    from tests.probe.helpers import gpudoctor

    folder = tmp_path / "run <b>here & 'there'"
    folder.mkdir()
    source = folder / "<img src=x onerror=alert(4)>.py"
    source.write_text(INJECTED)
    page_file = tmp_path / "report.html"
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "<script>alert(3)</script>"}
    done = gpudoctor(["probe", "--timeout", "60", "--html", str(page_file), "--", sys.executable, str(source)],
                     env=env, cwd=folder)
    assert done.returncode == 1, done.stdout + done.stderr
    text = page_file.read_text()
    page = assert_self_contained(text)  # no <script>, no link, nothing fetched
    assert "<script" not in text.lower() and "<img" not in text and "<b>here" not in text
    assert not {"script", "img"} & set(page.tags)
    shown = page.text
    assert "CUDA_VISIBLE_DEVICES=<script>alert(3)</script>" in shown  # the environment, as text
    assert "Cannot re-initialize CUDA in forked subprocess <script>alert(2)</script>" in shown  # its output
    assert str(source) in shown  # the command line, with the folder's name, as text
    assert "gpudoctor probe — python <img src=x onerror=alert(4)>.py" in shown  # the title, escaped


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="needs matplotlib (report extra)")
def test_chart_labels_are_text_not_markup_or_mathtext() -> None:
    """A runtime name a process reported and the NVML note go into the chart: "$...$" is not
    a formula (a bad one failed the whole page), markup is escaped in the SVG."""
    run = {**RUN, "events": [{"event": "fork-parent", "pid": 10, "t": 1.0,
                              "runtimes": ["jax:$\\frac$", "jax:<script>alert(1)</script>"]}]}
    drawn = timeline.svg(run, "x", gpu_note="<b>no</b> $x$ & y")
    assert drawn is not None
    page = Page(drawn)
    assert "JAX $\\frac$ initialized (seen at fork)" in page.text
    assert "JAX <script>alert(1)</script> initialized (seen at fork)" in page.text
    assert "GPU memory: <b>no</b> $x$ & y" in page.text
    assert "script" not in page.tags and "b" not in page.tags


def test_the_page_shows_the_structured_causes_of_the_report() -> None:
    cause = {"kind": "fork-after-init", "certainty": "likely", "rule": "GD101", "frameworks": ["tensorflow"],
             "parent": 10, "processes": [11], "evidence": ["pid 11 was idle <for> 4.0 s"],
             "fix": "start the workers with the spawn start method", "added_later": True}
    page = Page(html_report.command_page({"schema_version": 1, "machine": MACHINE,
                                          "run": {**RUN, "causes": [cause]}}))
    assert "causes" in page.ids
    for text in ("fork-after-init", "GD101", "likely", "tensorflow", "pid 11 was idle <for> 4.0 s",
                 "start the workers with the spawn start method"):
        assert text in page.text
    assert "causes" not in Page(html_report.command_page({"machine": MACHINE, "run": RUN})).ids


def test_the_page_ranks_who_held_the_memory_and_marks_the_workers_copies() -> None:
    holders = [{"pid": 10, "role": "parent", "rss_peak": 300 * MIB, "share": 0.3, "own": 290 * MIB},
               *({"pid": pid, "role": f"spawn worker {pid - 10}", "rss_peak": 170 * MIB, "share": 0.17,
                  "own": 160 * MIB, "gpu_peak": None} for pid in (11, 12, 13, 14)),
               {"pid": 15, "role": "<tracker>", "rss_peak": 20 * MIB, "share": 0.02}]
    workers = {"parent": 10, "start": "spawn", "processes": [11, 12, 13, 14], "siblings": 4, "each": 170 * MIB,
               "together": 680 * MIB, "total": 1000 * MIB, "copies": True, "parent_rss": 300 * MIB}
    run = {**RUN, "verdict": "oom", "memory": {"total": 1000 * MIB, "processes": holders, "workers": workers}}
    page = Page(html_report.command_page({"schema_version": 1, "machine": MACHINE, "run": run}))
    assert "memory" in page.ids
    for text in ("Memory by process", "own (USS) at --memory-limit", "spawn worker 4", "<tracker>", "30%",
                 "290.0 MiB", "4 spawn workers × ~170.0 MiB (each its own copy: together 680.0 MiB of the "
                 "1000.0 MiB; their parent, pid 10, holds 300.0 MiB too: 5 copies in all)."):
        assert text in page.text, text
    assert page.text.count("peak GPU") == 1  # the processes table's: none had GPU memory, no column here
    assert "memory" not in Page(html_report.command_page({"machine": MACHINE, "run": RUN})).ids
