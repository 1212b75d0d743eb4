"""Where a local object the parent could not pickle for its workers is defined (GD108's
parent side): read from the script with ``ast``, never imported."""

from __future__ import annotations

from pathlib import Path

from gpudoctor.probe.explain_definition import local_definition

SCRIPT = '''\
import torch


class Trainer:
    def fit(self, data):
        def collate(batch):
            return batch
        return torch.utils.data.DataLoader(data, collate_fn=collate, num_workers=2)


def train(data):
    loader = torch.utils.data.DataLoader(
        data, collate_fn=lambda b: b, num_workers=2)
    return loader
'''


def test_a_lambda_local_to_a_function_is_found_at_its_line(tmp_path: Path) -> None:
    script = tmp_path / "prog.py"
    script.write_text(SCRIPT)
    said = local_definition("Can't pickle local object 'train.<locals>.<lambda>'", script)
    assert said is not None and f"{script}:13, inside `train` (line 11)" in said


def test_a_function_local_to_a_method_is_found_at_its_line(tmp_path: Path) -> None:
    script = tmp_path / "prog.py"
    script.write_text(SCRIPT)
    said = local_definition("Can't pickle local object 'Trainer.fit.<locals>.collate'", script)
    assert said is not None and f"`collate` is defined at {script}:6, inside `fit` (line 5)" in said


def test_nothing_is_said_when_the_script_does_not_have_it(tmp_path: Path) -> None:
    script = tmp_path / "prog.py"
    script.write_text(SCRIPT)
    assert local_definition("Can't pickle local object 'other.<locals>.<lambda>'", script) is None
    assert local_definition("Can't pickle local object 'train.<locals>.helper'", script) is None
    assert local_definition("some other error", script) is None
    assert local_definition("Can't pickle local object 'train.<locals>.<lambda>'", None) is None
