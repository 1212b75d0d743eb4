"""The invocation table of ``truth_table`` keeps up with the knowledge tables."""

from __future__ import annotations

import pytest

from gpucheck.parts import truth_table
from gpucheck.truth import levels
from gpucheck.truth.invocations import FRAMEWORKS, TABLE, Invocation, NotExercised
from gpudoctor.knowledge.registry import BY_NAME


@pytest.mark.parametrize("framework", [fw.name for fw in FRAMEWORKS])
def test_every_knowledge_entry_is_called_or_says_why_not(framework: str) -> None:
    known = {api.pattern for api in BY_NAME[framework].table}
    covered = {entry.pattern for entry in TABLE[framework]}
    assert known - covered == set(), "knowledge entries with no invocation and no 'not exercised' reason"
    assert covered - known == set(), "invocations of patterns the knowledge no longer has"


@pytest.mark.parametrize("framework", [fw.name for fw in FRAMEWORKS])
def test_every_exercised_entry_claims_a_level(framework: str) -> None:
    effects = {api.pattern: api.effect for api in BY_NAME[framework].table}
    for entry in TABLE[framework]:
        if isinstance(entry, Invocation):
            assert (entry.expect or effects[entry.pattern]) in levels.EXPECTED, entry.key
        else:
            assert entry.reason.strip(), entry.pattern


def test_effects_without_a_level_are_not_exercised() -> None:
    for framework, entries in TABLE.items():
        effects = {api.pattern: api.effect for api in BY_NAME[framework].table}
        for entry in entries:
            if effects[entry.pattern] not in levels.EXPECTED:
                assert isinstance(entry, NotExercised) or isinstance(entry, Invocation) and entry.expect, entry


def test_each_call_is_valid_python_and_keys_are_unique() -> None:
    for entries in TABLE.values():
        calls = [entry for entry in entries if isinstance(entry, Invocation)]
        assert len({entry.key for entry in calls}) == len(calls)
        for entry in calls:
            compile(entry.setup, entry.key, "exec")
            compile(entry.call, entry.key, "exec")


def test_jobs_start_with_one_import_baseline_per_framework() -> None:
    todo, skipped = truth_table.jobs()
    assert [job.key for job in todo[:len(FRAMEWORKS)]] == ["(import alone)"] * len(FRAMEWORKS)
    assert all(job.effect == "inert" and job.call == "" for job in todo[:len(FRAMEWORKS)])
    exercised = sum(isinstance(e, Invocation) for entries in TABLE.values() for e in entries)
    assert len(todo) == len(FRAMEWORKS) + exercised
    assert {s["pattern"] for s in skipped} >= {"jax.device_get", "cupy.asnumpy", "torch.cuda.stream"}
