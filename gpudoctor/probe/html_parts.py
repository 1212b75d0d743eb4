"""The pieces of the HTML report: machine summary, run sections, process and stack listings.

Every function takes the JSON documents ``--json`` prints and returns HTML text;
every value from them is escaped: for HTML, and its control characters as on a terminal
(``gpudoctor.printable``), line breaks kept.
"""

from __future__ import annotations

from html import escape
from typing import Any

from gpudoctor.printable import printable_lines
from gpudoctor.probe import explain_memory, install_hint, stack_frames
from gpudoctor.probe.diagnosis import Cause, ErrorMatch, MemoryAttribution, ProcessVerdict
from gpudoctor.probe.units import format_size
from gpudoctor.probe.wording import plural


def e(value: object) -> str:
    """Escape any value for HTML text and attributes, and its control characters (an escape
    sequence a process wrote would otherwise reach whoever copies it from the page)."""
    return escape(printable_lines("" if value is None else str(value)), quote=True)


def badge(status: str) -> str:
    """Return a status as a coloured label."""
    return f'<span class="badge {e(status)}">{e(status)}</span>'


def _row(label: str, value: str) -> str:
    return f"<tr><th>{e(label)}</th><td>{value}</td></tr>"


def _gpus(nvml: dict[str, Any]) -> str:
    if not nvml.get("available"):
        return e(nvml.get("reason") or "NVML not available")
    lines = [f"driver {e(nvml.get('driver_version'))}, CUDA driver API "
             f"{e(nvml.get('cuda_driver_version'))}"]
    for d in nvml.get("devices", []):
        memory = d.get("memory") or {}
        lines.append(f"GPU {e(d['index'])}: <b>{e(d.get('name'))}</b>, "
                     f"{e(format_size(memory.get('used')))} used of {e(format_size(memory.get('total')))}, "
                     f"compute mode {e(d.get('compute_mode'))}")
        for p in d.get("processes") or ():
            lines.append(f"&nbsp;&nbsp;pid {e(p['pid'])}: {e(format_size(p.get('used_memory')))}")
        lines += [f'&nbsp;&nbsp;<span class="dim">{e(note)}</span>' for note in d.get("notes", [])]
    return "<br>".join(lines)


def machine(m: dict[str, Any]) -> str:
    """Return the machine summary table."""
    installed = [f"<b>{e(name)}</b> {e(f.get('version'))}" + (f" ({e(f['detail'])})" if f.get("detail") else "")
                 for name, f in m.get("frameworks", {}).items() if f.get("installed")]
    missing = [e(name) for name, f in m.get("frameworks", {}).items() if not f.get("installed")]
    frameworks = "<br>".join(installed) or "none of them"
    if missing:
        frameworks += f'<br><span class="dim">not installed: {", ".join(missing)}</span>'
    host = m.get("host", {})
    env = {k: v for k, v in (host.get("env") or {}).items() if v is not None}
    env_text = "<br>".join(f"<code>{e(k)}={e(v)}</code>" for k, v in env.items()) or \
        '<span class="dim">none of the GPU variables is set</span>'
    limit = host.get("cgroup_memory_limit")
    rows = [
        _row("GPUs (NVML)", _gpus(m.get("nvml", {}))),
        _row("Frameworks", frameworks),
        _row("Python", f"{e(m.get('python'))} on {e(m.get('platform'))}, default start method "
             f"<b>{e(m.get('start_method'))}</b> (available: {e(', '.join(m.get('start_methods', [])))})"),
        _row("Environment", env_text),
        _row("Host", f"{e(host.get('cpu_count'))} CPUs, {e(format_size(host.get('memory_available')))} "
             f"available of {e(format_size(host.get('memory_total')))}, cgroup limit "
             f"{e(format_size(limit) if limit else 'none')}, /dev/shm {e(format_size(host.get('shm_total')))}"),
    ]
    return f'<table class="kv">{"".join(rows)}</table>'


