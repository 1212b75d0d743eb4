"""Draw a run's timeline with matplotlib, as SVG text to inline in the HTML report.

Host RSS and GPU memory per process over time, then a CPU lane per process
(idleness is the evidence of a hang: a lane that stays flat while the process
lives is a process waiting), all sharing the time axis, with the run's events
marked: forks, spawns, GPU runtimes seen initialized at a fork, exits and the
end of the run. Works from the run's JSON document, so the chart shows exactly
what ``--json`` reports. matplotlib is optional (the ``report`` extra): without
it ``svg`` returns None and the page says so.

Every process keeps one look across the panels: a colour of the Okabe-Ito
palette (told apart with the common colour-vision deficiencies), and a line style
and a marker of its own, since fork workers often have the same memory and their
lines lie on top of each other. The elements a reader (or a test) looks for carry
ids: ``SALT-memory-PID``, ``SALT-gpu-PID``, ``SALT-cpu-PID``, ``SALT-memory-limit``.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

_MIB = 1 << 20
# Okabe & Ito's palette, minus its yellow (unreadable as a thin line on white).
_COLORS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")
_STYLES = ("-", "--", "-.", ":")
_MARKERS = ("o", "s", "^", "D", "v", "P", "X")
_NEUTRAL = "#555555"
# A process with no more CPU than this between two samples was idle (waiting). The same
# slack the hang detection allows: clock ticks are 10 ms, a waiting process wakes briefly.
IDLE_PERCENT = 2.0
_MAX_LANES = 12  # a fork bomb would make the chart a barcode
_LANE_HEIGHT = 0.42  # inches


@dataclass(frozen=True)
class Mark:
    """An event drawn as a vertical line with a label."""

    t: float
    label: str
    style: str  # a matplotlib line style
    color: str


@dataclass(frozen=True)
class Look:
    """How one process is drawn in every panel."""

    color: str
    style: str
    marker: str
    offset: int  # where its markers start, so that lines lying on each other show both


def _label(process: dict[str, Any]) -> str:
    if process.get("lane"):  # a merged job's rank ("rank 1 · node-b"): its pid says nothing there
        return f"{process['lane']} ({process['verdict']})"
    return f"pid {process['pid']} ({process['start']}, {process['verdict']})"


def looks(processes: Sequence[dict[str, Any]]) -> dict[int, Look]:
    """Give each process its colour, line style and marker, in the order of the report."""
    return {p["pid"]: Look(_COLORS[i % len(_COLORS)], _STYLES[i % len(_STYLES)], _MARKERS[i % len(_MARKERS)], i)
            for i, p in enumerate(processes)}


def _runtime(name: str) -> str:
    from gpudoctor.knowledge.runtimes import legend

    return legend(name)


def marks(run: dict[str, Any], colors: dict[int, str]) -> list[Mark]:
    """Return the events worth marking, merged when several happen at the same moment."""
    raw: list[tuple[float, str, str, str]] = []
    seen_init: set[tuple[int, str]] = set()
    for event in run.get("events", []):
        pid, t, kind = event.get("pid"), event.get("t"), event.get("event")
        if not isinstance(t, (int, float)) or t < 0:
            continue
        color = colors.get(pid, _NEUTRAL) if isinstance(pid, int) else _NEUTRAL
        if kind == "fork-child":
            raw.append((t, "fork", "-", color))
        elif kind == "start" and event.get("how") == "spawn":
            raw.append((t, "spawn", "--", color))
        elif kind == "exit":
            code = event.get("code")
            raw.append((t, "exit" if code in (None, 0) else f"exit {code}", ":", color))
        elif kind == "fork-parent":
            for runtime in event.get("runtimes") or ():
                if (pid, runtime) not in seen_init and not runtime.startswith("cuda-"):
                    seen_init.add((pid, runtime))
                    raw.append((t, f"{_runtime(runtime)} initialized (seen at fork)", "-.", "#000000"))
    end = _end(run)
    stop = run.get("stop_reason")
    if isinstance(end, (int, float)) and stop == "attached":
        raw.append((end, "end of the watch (nothing stopped)", ":", "#000000"))
    elif isinstance(end, (int, float)) and stop not in (None, "exited"):
        raw.append((end, f"stopped: {stop}", "-", "#000000"))
    merged: list[Mark] = []
    for t, label, style, color in sorted(raw):
        last = merged[-1] if merged else None
        if last is not None and t - last.t < 0.15 and last.label.split(" ×")[0] == label:
            count = int(last.label.split(" ×")[1]) + 1 if " ×" in last.label else 2
            merged[-1] = Mark(last.t, f"{label} ×{count}", last.style, last.color)
        else:
            merged.append(Mark(t, label, style, color))
    return merged[:40]  # a fork bomb would bury the chart under labels


def _end(run: dict[str, Any]) -> float | None:
    """When the run's chart ends: its duration; for an attached tree, the end of the watch
    (its last sample: the stack dumps after it took time that shows nothing)."""
    if run.get("stop_reason") == "attached":
        times = [s["t"] for s in run.get("samples", []) if isinstance(s.get("t"), (int, float))]
        if times:
            return float(max(times))
    end = run.get("duration")
    return float(end) if isinstance(end, (int, float)) else None


def _series(samples: Sequence[dict[str, Any]], kind: str) -> dict[tuple[int, int | None], list[tuple[float, float]]]:
    found: dict[tuple[int, int | None], list[tuple[float, float]]] = {}
    for s in samples:
        if s.get("kind") != kind or s.get("bytes") is None or s.get("in_tree") is False:
            continue
        if kind == "rss" and not s["bytes"]:  # a zombie: it has exited, it holds nothing
            continue
        found.setdefault((s["pid"], s.get("device")), []).append((s["t"], s["bytes"] / _MIB))
    return found


def cpu_use(samples: Sequence[dict[str, Any]]) -> dict[int, list[tuple[float, float, float]]]:
    """Return, per process, its CPU use between consecutive samples: (from, to, percent
    of one core). A process sampled once has no interval, and no entry."""
    times: dict[int, list[tuple[float, float]]] = {}
    for s in samples:
        if s.get("kind") == "rss" and isinstance(s.get("cpu"), (int, float)) and s.get("in_tree") is not False:
            times.setdefault(s["pid"], []).append((s["t"], s["cpu"]))
    found: dict[int, list[tuple[float, float, float]]] = {}
    for pid, points in times.items():
        points.sort()
        spans = [(t0, t1, max(0.0, (c1 - c0) / (t1 - t0) * 100))
                 for (t0, c0), (t1, c1) in pairwise(points) if t1 > t0]
        if spans:
            found[pid] = spans
    return found


def idle_stretches(spans: Sequence[tuple[float, float, float]]) -> list[tuple[float, float]]:
    """Join the consecutive intervals in which a process used (almost) no CPU."""
    found: list[tuple[float, float]] = []
    for t0, t1, percent in spans:
        if percent > IDLE_PERCENT:
            continue
        if found and abs(found[-1][1] - t0) < 1e-9:
            found[-1] = (found[-1][0], t1)
        else:
            found.append((t0, t1))
    return found


def _devices(samples: Sequence[dict[str, Any]]) -> dict[int, tuple[list[tuple[float, float]], float | None]]:
    found: dict[int, tuple[list[tuple[float, float]], float | None]] = {}
    for s in samples:
        if s.get("kind") == "device" and s.get("bytes") is not None:
            points, _ = found.get(s["device"], ([], None))
            points.append((s["t"], s["bytes"] / _MIB))
            found[s["device"]] = (points, (s.get("total") or 0) / _MIB or None)
    return found


def _width(index: int, count: int) -> float:
    """Draw earlier lines wider, so that processes with the same value stay visible."""
    return 1.2 + 1.4 * (count - 1 - index) / max(1, count - 1)


def _plot(ax: Any, points: list[tuple[float, float]], look: Look, width: float, label: str, gid: str) -> None:
    xs, ys = zip(*points, strict=True)
    step = max(1, len(xs) // 24)  # about two dozen markers a line, staggered between processes
    (line,) = ax.plot(xs, ys, drawstyle="steps-post", color=look.color, linestyle=look.style,
                      marker=look.marker, markersize=4, markevery=(look.offset % step, step),
                      markerfacecolor="white", markeredgewidth=1.1, linewidth=width, label=label)
    line.set_gid(gid)


def _draw_marks(axes: Sequence[Any], found: list[Mark]) -> None:
    top = axes[0]
    right = top.get_xlim()[1]
    for i, mark in enumerate(found):
        for ax in axes:
            ax.axvline(mark.t, color=mark.color, linestyle=mark.style, linewidth=0.9, alpha=0.6)
        # Labels go above the top panel, staggered so that neighbours do not overlap;
        # near the right edge they extend to the left of their line.
        late = mark.t > 0.7 * right
        top.annotate(mark.label, xy=(mark.t, 1.0), xycoords=("data", "axes fraction"),
                     xytext=(-2 if late else 2, 4 + 11 * (i % 3)), textcoords="offset points",
                     fontsize=7.5, ha="right" if late else "left",
                     color=mark.color if mark.color != "#000000" else "#333333")


_LIMIT_STYLE: dict[str, Any] = {"color": "#B2182B", "linestyle": (0, (6, 3)), "linewidth": 1.3}


def _memory_limit(ax: Any, limit: int | None, peak: float, salt: str, measure: str | None) -> list[Any]:
    """Draw --memory-limit (the tree's total, not one process's) as a labelled line when it
    is near the data; far above it, say so in the legend. Return extra legend entries."""
    from matplotlib.lines import Line2D

    if not limit:
        return []
    mib = limit / _MIB
    text = f"--memory-limit {_size(limit)} (whole tree, {(measure or 'pss').upper()})"
    if mib > 4 * max(peak, 1.0):  # on the scale, the processes' lines would be flat at the bottom
        entry = Line2D([], [], label=f"{text}, above the scale", **_LIMIT_STYLE)
        entry.set_gid(f"{salt}-memory-limit")
        return [entry]
    ax.set_ylim(top=mib * 1.12)
    line = ax.axhline(mib, **_LIMIT_STYLE)
    line.set_gid(f"{salt}-memory-limit")
    ax.annotate(text, xy=(0.005, mib), xycoords=("axes fraction", "data"), xytext=(0, 3),
                textcoords="offset points", fontsize=7.5, color="#B2182B", ha="left", va="bottom")
    return []


def _size(value: int) -> str:
    from gpudoctor.probe.units import format_size

    return format_size(value)


def _cpu_lanes(axes: Sequence[Any], lanes: list[dict[str, Any]], use: dict[int, list[tuple[float, float, float]]],
               styles: dict[int, Look], salt: str) -> None:
    top = max([100.0] + [percent for p in lanes for _, _, percent in use[p["pid"]]])
    top = 100.0 * max(1, math.ceil(top / 100 - 0.02))  # whole cores: 100 %, 200 %, ...
    for ax, process in zip(axes, lanes, strict=True):
        pid = process["pid"]
        look = styles.get(pid, Look(_NEUTRAL, "-", "o", 0))
        spans = use[pid]
        xs = [t0 for t0, _, _ in spans] + [spans[-1][1]]
        ys = [percent for _, _, percent in spans] + [spans[-1][2]]
        fill = ax.fill_between(xs, ys, step="post", color=look.color, alpha=0.35, linewidth=0)
        fill.set_gid(f"{salt}-cpu-{pid}")
        ax.step(xs, ys, where="post", color=look.color, linewidth=1.1)
        for start, end in idle_stretches(spans):
            ax.axvspan(start, end, ymin=0, ymax=1, facecolor="none", edgecolor="#9a9a9a", hatch="////",
                       linewidth=0)
            if end - start >= 0.2 * ax.get_xlim()[1] or end - start >= 2:
                ax.text((start + end) / 2, top * 0.5, f"idle {end - start:.1f} s", ha="center", va="center",
                        fontsize=7, color="#333333",
                        bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "none"})
        ax.set_ylim(0, top)
        ax.set_yticks([0, top], ["0", f"{top:.0f}%"], fontsize=6.5)
        name = f"{process['lane']}\n{process['verdict']}" if process.get("lane") else \
            f"pid {pid}\n{process['start']}, {process['verdict']}"
        ax.set_ylabel(name, rotation=0, ha="right",
                      va="center", fontsize=7.5, color=look.color)


def _draw(fig: Any, run: dict[str, Any], gpu_note: str | None, salt: str) -> None:
    processes = run.get("processes", [])
    samples = run.get("samples", [])
    styles = looks(processes)
    names = {p["pid"]: _label(p) for p in processes}
    gpu = _series(samples, "gpu-process")
    devices = _devices(samples)
    two = bool(gpu or devices)
    use = cpu_use(samples)
    lanes = [p for p in processes if p["pid"] in use][:_MAX_LANES]
    ratios = [3.0] + ([2.2] if two else []) + [_LANE_HEIGHT / 0.5] * len(lanes)
    axes = fig.subplots(len(ratios), 1, sharex=True, squeeze=False,
                        gridspec_kw={"height_ratios": ratios, "hspace": 0.02})[:, 0]
    rss_ax = axes[0]
    rss = sorted(_series(samples, "rss").items(), key=lambda item: styles.get(item[0][0], Look("", "", "", 99)).offset)
    for i, ((pid, _), points) in enumerate(rss):
        look = styles.get(pid, Look(_NEUTRAL, "-", "o", i))
        _plot(rss_ax, points, look, _width(i, len(rss)), names.get(pid, f"pid {pid}"), f"{salt}-memory-{pid}")
    rss_ax.set_ylabel("host RSS (MiB)")
    rss_ax.set_ylim(bottom=0)
    peak = max((y for _, points in rss for _, y in points), default=0.0)
    extra = _memory_limit(rss_ax, run.get("memory_limit"), peak, salt, run.get("memory_measure"))
    if two:
        gpu_ax = axes[1]
        per_process = sorted(gpu.items(), key=lambda item: (item[0][0], item[0][1] or 0))
        for i, ((pid, device), points) in enumerate(per_process):
            look = styles.get(pid, Look(_NEUTRAL, "-", "o", i))
            label = names.get(pid, f"pid {pid}") + (f" on GPU {device}" if len(devices) > 1 else "")
            _plot(gpu_ax, points, look, _width(i, len(per_process)), label, f"{salt}-gpu-{pid}-{device}")
        for device, (points, total) in sorted(devices.items()):
            xs, ys = zip(*points, strict=True)
            gpu_ax.plot(xs, ys, color="#777777", linestyle="--", linewidth=1,
                        label=f"GPU {device} used (all processes)")
            if total:
                gpu_ax.axhline(total, color="#777777", linestyle=":", linewidth=1)
                gpu_ax.annotate(f"GPU {device}: {total / 1024:.1f} GiB total", xy=(1, total),
                                xycoords=("axes fraction", "data"), xytext=(-2, 3),
                                textcoords="offset points", fontsize=7, color=_NEUTRAL, ha="right")
        gpu_ax.set_ylabel("GPU memory (MiB)")
        gpu_ax.set_ylim(bottom=0)
    elif gpu_note:  # said under the chart, where it covers no line
        from matplotlib.lines import Line2D

        extra.append(Line2D([], [], linestyle="none", label=f"GPU memory: {gpu_note}"))
    attached = run.get("stop_reason") == "attached"
    axes[-1].set_xlabel(run.get("axis") or ("seconds since gpudoctor attached" if attached
                                            else "seconds since the start of the run"))
    axes[-1].set_xlim(left=0, right=max((_end(run) or 0) * 1.02, 0.5))
    lane_axes = axes[len(ratios) - len(lanes):]
    if lanes:
        _cpu_lanes(lane_axes, lanes, use, styles, salt)
        lane_axes[0].set_title("CPU use per process (% of one core; hatched: idle, waiting)", fontsize=8,
                               loc="left", color="#333333", pad=3)
    _draw_marks(axes, marks(run, {pid: look.color for pid, look in styles.items()}))
    for ax in axes:
        ax.grid(True, axis="x" if ax in lane_axes else "both", color="#e6e6e6", linewidth=0.6)
        ax.spines[["top", "right"]].set_visible(False)
    handles, labels = [], []
    for ax in axes[:len(ratios) - len(lanes)]:
        h, l_ = ax.get_legend_handles_labels()
        handles += [x for x, name in zip(h, l_, strict=True) if name not in labels]
        labels += [name for name in l_ if name not in labels]
    handles += extra
    labels += [entry.get_label() for entry in extra]
    if handles:
        legend = fig.legend(handles, labels, loc="outside lower center", ncol=min(3, len(labels)), fontsize=8,
                            frameon=False, handlelength=3.5)
        for entry, text in zip(handles, legend.get_texts(), strict=True):
            if entry in extra and entry.get_gid():  # the legend draws copies: its text carries the id
                text.set_gid(entry.get_gid())


def lane_count(run: dict[str, Any]) -> int:
    """How many CPU lanes the chart of ``run`` has."""
    use = cpu_use(run.get("samples", []))
    return len([p for p in run.get("processes", []) if p["pid"] in use][:_MAX_LANES])


def without_lane(run: dict[str, Any]) -> tuple[list[int], list[int]]:
    """Return the processes that have no CPU lane: those sampled less than twice (they
    lived less than the sampling interval, or CPU times were not recorded), and those
    beyond the lanes a chart has room for."""
    use = cpu_use(run.get("samples", []))
    pids = [p["pid"] for p in run.get("processes", [])]
    sampled = [pid for pid in pids if pid in use]
    return [pid for pid in pids if pid not in use], sampled[_MAX_LANES:]


def svg(run: dict[str, Any], salt: str, gpu_note: str | None = None) -> str | None:
    """Return the run's timeline as an ``<svg>`` element, or None without matplotlib."""
    try:
        import matplotlib
        from matplotlib.figure import Figure
    except ImportError:
        return None
    processes = run.get("processes", [])
    legend_rows = -(-max(1, len(processes) + 1) // 3)
    two = any(s.get("kind") in ("gpu-process", "device") for s in run.get("samples", []))
    lanes = lane_count(run)
    height = (3.4 if two else 2.3) + 0.6 + (_LANE_HEIGHT * lanes + 0.35 if lanes else 0) + 0.22 * legend_rows
    # Unique ids per chart: several charts share one page. Labels carry text from the run
    # (runtime names its processes reported, the NVML note): "$...$" in them is text, not
    # mathtext, which would render it as a formula or fail the whole page on a bad one.
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": salt, "text.parse_math": False,
                                "font.family": ["DejaVu Sans", "sans-serif"], "hatch.linewidth": 0.5}):
        fig = Figure(figsize=(10, height), layout="constrained")
        _draw(fig, run, gpu_note, salt)
        buffer = io.StringIO()
        fig.savefig(buffer, format="svg",
                    metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    text = buffer.getvalue()
    # Inline in HTML: no XML declaration or DOCTYPE; the page's CSS sizes it.
    text = re.sub(r"^<\?xml[^>]*>\s*<!DOCTYPE[^>]*>\s*", "", text, flags=re.DOTALL)
    return re.sub(r'<svg ([^>]*?)width="[^"]*" height="[^"]*"', r'<svg \1', text, count=1)
