"""SARIF 2.1.0, for GitHub code scanning and other SARIF consumers."""

from __future__ import annotations

import json
import os
from pathlib import PurePath
from urllib.parse import quote

from gpudoctor import __version__
from gpudoctor.lint.findings import Finding, Site

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def artifact_uri(path: str) -> str:
    """The path as a URI reference, as SARIF requires: a relative path percent-encoded
    (RFC 3986: a space, ``#``, ``%``, ``?``, ``:`` and every byte outside ASCII, from the
    name's own bytes, so a name that is not UTF-8 is carried exactly), an absolute one as a
    ``file://`` URI. Written raw, ``my file#1.py`` read as ``my file`` with a fragment."""
    native = PurePath(path)
    if native.is_absolute():
        return native.as_uri()
    return quote(os.fsencode(native.as_posix()), safe="/")


def _location(site: Site) -> dict[str, object]:
    """In a Jupyter notebook the region's lines are those of the cell named by the
    location's ``properties.cell`` (1-based, every cell counted)."""
    notebook: dict[str, object] = {} if site.cell is None else {"properties": {"cell": site.cell}}
    return {
        **notebook,
        "physicalLocation": {
            "artifactLocation": {"uri": artifact_uri(site.path)},
            "region": {
                "startLine": site.row,
                "startColumn": site.col + 1,
                "endLine": max(site.end_row, site.row),
                "endColumn": site.end_col + 1 if site.end_row > site.row or site.end_col > site.col
                else site.col + 2,
            },
        }
    }


def _rules() -> list[dict[str, object]]:
    from gpudoctor.lint.rules._registry import all_rules

    described: list[dict[str, object]] = []
    for rule in all_rules():
        doc = rule.documentation()
        described.append({
            "id": rule.code,
            "name": rule.name,
            "shortDescription": {"text": rule.summary},
            "fullDescription": {"text": doc.split("## Why is this bad?")[0].replace("## What it does", "").strip()},
            "help": {"text": rule.fix_title or rule.summary, "markdown": doc},
            "defaultConfiguration": {"level": "error" if rule.severity == "error" else "warning"},
        })
    return described


def render(findings: list[Finding]) -> str:
    rules = _rules()
    index = {rule["id"]: i for i, rule in enumerate(rules)}
    results = []
    for f in findings:
        result: dict[str, object] = {
            "ruleId": f.code,
            "ruleIndex": index[f.code],
            "level": "error" if f.severity == "error" else "warning",
            "message": {"text": f.message},
            "locations": [_location(f.site)],
        }
        if f.related:
            result["relatedLocations"] = [
                {"id": i, **_location(r.site), "message": {"text": r.message}}
                for i, r in enumerate(f.related)
            ]
        results.append(result)
    document = {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "gpudoctor",
                "version": __version__,
                "rules": rules,
            }},
            "results": results,
        }],
    }
    return json.dumps(document, indent=2) + "\n"
