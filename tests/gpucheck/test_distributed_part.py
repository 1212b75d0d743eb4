"""The distributed check of ``make gpu-check``, run for real on the CPU: its two torchrun jobs
with gloo under the probe, judged by the check's own expectations (on a GPU it runs them
with NCCL)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from gpucheck.part import Context
from gpucheck.parts import distributed
from tests.probe.test_distributed import _torch_missing

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("job", distributed.JOBS, ids=lambda job: job.file)
def test_each_job_meets_its_expectations_with_gloo(tmp_path: Path, job: distributed.Job) -> None:
    missing = _torch_missing()
    if missing:
        pytest.skip(missing)
    ctx = Context(tmp_path, sys.executable, REPO, time.monotonic() + 600)
    # (gloo's ranks are idle as soon as they wait: the gloo tests' threshold)
    result = distributed.run_job(ctx, ctx.folder(distributed.NAME), job, backend="gloo", hang_after=4)
    assert [e for e in result["expectations"] if not e["ok"]] == [], result.get("explanation")


def test_without_nccl_the_check_is_skipped_with_the_reason(tmp_path: Path) -> None:
    ctx = Context(tmp_path, sys.executable, REPO, time.monotonic() + 600)
    result = distributed.run(ctx)
    assert result.status == "skipped"
    assert result.summary[0].startswith("not run: torch with NCCL and a GPU are needed")
