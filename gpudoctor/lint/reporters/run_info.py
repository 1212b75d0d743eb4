"""What a run says about itself rather than about the code: the settings that apply
(``--show-settings``) and how the run went (``--verbose``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpudoctor.lint.reporters.printable import printable

if TYPE_CHECKING:
    from gpudoctor.lint.engine import LintResult
    from gpudoctor.lint.settings import Settings


def settings_text(settings: Settings) -> str:
    """What --show-settings prints: where each setting came from is the point."""
    lines = [
        f"configuration: {printable(str(settings.config_file)) if settings.config_file else 'none (defaults)'}",
        f"project root: {printable(str(settings.project_root))}",
        f"target: Python 3.{settings.target_minor} on {settings.platform} "
        f"(default start method: {settings.default_start_method})" + _later(settings),
        f"rules: {', '.join(sorted(settings.selection.enabled)) or 'none'}",
        f"exclude: {', '.join(settings.exclude) or 'the default folders only'}",
    ]
    lines.extend(f"per-file-ignores: {pattern} = {', '.join(codes)}" for pattern, codes in settings.per_file_ignores)
    return "".join(f"{line}\n" for line in lines)


def account(result: LintResult, seconds: float) -> str:
    """What --verbose says of a run: where each linted file's findings came from."""
    def files(count: int) -> str:
        return f"{count} file{'s' if count != 1 else ''}"

    where = (f"in {result.workers} worker process{'es' if result.workers != 1 else ''}" if result.workers
             else "in this process")
    skipped = result.files_checked - result.analysed - result.cached
    context = (f"; {files(result.context)} importing them analysed for context "
               f"({result.context - result.context_analysed} from the cache)" if result.context else "")
    return (f"{files(result.files_checked)} checked: {result.analysed} analysed {where}, {result.cached} "
            f"from the cache, {skipped} without anything the rules look at{context}; {seconds:.2f} s\n")


def _later(settings: Settings) -> str:
    """The later Python judged too, where its default start method differs."""
    target = settings.target
    if target.later_minor is None:
        return ""
    return (f"; also Python 3.{target.later_minor} (default start method: {target.later_method}), "
            f"supported up to 3.{target.newest}")