def processes(run: dict[str, Any]) -> str:
    """Return the table of the run's processes and their verdicts."""
    head = ("<tr><th>pid</th><th>parent</th><th>start</th><th>verdict</th><th>exit</th>"
            "<th>threads at fork</th><th>runtimes at fork</th><th>peak RSS</th><th>peak GPU</th>"
            "<th>why</th></tr>")
    rows = []
    for p in _processes(run):
        gpu = ", ".join(f"GPU {d}: {format_size(b)}" for d, b in p.gpu_memory_peak.items())
        why = e(p.explanation)
        if p.blocked_in:
            why += f'<br><span class="dim">blocked in {e(p.blocked_in)}</span>'
        command = " ".join(p.cmdline)
        rows.append(
            f'<tr><td title="{e(command)}">{e(p.pid)}</td><td>{e(p.ppid)}</td>'
            f"<td>{e(p.start)}{'<br>' + e(p.role) if p.role else ''}</td><td>{badge(p.verdict)}</td>"
            f"<td>{e(p.exit_code)}</td><td>{e(p.threads_at_fork)}</td>"
            f"<td>{e(', '.join(p.runtimes_at_fork))}</td>"
            f"<td class=\"nowrap\">{e(format_size(p.rss_peak or None))}</td><td class=\"nowrap\">{e(gpu)}</td>"
            f"<td>{why}</td></tr>")
    return f'<table class="grid">{head}{"".join(rows)}</table>'


def _processes(run: dict[str, Any]) -> list[ProcessVerdict]:
    """The judged processes of a run's document (a command's, or a scenario variant's)."""
    return [ProcessVerdict.from_json(p) for p in run.get("processes") or ()]


_FRAME_CLASSES = {stack_frames.USER: "f-user", stack_frames.LIBRARY: "f-lib", stack_frames.NATIVE: "f-native",
                  stack_frames.THREAD: "f-thread", stack_frames.HEADER: "f-head"}


def stack(p: ProcessVerdict) -> str:
    """Return one process's stack, a line per frame: the user's frames highlighted, the
    blocked frame marked, gpudoctor's bootstrap frames left out (said in a line)."""
    lines = stack_frames.lines(p.stack or "", p.stack_source, p.blocked_in)
    shown = []
    for line in lines:
        if line.kind == stack_frames.BOOTSTRAP:
            continue
        css = _FRAME_CLASSES[line.kind] + (" f-blocked" if line.blocked else "")
        tag = '<span class="blocked-tag">◀ blocked here</span>' if line.blocked else ""
        shown.append(f'<span class="{css}">{e(line.text)}{tag}</span>')
    hidden = sum(1 for line in lines if line.kind == stack_frames.BOOTSTRAP)
    if hidden:
        shown.append(f'<span class="f-note">({plural(hidden, "frame")} of gpudoctor\'s own bootstrap, which records '
                     "forks and exits in every process, not shown)</span>")
    return f'<pre class="stack">{"".join(shown)}</pre>'


def _opened(found: list[ProcessVerdict]) -> int | None:
    """The stack shown unfolded: the first hung fork child's, else the first blocked one's."""
    for wanted in (lambda p: p.verdict == "hung" and p.start == "fork", lambda p: bool(p.blocked_in)):
        index = next((i for i, p in enumerate(found) if wanted(p)), None)
        if index is not None:
            return index
    return None


def stacks(run: dict[str, Any]) -> str:
    """Return the captured stacks, one collapsible block per process."""
    found = [p for p in _processes(run) if p.stack]
    if not found:
        return ""
    opened = _opened(found)
    blocks = []
    for i, p in enumerate(found):
        where = f" — blocked in {e(p.blocked_in)}" if p.blocked_in else ""
        blocks.append(f"<details{' open' if i == opened else ''}><summary>pid {e(p.pid)} ({e(p.start)}, "
                      f"{e(p.verdict)}, {e(p.stack_source)}){where}</summary>{stack(p)}</details>")
    key = ('<p class="stack-key"><span class="f-user">your code</span> <span class="f-lib">library '
           '(standard library, installed packages)</span> <span class="f-native">native (C/C++)</span> '
           '<span class="f-blocked">the frame it waits in<span class="blocked-tag">◀ blocked here</span>'
           "</span></p>")
    return "<h3>Stacks</h3>" + key + _py_spy_hint(found) + "".join(blocks)


def _py_spy_hint(found: list[ProcessVerdict]) -> str:
    """Say how to get native frames when the stacks have Python frames only for want of py-spy."""
    from gpudoctor.probe.stacks import find_py_spy

    if all(p.stack_source == "py-spy" for p in found) or find_py_spy() is not None:
        return ""
    return ('<p class="note">Python frames only: the native frames (where C/C++ code such as a '
            "framework's thread pool waits) need py-spy, which is not installed (the <code>report</code> "
            f"extra): {install_hint.html()}</p>")


def matches(run: dict[str, Any]) -> str:
    """Return the known error strings found in the run's output."""
    found = [ErrorMatch.from_json(m) for m in run.get("matches") or ()]
    if not found:
        return ""
    items = "".join(f"<li><b>{e(m.kind)}</b> ({e(m.framework)}, "
                    f"docs/error-strings.md #{e(m.row or '-')}): <code>{e(m.line)}</code></li>"
                    for m in found[:20])
    return f"<h3>Known error strings in the output</h3><ul>{items}</ul>"


