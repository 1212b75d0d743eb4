"""The JSON contract other tools read: one object per finding, rows and columns 1-based."""

from __future__ import annotations

import json

from gpudoctor.lint.findings import Finding, Site


def _location(site: Site) -> dict[str, int]:
    return {"row": site.row, "column": site.col + 1}


def _end(site: Site) -> dict[str, int]:
    return {"row": site.end_row, "column": site.end_col + 1}


def as_dict(finding: Finding) -> dict[str, object]:
    return {
        "code": finding.code,
        "name": finding.name,
        "message": finding.message,
        "severity": finding.severity,
        "filename": finding.site.path,
        # In a Jupyter notebook: the cell's number (1-based, every cell counted), and the
        # rows are lines of that cell (ruff's "cell"); null in a Python file.
        "cell": finding.site.cell,
        "location": _location(finding.site),
        "end_location": _end(finding.site),
        "related": [
            {"filename": r.site.path, "cell": r.site.cell, "location": _location(r.site),
             "end_location": _end(r.site), "message": r.message}
            for r in finding.related
        ],
        "fix": None if finding.fix is None else {
            "applicability": finding.fix.applicability,
            "message": finding.fix.message,
            "edits": [
                {"content": e.content, "location": {"row": e.start[0], "column": e.start[1] + 1},
                 "end_location": {"row": e.end[0], "column": e.end[1] + 1}}
                for e in finding.fix.edits
            ],
        },
        "url": None,
    }


def render(findings: list[Finding]) -> str:
    return json.dumps([as_dict(f) for f in findings], indent=2) + "\n"
