"""Apply the fixes of a set of findings to their files: edits, overlap check, re-parse."""

from __future__ import annotations

import difflib
import errno
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from gpudoctor import file_replace
from gpudoctor.input_file import read_regular
from gpudoctor.lint.findings import Edit, Finding
from gpudoctor.lint.frontend.reading import NEWLINE
from gpudoctor.lint.reporters.printable import printable

NEWLINE_KEPT = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


@dataclass
class FixPlan:
    """What fixing would change: new text per file, and which findings it removes."""

    texts: dict[Path, tuple[str, str]] = field(default_factory=dict)  # path -> (old, new)
    encodings: dict[Path, str] = field(default_factory=dict)  # path -> its source encoding
    fixed: list[Finding] = field(default_factory=list)
    # Files not fixed, and why: the fixed text would not parse, the file cannot be read
    # or written, or it is a symbolic link out of the project.
    refused: list[tuple[str, str]] = field(default_factory=list)


# Fixes are not applied to Jupyter notebooks. A fix is an edit of a Python file, and the
# usual one (a spawn context) breaks a notebook whose worker function is defined in a cell:
# a spawned child cannot import the notebook's __main__ to find it. Writing the notebook's
# JSON back could also change its formatting; the finding says which cell to change.
NOTEBOOK_REFUSED = ("fixes are not applied to Jupyter notebooks (a spawn context cannot find "
                    "functions defined in a cell); change the cell the finding names by hand")


def eligible(finding: Finding, unsafe: bool) -> bool:
    fix = finding.fix
    return fix is not None and (fix.applicability == "safe" or unsafe)


def _lines(text: str) -> list[str]:
    """The lines of ``text`` with their endings, broken where Python (and libcst, whose
    rows the edits use) breaks them: at ``\r\n``, ``\r`` and ``\n`` only."""
    return NEWLINE_KEPT.findall(text) if text else []


def _offsets(text: str) -> list[int]:
    starts = [0]
    for line in _lines(text):
        starts.append(starts[-1] + len(line))
    return starts


def _apply(text: str, edits: list[Edit]) -> str:
    """``text`` with ``edits`` made; a line an edit adds ends as the file's lines do."""
    starts = _offsets(text)
    ending = NEWLINE.search(text)
    newline = ending.group(0) if ending else "\n"

    def offset(row: int, col: int) -> int:
        return starts[min(row - 1, len(starts) - 1)] + col

    for edit in sorted(edits, key=lambda e: (e.start, e.end), reverse=True):
        content = edit.content.replace("\n", newline) if newline != "\n" else edit.content
        text = text[: offset(*edit.start)] + content + text[offset(*edit.end):]
    return text


def plan(findings: list[Finding], unsafe: bool, root: Path | None = None) -> FixPlan:
    """Group the eligible fixes per file; a fix overlapping one already taken waits for a rerun.

    ``root``: the project's folder; a file in it that is a symbolic link to a file outside
    it is not fixed (that file belongs to another project, or to the system).
    """
    import libcst as cst

    result = FixPlan()
    by_file: dict[Path, list[Finding]] = {}
    for finding in findings:
        if eligible(finding, unsafe):
            by_file.setdefault(Path(finding.site.path), []).append(finding)
    for path, items in by_file.items():
        if path.suffix.lower() == ".ipynb":
            result.refused.append((str(path), NOTEBOOK_REFUSED))
            continue
        outside = leads_out(path, root) if root is not None else None
        if outside is not None:
            result.refused.append((str(path), outside))
            continue
        taken: list[Edit] = []
        fixed: list[Finding] = []
        for finding in items:
            assert finding.fix is not None
            new = [e for e in finding.fix.edits if e not in taken]
            if any(_overlaps(e, t) for e in new for t in taken if e.start != e.end):
                continue
            taken.extend(new)
            fixed.append(finding)
        read = read_source(path)
        if isinstance(read, str):
            result.refused.append((str(path), read))
            continue
        old, encoding = read
        text = _apply(old, taken)
        try:
            cst.parse_module(text)
        except cst.ParserSyntaxError:
            result.refused.append((str(path), "the fixed file would not parse"))
            continue
        if text != old:
            result.texts[path] = (old, text)
            result.encodings[path] = encoding
            result.fixed.extend(fixed)
    return result


