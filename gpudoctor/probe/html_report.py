"""Write the probe's report as one self-contained HTML page.

No network: the CSS is inline, the chart is inline SVG, there is no script and
no external resource, so the file can be mailed, attached to an issue or opened
offline. The page is built from the same JSON documents ``--json`` prints and is
written atomically (a temporary file renamed over the target), so a reader never
sees half a report.
"""

from __future__ import annotations

import difflib
import os
import re
import time
from pathlib import Path
from typing import Any

from gpudoctor import __version__
from gpudoctor.errors import GpudoctorError
from gpudoctor.output_file import SOURCE_SUFFIXES
from gpudoctor.probe import html_parts
from gpudoctor.probe.html_parts import badge, e
from gpudoctor.probe.wording import plural

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d2127;
 max-width:1180px;margin:0 auto;padding:24px 28px 64px;background:#fff}
h1{font-size:24px;margin:0 0 2px}h2{font-size:19px;margin:34px 0 8px;border-bottom:1px solid #dde1e6;
 padding-bottom:4px}h3{font-size:15px;margin:20px 0 6px;color:#3a4049}
.meta,.dim{color:#6a717b}.note{background:#fff8e1;border:1px solid #f0d98c;padding:8px 12px;border-radius:4px}
table{border-collapse:collapse;width:100%}th,td{text-align:left;vertical-align:top;padding:5px 8px}
table.kv th{width:150px;color:#3a4049;font-weight:600}table.kv tr{border-bottom:1px solid #eef0f2}
table.grid{font-size:13px}table.grid th{background:#f3f5f7;border-bottom:1px solid #dde1e6}
table.grid td{border-bottom:1px solid #eef0f2}table.grid tr:hover td{background:#fafbfc}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;font-weight:600;
 color:#fff;background:#6a717b;white-space:nowrap}
.badge.ok{background:#2e7d32}.badge.hung,.badge.crashed,.badge.oom,.badge.failed,.badge.crash-loop{background:#c62828}
.badge.killed,.badge.error{background:#b26a00}.badge.skipped{background:#aab1ba}
.badge.observed{background:#c62828}.badge.likely{background:#b26a00}.badge.latent,.badge.idle{background:#6a717b}
.badge.expected{background:#e8f5e9;color:#2e7d32}.badge.unexpected{background:#fff3e0;color:#b26a00}
pre{background:#f6f8fa;border:1px solid #e3e7eb;border-radius:4px;padding:10px 12px;overflow-x:auto;
 font:12.5px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;white-space:pre-wrap}
pre.explanation{background:#fbfcfd;font-size:13px}code{font:12.5px ui-monospace,Menlo,Consolas,monospace}
figure.chart{margin:6px 0}figure.chart svg{width:100%;height:auto}
details{margin:4px 0}summary{cursor:pointer;font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12.5px}
section.run{margin-top:8px}a{color:#1a5fb4;text-decoration:none}a:hover{text-decoration:underline}
.nowrap{white-space:nowrap}tr.skipped td{color:#6a717b}
.bar{display:inline-block;height:9px;background:#1a5fb4;vertical-align:middle}tr.group td{background:#fff4e5}
pre.stack{white-space:pre;padding:8px 0}pre.stack>span{display:block;padding:0 12px}
.f-user{background:#fff1b8;font-weight:600}.f-lib{color:#3a4049}.f-native{color:#8a9099}
.f-thread{color:#1a5fb4;font-weight:600;margin-top:4px}.f-head,.f-note{color:#6a717b}
.f-blocked{background:#fde2e1;box-shadow:inset 3px 0 #c62828;color:#1d2127;font-weight:600}
.blocked-tag{color:#c62828;font-weight:600;margin-left:10px;font-family:system-ui,sans-serif;font-size:12px}
p.stack-key span{display:inline-block;padding:1px 8px;border-radius:3px;font:12px ui-monospace,Menlo,monospace}
p.stack-key span.f-lib,p.stack-key span.f-native{border:1px solid #e3e7eb}
.pair{display:grid;grid-template-columns:1fr 1fr;gap:16px}.variant h3{margin:10px 0 2px}
.variant p{margin:0 0 6px}pre.code{white-space:pre;padding:8px 0}pre.code>span{display:block;padding:0 12px}
pre.code>span.changed{background:#e8f1fb;box-shadow:inset 3px 0 #1a5fb4}
section.scenario{margin-top:30px}section.run h2{font-size:16px;border-bottom:none}
.what{margin:4px 0}.reason{margin:4px 0;font-family:ui-monospace,Menlo,Consolas,monospace;font-size:13px}
"""


def check_target(path: str) -> Path:
    """Check the page can be written to ``path`` before any work is done; return it."""
    target = Path(path)
    parent = target.parent if str(target.parent) else Path(".")
    if target.is_dir() and not target.is_symlink():  # a link is replaced, not followed (output_file)
        raise GpudoctorError(f"--html {path}: is a directory")
    if target.suffix.lower() in SOURCE_SUFFIXES and target.is_file():  # (as lint's --output-file)
        raise GpudoctorError(f"--html {path}: refusing to write the page over an existing Python source file "
                             "(.py, .pyi, .ipynb)")
    if not parent.is_dir():
        raise GpudoctorError(f"--html {path}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise GpudoctorError(f"--html {path}: directory {parent} is not writable")
    return target


def write(target: Path, text: str) -> None:
    """Write ``text`` to ``target`` (atomically for a regular file, replacing a link planted
    there rather than writing through it; see write_text_file)."""
    from gpudoctor.output_file import write_text_file

    try:
        write_text_file(target, text)
    except OSError as error:
        raise GpudoctorError(f"--html {target}: cannot write: {error.strerror or error}") from None


def _page(title: str, subtitle: str, body: str) -> str:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width,initial-scale=1">'
            f"<title>{e(title)}</title><style>{_CSS}</style></head><body>"
            f"<header><h1>{e(title)}</h1><p class=\"meta\">{e(subtitle)} · generated {e(stamp)} "
            f"by gpudoctor {e(__version__)}</p></header>{body}</body></html>\n")


def _gpu_note(machine: dict[str, Any]) -> str | None:
    nvml = machine.get("nvml", {})
    return None if nvml.get("available") else (nvml.get("reason") or "NVML not available")


def _anchor(entry: dict[str, Any]) -> str:
    return f"{entry['name']}-{entry['variant']}"


def _expected(entry: dict[str, Any]) -> str:
    if entry.get("as_expected") is None:
        return ""
    if entry["as_expected"]:
        return '<span class="badge expected">as expected</span>'
    return f'<span class="badge unexpected">expected {e(" or ".join(entry.get("expected", [])))}</span>'


def _verdict_table(entries: list[dict[str, Any]]) -> str:
    head = ("<tr><th>scenario</th><th>rule</th><th>variant</th><th>status</th><th></th>"
            "<th>duration</th><th>reason</th></tr>")
    rows = []
    for s in entries:
        rule = f"<td class=\"nowrap\" title=\"{e(s.get('rule_name'))}\">{e(s['rule'])}</td>"
        if s["status"] == "skipped":
            if s["variant"] == "safe":  # one row says it for both variants
                continue
            rows.append(f"<tr class=\"skipped\"><td class=\"nowrap\">{e(s['name'])}</td>{rule}<td>both</td>"
                        f"<td>{badge('skipped')}</td><td></td><td></td><td>{e(s['reason'])}</td></tr>")
            continue
        rows.append(f'<tr><td class="nowrap"><a href="#{e(_anchor(s))}">{e(s["name"])}</a></td>{rule}'
                    f"<td>{e(s['variant'])}</td><td>{badge(s['status'])}</td><td>{_expected(s)}</td>"
                    f"<td class=\"nowrap\">{s['duration_s']:.1f} s</td><td>{e(s['reason'])}</td></tr>")
    return f'<table class="grid" id="verdicts">{head}{"".join(rows)}</table>'


def _code_lines(own: list[str], other: list[str]) -> str:
    """Return the lines of one variant's code, those that differ from the other's marked."""
    changed: set[int] = set()
    # The two functions' own names differ by design: not a difference worth marking.
    same_name = [re.sub(r"^def (unsafe|safe)\(", "def variant(", line) for line in own]
    other_name = [re.sub(r"^def (unsafe|safe)\(", "def variant(", line) for line in other]
    matcher = difflib.SequenceMatcher(None, same_name, other_name, autojunk=False)
    for tag, start, end, _, _ in matcher.get_opcodes():
        if tag != "equal":
            changed.update(range(start, end))
    return "".join(f'<span class="{"changed" if i in changed else "same"}">{e(line) or " "}</span>'
                   for i, line in enumerate(own))


def _code(name: str, variants: dict[str, dict[str, Any]]) -> str:
    """Return the scenario's unsafe and safe code side by side, each beside its verdict.

    The code is the script's ``unsafe()``/``safe()`` function (with the helpers only it
    calls), read from the script as text: the scenario is never imported."""
    from gpudoctor.probe import scenarios

    found = next((s for s in scenarios.catalogue() if s.name == name), None)
    if found is None:
        return ""
    code = {v: found.code(v).splitlines() for v in scenarios.VARIANTS}
    columns = []
    for variant in scenarios.VARIANTS:
        other = next(v for v in scenarios.VARIANTS if v != variant)
        entry = variants.get(variant)
        verdict = f"{badge(entry['status'])} {_expected(entry)}" if entry else ""
        link = f' <a href="#{e(_anchor(entry))}">the run ↓</a>' if entry else ""
        columns.append(f'<div class="variant"><h3>{e(variant)} {verdict}{link}</h3>'
                       f'<p class="dim">{e(found.describe(variant))}</p>'
                       f'<pre class="code" id="code-{e(name)}-{e(variant)}">'
                       f"{_code_lines(code[variant], code[other])}</pre></div>")
    where = found.path.name
    return (f'<section class="scenario" id="scenario-{e(name)}"><h2>{e(name)} '
            f'<span class="dim">{e(found.rule)} {e(found.rule_name)}</span></h2>'
            f'<p class="what">{e(found.summary)} <span class="dim">(from <code>{e(where)}</code>; '
            f"the lines that differ between the variants are marked)</span></p>"
            f'<div class="pair">{"".join(columns)}</div></section>')


def scenarios_page(document: dict[str, Any]) -> str:
    """Return the page of ``gpudoctor probe``: the machine, then each scenario variant that ran."""
    machine = document["machine"]
    entries = document.get("scenarios")
    body = f'<section id="machine"><h2>Machine</h2>{html_parts.machine(machine)}</section>'
    if entries is None:
        return _page("gpudoctor probe", "machine report", body)
    body += ('<section><h2>Verdicts</h2><p class="dim">Each scenario runs in a sandbox twice: the '
             "unsafe variant shows the failure, the safe variant its fix. An unsafe variant that "
             "hangs or crashes is the demonstration working.</p>"
             f"{_verdict_table(entries)}</section>")
    note = _gpu_note(machine)
    shown: set[str] = set()
    for i, s in enumerate(x for x in entries if x["status"] != "skipped"):
        if s["name"] not in shown:
            shown.add(s["name"])
            body += _code(s["name"], {x["variant"]: x for x in entries if x["name"] == s["name"]})
        body += (f'<section class="run" id="{e(_anchor(s))}"><h2>{e(s["name"])} · {e(s["variant"])} '
                 f"{badge(s['status'])} {_expected(s)}</h2>"
                 f'<p class="what">{e(s["rule"])} {e(s.get("rule_name"))}: {e(s.get("description"))}</p>'
                 f'<p class="reason">{e(s["reason"])}</p>'
                 f"{html_parts.run_body(s, f'run{i}', note)}</section>")
    ran = {x["name"] for x in entries if x["status"] != "skipped"}
    skipped = {x["name"] for x in entries} - ran
    return _page("gpudoctor probe — scenarios",
                 f"{plural(len(ran), 'scenario')} run in an unsafe and a safe variant, {len(skipped)} skipped", body)


def command_page(document: dict[str, Any]) -> str:
    """Return the page of ``gpudoctor probe -- COMMAND``: the machine, the verdict, the evidence."""
    from gpudoctor.probe.diagnosis import Diagnosis
    from gpudoctor.probe.verdicts import StopReason

    machine, run = document["machine"], document["run"]
    diagnosis = Diagnosis.from_json(run)
    command = " ".join(run.get("command", []))
    summary = ('<table class="grid" id="verdicts"><tr><th>command</th><th>verdict</th><th>exit code</th>'
               "<th>stopped because</th><th>duration</th></tr>"
               f"<tr><td><code>{e(command)}</code></td><td>{badge(diagnosis.verdict)}</td>"
               f"<td>{e(diagnosis.exit_code)}</td><td>{e(diagnosis.stop_reason)}</td>"
               f"<td>{float(run.get('duration') or 0):.1f} s</td></tr></table>")
    body = (f'<section id="machine"><h2>Machine</h2>{html_parts.machine(machine)}</section>'
            f'<section class="run"><h2>Verdict {badge(diagnosis.verdict)}</h2>{summary}'
            f"{html_parts.run_body(run, 'run0', _gpu_note(machine))}</section>")
    # Paths make a title unreadable: the names say which program it was.
    short = " ".join(Path(a).name if os.sep in a else a for a in run.get("command", []))
    how = "attached to a running process tree (nothing stopped or signalled)" \
        if diagnosis.stop_reason == StopReason.ATTACHED else "supervised command"
    return _page(f"gpudoctor probe — {short[:80] or 'command'}", how, body)


def job_page(document: dict[str, Any], chart_run: dict[str, Any], runs: list[dict[str, Any]]) -> str:
    """Return the page of ``gpudoctor report DIR``: the job's verdict, explanation and causes,
    a timeline lane per rank across the nodes, then each node's processes and stacks
    (``runs``: each node's ``--json`` document, in the order of ``document["nodes"]``)."""
    nodes = document["nodes"]
    rows = "".join(
        f"<tr><td><b>{e(n['name'])}</b></td><td>{e(Path(n['record']).name)}</td>"
        f"<td>{e(', '.join(str(r['rank']) for r in document['ranks'] if r['node'] == n['name']))}</td>"
        f"<td>{badge(n['verdict'])}</td><td>{e(n['stop_reason'])}</td>"
        f"<td class=\"nowrap\">t={float(n['started_at']):.1f} s</td>"
        f"<td class=\"nowrap\">{float(n['duration']):.1f} s</td>"
        f"<td><code>{e(' '.join(n.get('command') or []))}</code></td></tr>" for n in nodes)
    table = ('<table class="grid" id="nodes"><tr><th>node</th><th>record</th><th>ranks</th><th>verdict</th>'
             f"<th>stopped because</th><th>started</th><th>duration</th><th>command</th></tr>{rows}</table>")
    body = (f'<section class="run"><h2>Verdict {badge(document["verdict"])}</h2>{table}'
            f"<h3>Explanation</h3><pre class=\"explanation\">{e(document['explanation'])}</pre>"
            f"{html_parts.causes(document)}"
            "<h3>Timeline: a lane per rank, on the wall clock</h3>"
            f"{html_parts.chart(chart_run, 'job', None)}</section>")
    for i, (n, run) in enumerate(zip(nodes, runs, strict=True)):
        body += (f'<section class="run" id="node-{i}"><h2>Node {e(n["name"])} {badge(n["verdict"])}</h2>'
                 f"<h3>Processes</h3>{html_parts.processes(run)}{html_parts.matches(run)}"
                 f"{html_parts.stacks(run)}</section>")
    ranks = len(document["ranks"])
    return _page(f"gpudoctor report — {plural(len(nodes), 'node')}, {plural(ranks, 'rank')}",
                 "a distributed job, merged from its nodes' records", body)
