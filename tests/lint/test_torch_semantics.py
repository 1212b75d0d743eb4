"""PyTorch behaviours that need analysis, beyond its table (knowledge/torch.py): the NVML
availability check read at each call, the default device, DataLoader pinning threads,
torch.compile's compile threads and CUDA tensors shared through CUDA IPC. The fixtures in
fixtures/cases/torch/ hold the main cases; these pin down how far each reaches."""

from __future__ import annotations

import pytest

from tests.conftest import codes_at

TEMPLATE = """\
import multiprocessing as mp
import os
import threading
import torch
from torch.utils.data import DataLoader

def work(i):
    return torch.ones(i, device="cuda").sum().item()

def cpu(i):
    return i

{setup}
def main(ds, args, flag, dev, my_backend):
{body}
    with mp.get_context("fork").Pool(2) as pool:
        pool.map({worker}, [1, 2])
"""


def _program(body: str, setup: str = "", worker: str = "work") -> tuple[str, int]:
    """A program whose main() runs ``body``, then forks a pool; and the pool's row."""
    indented = "\n".join("    " + line for line in body.splitlines())
    source = TEMPLATE.format(setup=setup, body=indented, worker=worker)
    return source, next(i for i, line in enumerate(source.splitlines(), 1) if "Pool(2)" in line)


@pytest.mark.parametrize(("body", "reported"), [
    ('os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"\ntorch.cuda.is_available()', False),
    ('os.environ.update({"PYTORCH_NVML_BASED_CUDA_CHECK": "1"})\ntorch.cuda.is_available()', False),
    ('os.environ.update(PYTORCH_NVML_BASED_CUDA_CHECK="1")\ntorch.cuda.is_available()', False),
    ('os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")\ntorch.cuda.is_available()', False),
    ('os.environ.update({"PYTORCH_NVML_BASED_CUDA_CHECK": "0"})\ntorch.cuda.is_available()', True),
    ('os.putenv("PYTORCH_NVML_BASED_CUDA_CHECK", "1")\ntorch.cuda.is_available()', True),
    ('os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"\nos.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "0"\n'
     'torch.cuda.is_available()', True),
    # A later init that does not read the variable still counts.
    ('os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"\ntorch.cuda.is_available()\ntorch.cuda.set_device(0)', True),
])
def test_the_nvml_check_is_read_at_each_call(lint_source, body: str, reported: bool) -> None:  # type: ignore[no-untyped-def]
    source, row = _program(body)
    assert (("GD101", row) in codes_at(lint_source(source))) is reported


def test_the_nvml_check_set_by_an_imported_module(lint_source) -> None:  # type: ignore[no-untyped-def]
    findings = lint_source({
        "gpuenv.py": 'import os\nos.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"\n',
        "main.py": """
            import multiprocessing as mp
            import gpuenv
            import torch
            def work(i):
                return torch.ones(i, device="cuda").sum().item()
            if __name__ == "__main__":
                if torch.cuda.is_available():
                    with mp.get_context("fork").Pool(2) as pool:
                        pool.map(work, [1, 2])
        """,
    })
    assert [f for f in findings if f.code in ("GD101", "GD301")] == []


@pytest.mark.parametrize(("setup", "body", "reported"), [
    # The setting is the thread's: a helper that sets it sets it for its caller.
    ('def setup():\n    torch.set_default_device("cuda")\n', "setup()\nx = torch.zeros(3)", True),
    ("", 'torch.set_default_device("cuda")\nx = torch.tensor([1.0, 2.0])', True),
    ("", 'torch.set_default_device("cuda")\nm = torch.nn.LSTM(8, 8)', True),
    ("", 'torch.set_default_device("cuda")\ntorch.set_default_device(None)\nx = torch.zeros(3)', False),
    ("", 'torch.set_default_device("cuda")\nx = torch.zeros(3, device="cpu")', False),
    ("", 'torch.set_default_device("cuda")\nm = torch.nn.ReLU()', False),
    ("", 'with torch.device("cuda"):\n    pass\nx = torch.zeros(3)', False),
    ("", 'torch.set_default_device(dev)\nx = torch.zeros(3)', False),  # unknown device
    # A thread's setting is its own (torch/__init__.py keeps it in a threading.local).
    ('def pick():\n    torch.set_default_device("cuda")\n',
     "t = threading.Thread(target=pick)\nt.start()\nt.join()\nx = torch.zeros(3)", False),
])
def test_the_default_device_in_one_thread(lint_source, setup: str, body: str, reported: bool) -> None:  # type: ignore[no-untyped-def]
    source, row = _program(body, setup)
    findings = lint_source(source)
    assert (("GD101", row) in codes_at(findings)) is reported, findings


