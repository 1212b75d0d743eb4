"""Print the machine report on a terminal with rich (plain text when piped)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpudoctor.printable import printable
from gpudoctor.probe.machine import MachineReport
from gpudoctor.probe.units import format_size
from gpudoctor.probe.wording import plural

if TYPE_CHECKING:
    from rich.console import Console

    from gpudoctor.probe.nvml import Device

# What each compute mode means for a program that uses the GPU from several processes.
_MODE_NOTES = {
    "EXCLUSIVE_PROCESS": "only one process may hold a context: a second worker process on "
    "this GPU fails to create its context (breaks multi-process use)",
    "EXCLUSIVE_THREAD": "only one thread of one process may use the GPU: breaks multi-process use",
    "PROHIBITED": "no process may create a context on this GPU",
}


def _device(console: Console, device: Device) -> None:
    from rich.markup import escape

    used, total = device.memory_used, device.memory_total
    console.print(
        f"  GPU {device.index}: [bold]{escape(printable(device.name or 'unknown'))}[/]  "
        f"memory {format_size(used)} used / {format_size(total)} total "
        f"({format_size(device.memory_free)} free)"
    )
    mode = device.compute_mode or "n/a"
    console.print(
        f"    compute mode {mode}, MIG {_on_off(device.mig_mode)}, "
        f"persistence {_on_off(device.persistence_mode)}"
    )
    if mode in _MODE_NOTES:
        console.print(f"    [red]{mode}[/]: {_MODE_NOTES[mode]}")
    listed = device.processes
    if listed.processes is None:
        console.print(f"    processes: {escape(printable(listed.reason or 'n/a'))}")
    for process in listed.processes or ():
        where = "" if process.in_namespace else " (not in this PID namespace)"
        console.print(f"    pid {process.pid}: {format_size(process.used_memory)}{where}")
    if listed.foreign_pids:
        console.print(f"    [yellow]{escape(printable(listed.pid_namespace_note or ''))}[/]")
    for note in device.notes:
        console.print(f"    [dim]{escape(printable(note))}[/]")


def _on_off(value: bool | None) -> str:
    return "n/a" if value is None else ("on" if value else "off")


def render(report: MachineReport, console: Console) -> None:
    """Print ``report``: the NVML verdict first, in one line when there is no driver."""
    from rich.markup import escape

    n, h = report.nvml, report.host
    console.print("[bold]GPUs (NVML)[/]")
    if not n.available:
        console.print(f"  {escape(printable(n.reason or 'NVML not available'))}")
    else:
        console.print(f"  driver {n.driver_version or 'n/a'}, CUDA driver API "
                      f"{n.cuda_driver_version or 'n/a'}, {plural(len(n.devices), 'device')}")
        for device in n.devices:
            _device(console, device)
    console.print("[bold]Frameworks[/] (found without importing them)")
    for name, f in report.frameworks.items():
        if not f.installed:
            console.print(f"  {name}: not installed")
            continue
        extra = f" ({escape(printable(f.detail))})" if f.detail else ""
        console.print(f"  {name} {escape(printable(str(f.version)))}{extra}")
    console.print("[bold]Python[/]")
    console.print(f"  {h.python} ({escape(printable(h.executable))}), default start method "
                  f"[bold]{h.start_method}[/] (available: {', '.join(h.start_methods)})")
    console.print("[bold]Environment[/]")
    set_vars = {name: value for name, value in h.env.items() if value is not None}
    for name, value in set_vars.items():
        console.print(f"  {name}={escape(repr(value))}")
    unset = [name for name in h.env if name not in set_vars]
    if unset:
        label = "none of the GPU variables is set" if not set_vars else "not set"
        console.print(f"  [dim]{label}: {', '.join(unset)}[/]")
    console.print("[bold]Host[/]")
    limit = format_size(h.cgroup_memory_limit) if h.cgroup_memory_limit else "none"
    console.print(f"  memory {format_size(h.memory_available)} available of "
                  f"{format_size(h.memory_total)}, cgroup limit {limit}, {h.cpu_count} CPUs")
    console.print(f"  /dev/shm {format_size(h.shm_total)} ({format_size(h.shm_free)} free)")