def chart(run: dict[str, Any], salt: str, gpu_note: str | None) -> str:
    """Return the timeline figure (memory, CPU lanes), or a note saying what it needs."""
    from gpudoctor.probe import timeline

    drawn = timeline.svg(run, salt, gpu_note)
    if drawn is None:
        return ('<p class="note">The timeline needs matplotlib (the <code>report</code> extra): '
                f"{install_hint.html()}</p>")
    unsampled, beyond = timeline.without_lane(run)
    said = []
    if unsampled:
        said.append(f"no CPU lane for pid {', '.join(map(str, unsampled))}: sampled less than twice "
                    "(shorter-lived than the sampling interval)")
    if beyond:
        said.append(f"{plural(len(beyond), 'more process', 'more processes')} not drawn as lanes (the first ones "
                    "are)")
    text = "; ".join(said)
    caption = f'<figcaption class="dim">{e(text[:1].upper() + text[1:])}.</figcaption>' if said else ""
    return f'<figure class="chart">{drawn}{caption}</figure>'


def causes(run: dict[str, Any]) -> str:
    """Return the causes the diagnosis named, from their structured form in the report."""
    found = [Cause.from_json(c) for c in run.get("causes") or ()]
    if not found:
        return ""
    rows = "".join(
        f"<tr><td><b>{e(c.kind)}</b></td><td>{e(c.rule or '')}</td><td>{badge(c.certainty)}</td>"
        f"<td>{e(', '.join(c.frameworks))}</td><td>{e('' if c.parent is None else c.parent)}</td>"
        f"<td>{e(', '.join(map(str, c.processes)))}</td>"
        f"<td>{'<br>'.join(e(x) for x in c.evidence[:8])}</td><td>{e(c.fix or '')}</td></tr>"
        for c in found)
    return ('<h3>Causes</h3><table class="grid" id="causes"><tr><th>cause</th><th>rule</th><th>certainty</th>'
            "<th>frameworks</th><th>parent</th><th>processes</th><th>evidence</th><th>fix</th></tr>"
            f"{rows}</table>")


def memory(run: dict[str, Any]) -> str:
    """Return who held the memory of a run that ran out of it: the processes ranked by their
    peak, and the workers that each held about as much, from the report's ``memory``."""
    found = run.get("memory")
    if not found:
        return ""
    held = MemoryAttribution.from_json(found)
    workers = held.workers
    grouped = set(workers.processes) if workers is not None else set()
    own = any(h.own is not None for h in held.processes)
    gpu = any(h.gpu_peak for h in held.processes)
    head = ("<tr><th>pid</th><th>role</th><th>peak RSS</th><th>share</th>"
            + ("<th>own (USS) at --memory-limit</th>" if own else "") + ("<th>peak GPU</th>" if gpu else "")
            + "</tr>")
    rows = []
    for h in held.processes:
        share = f'<span class="bar" style="width:{100 * h.share:.0f}px"></span> {100 * h.share:.0f}%'
        marked = ' class="group"' if h.pid in grouped else ""
        rows.append(f"<tr{marked}><td>{e(h.pid)}</td><td>{e(h.role)}</td>"
                    f'<td class="nowrap">{e(format_size(h.rss_peak))}</td><td class="nowrap">{share}</td>'
                    + (f'<td class="nowrap">{e(format_size(h.own))}</td>' if own else "")
                    + (f'<td class="nowrap">{e(format_size(h.gpu_peak))}</td>' if gpu else "") + "</tr>")
    said = f"<p>{e(explain_memory.group_line(workers))}</p>" if workers is not None else ""
    return (f'<h3>Memory by process</h3><p class="dim">Peak resident memory (RSS) of each process, '
            f"{e(format_size(held.total))} in all; a fork child's RSS counts the pages it shares with its parent."
            f'</p><table class="grid" id="memory">{head}{"".join(rows)}</table>{said}')


def run_body(run: dict[str, Any], salt: str, gpu_note: str | None) -> str:
    """Return everything shown about one supervised run below its heading."""
    return (f"<h3>Explanation</h3><pre class=\"explanation\">{e(run.get('explanation'))}</pre>{causes(run)}"
            f"{memory(run)}"
            f"<h3>Timeline: memory and CPU per process</h3>{chart(run, salt, gpu_note)}"
            f"<h3>Processes</h3>{processes(run)}{matches(run)}{stacks(run)}")