def test_the_default_device_set_by_an_imported_module(lint_source) -> None:  # type: ignore[no-untyped-def]
    findings = lint_source({
        "defaults.py": 'import torch\ntorch.set_default_device("cuda")\n',
        "main.py": """
            import multiprocessing as mp
            import torch
            import defaults
            def work(i):
                return torch.ones(i, device="cuda").sum().item()
            if __name__ == "__main__":
                weights = torch.randn(4, 4)
                with mp.get_context("fork").Pool(2) as pool:
                    pool.map(work, [1, 2])
        """,
    })
    assert ("GD101", 9) in codes_at(findings)


@pytest.mark.parametrize(("body", "code"), [
    ("f = torch.compile(cpu)\nf(1)", "GD102"),
    ("f = torch.compile(cpu, fullgraph=True, backend='inductor')\nf(1)", "GD102"),
    ("f = torch.compile(cpu)", None),  # never called
    ("f = torch.compile(cpu, disable=True)\nf(1)", None),
    ("f = torch.compile(cpu, backend='aot_eager')\nf(1)", None),
    ("f = torch.compile(cpu, backend=my_backend)\nf(1)", None),
    ("f = torch.compile(mode='max-autotune')(cpu)\nf(1)", "GD102"),
])
def test_calling_what_torch_compile_returns_starts_threads(lint_source, body: str, code: str | None) -> None:  # type: ignore[no-untyped-def]
    source, row = _program(body, worker="cpu")
    found = {c for c, at in codes_at(lint_source(source)) if at == row}
    assert found == ({code} if code else set())


@pytest.mark.parametrize(("body", "codes"), [
    # A persistent loader keeps its iterator, and its pin-memory thread, for its life.
    ("loader = DataLoader(ds, num_workers=2, pin_memory=True, persistent_workers=True)\nbatches = list(loader)",
     {"GD102"}),
    ("loader = DataLoader(ds, num_workers=2, pin_memory=True, persistent_workers=True)\nfirst = next(iter(loader))",
     {"GD102"}),
    # Without persistent workers a thread ends with its iterator.
    ("loader = DataLoader(ds, num_workers=2, pin_memory=True)\nfirst = next(iter(loader))", set()),
    # (a fork inside the loop, while the thread runs)
    ("loader = DataLoader(ds, num_workers=2, pin_memory=True)\nfor b in loader:\n"
     "    pool = mp.get_context('fork').Pool(2)", {"GD102"}),
    ("loader = DataLoader(ds, num_workers=2, pin_memory=True)\nsizes = [len(b) for b in loader]", set()),
    ("loader = DataLoader(ds, num_workers=args.workers, pin_memory=True)\nfor b in loader:\n    pass", set()),
    ("loader = DataLoader(ds, num_workers=2, pin_memory=flag)\nfor b in loader:\n    pass", set()),
])
def test_pinned_dataloader_threads(lint_source, body: str, codes: set[str]) -> None:  # type: ignore[no-untyped-def]
    source, _ = _program(body, worker="cpu")
    found = {code for code, _ in codes_at(lint_source(source)) if code in ("GD101", "GD102")}
    assert found == codes


@pytest.mark.parametrize(("iteration", "reported"), [
    ("for b in loader:\n    pass", True),
    ("for i, b in enumerate(loader):\n    pass", True),
    ("first = next(iter(loader))", True),
    ("total = sum(b.sum() for b in loader)", True),
])
def test_pinned_dataloader_iteration_initializes_cuda(lint_source, iteration: str, reported: bool) -> None:  # type: ignore[no-untyped-def]
    body = "loader = DataLoader(ds, batch_size=4, pin_memory=True)\n" + iteration
    source, row = _program(body)
    assert (("GD101", row) in codes_at(lint_source(source))) is reported