def leads_out(path: Path, root: Path) -> str | None:
    """Why ``path`` must not be written, if it lies in the project but is (or is reached
    through) a symbolic link to a file outside it; None otherwise. A file named outside
    the project, with no link leading out of it, is the user's to fix."""
    top = os.path.abspath(root)
    tops = (top, os.path.realpath(top))
    if not _inside(os.path.abspath(path), tops) or _inside(os.path.realpath(path), tops[1:]):
        return None
    if os.path.islink(path):
        return "it is a symbolic link to a file outside the project"
    return "it lies in a folder that is a symbolic link to outside the project"


def _inside(path: str, folders: tuple[str, ...]) -> bool:
    return any(path == folder or path.startswith(folder.rstrip(os.sep) + os.sep) for folder in folders)


def read_source(path: Path) -> tuple[str, str] | str:
    """The file's text as the analysis read it (its declared encoding, its own line
    endings, a byte order mark set aside), and that encoding; or why it cannot be read
    (read as the analysis reads: a regular file only, never blocking)."""
    import io
    import tokenize

    try:
        raw = read_regular(path)
    except OSError as exc:
        return f"cannot read it: {exc.strerror or exc}"
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
        return raw.decode(encoding), encoding
    except (SyntaxError, UnicodeDecodeError, LookupError):
        return "it is no longer text the analysis can read"


def _overlaps(a: Edit, b: Edit) -> bool:
    return a.start < b.end and b.start < a.end


def diff(fix_plan: FixPlan) -> str:
    out: list[str] = []
    for path, (old, new) in fix_plan.texts.items():
        name = printable(path.as_posix())  # a newline in it would end the header line
        out.extend(difflib.unified_diff(_lines(old), _lines(new), fromfile=f"a/{name}", tofile=f"b/{name}"))
    return "".join(out)


def write(fix_plan: FixPlan) -> None:
    """Write each fixed file whole, in its own encoding and line endings (a symlinked file
    keeps its link, a script its mode, every file its owner and group; a read-only one is
    not written). A file that cannot be written moves from the
    plan's texts to its refusals, with its findings taken out of ``fixed``: what is said
    to be fixed is what was."""
    for path, (_, new) in list(fix_plan.texts.items()):
        try:
            _replace(path, new.encode(fix_plan.encodings.get(path, "utf-8")))
        except (OSError, UnicodeEncodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            del fix_plan.texts[path]
            if not isinstance(exc, NotWritable):
                reason = f"cannot write it: {reason}"
            fix_plan.refused.append((str(path), reason))
            fix_plan.fixed = [f for f in fix_plan.fixed if Path(f.site.path) != path]


class NotWritable(OSError):
    """The file's permissions forbid this user to write it (``strerror`` says so, in words
    fit to show): it is left as it is, as ruff leaves a read-only file."""


def _check_writable(path: Path, info: os.stat_result) -> None:
    """Raise NotWritable for a file nobody may write (mode 0444: root could, a rename could
    replace it, yet its owner made it read-only) or this user may not (a rename in a
    folder the user can write would replace a file they cannot)."""
    if not stat.S_IMODE(info.st_mode) & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH):
        raise NotWritable(errno.EACCES, "it is read-only", str(path))
    effective = os.access in os.supports_effective_ids
    if not os.access(path, os.W_OK, effective_ids=effective):
        raise NotWritable(errno.EACCES, "it is read-only for this user", str(path))


def _replace(path: Path, data: bytes) -> None:
    """Write ``data`` over the regular file ``path`` (a symbolic link: over its target)
    whole or not at all: a temporary file beside it, given its mode, owner and group, then
    renamed over it (gpudoctor.file_replace). An editor or a test runner reading the file
    meanwhile sees the old text or the new, never half; a crash, a SIGTERM or a Ctrl-C
    leaves the old or the new and no temporary file. A file whose owner and group a new
    file cannot have (this user is not root, and it is another's) is written in place
    instead, which keeps them. A file this user may not write is refused (NotWritable), and
    anything but a regular file: the fix was planned for source text, and a pipe opened for
    writing would block."""
    real = Path(os.path.realpath(path))
    info = real.stat()
    if not stat.S_ISREG(info.st_mode):
        raise OSError(0, "not a regular file", str(path))
    _check_writable(real, info)
    try:
        file_replace.replace(real, data, stat.S_IMODE(info.st_mode), (info.st_uid, info.st_gid))
    except file_replace.OwnerNotKept:
        file_replace.overwrite(real, data)
