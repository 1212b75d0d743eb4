"""What findings say: the place to act on, and no claim stronger than the analysis knows."""

from __future__ import annotations

from pathlib import Path

from gpudoctor.knowledge.processes import Target
from gpudoctor.lint.analysis.project import Project
from gpudoctor.lint.file_analysis import analyse

CASES = Path(__file__).resolve().parents[2] / "fixtures" / "cases"


def _messages(relative: str, code: str) -> list[str]:
    path = CASES / relative
    outcome = analyse(Project(path.parent), path, Target(11))
    assert not outcome.errors, outcome.errors
    return sorted({f.message for f in outcome.findings if f.code == code})  # flows repeat findings


def test_gd302_points_at_the_call_that_led_to_the_init() -> None:
    (message,) = _messages("tensorflow/trainer_configure_gpus_after_build.py", "GD302")
    # The init is inside Trainer.__init__; what the user can move is the call at line 29.
    assert "reached through the call at line 29" in message
    assert message.endswith("call it before line 29")


def test_gd302_without_a_call_points_at_the_init() -> None:
    (message,) = _messages("tensorflow/memory_growth_after_op.py", "GD302")
    assert message.endswith("call it before line 7") and "reached through" not in message


def test_gd102_says_a_thread_pool_was_created_not_started() -> None:
    (message,) = _messages("generic/thread_executor_then_process_executor.py", "GD102")
    assert "threads of the thread pool created at line 8 may still run" in message
    assert "started at line 8" not in message


def test_gd103_is_quiet_for_cpu_only_workers_and_names_what_gpu_ones_use() -> None:
    assert _messages("torch/executor_cpu_tokenize_implicit_fork.py", "GD103") == []
    (message,) = _messages("cupy/fork_default_pool_before_init.py", "GD103")
    assert "its workers use CuPy; they break as soon as this process initializes CuPy" in message


def test_gd105_names_a_daemonic_process_as_such() -> None:
    (message,) = _messages("generic/daemon_attribute_supervisor_pool.py", "GD105")
    assert "inside a daemonic Process (daemon=True)" in message
    (message,) = _messages("generic/pool_worker_starts_process.py", "GD105")
    assert "inside a daemonic Pool worker" in message


def test_gd302_points_at_the_import_that_ran_the_init_in_another_module() -> None:
    root = CASES.parent / "projects" / "tf_serving_app"
    # The finding is in gpu_config.py and comes from app.py's analysis (app.py calls it).
    outcome = analyse(Project(root), root / "app.py", Target(11))
    messages = {f.message for f in outcome.findings if f.code == "GD302"}
    (message,) = messages
    assert "reached through the import at app.py:9" in message
    assert message.endswith("call it before app.py:9")


def test_gd302_in_one_function_points_at_the_init_not_at_the_caller(tmp_path: Path) -> None:
    path = tmp_path / "setup_devices.py"
    path.write_text(
        "import tensorflow as tf\n\n\n"
        "def setup():\n"
        "    tf.config.list_logical_devices('GPU')\n"
        "    tf.config.set_visible_devices([], 'GPU')\n\n\n"
        "setup()\n"
    )
    outcome = analyse(Project(tmp_path), path, Target(11))
    (message,) = {f.message for f in outcome.findings if f.code == "GD302"}
    assert message.endswith("call it before line 5") and "reached through" not in message


def test_gd303_on_a_thread_setting_does_not_talk_about_memory() -> None:
    (message,) = _messages("tensorflow/threading_config_after_model_swallowed.py", "GD303")
    assert "default thread pool sizes" in message and "allocate-all" not in message


def test_other_files_are_named_relative_to_the_reporting_file() -> None:
    from gpudoctor.lint.findings import Site
    from gpudoctor.lint.rules._base import line_of

    here = Site("/p/app/pkg/pools.py", 5, 1, 5, 2)
    assert line_of(Site("/p/app/pkg/pools.py", 3, 1, 3, 2), here) == "line 3"
    assert line_of(Site("/p/app/pkg/gpu.py", 6, 1, 6, 2), here) == "gpu.py:6"
    assert line_of(Site("/p/app/main.py", 10, 1, 10, 2), here) == "../main.py:10"
    assert line_of(Site("/elsewhere/deep/x/y.py", 1, 1, 1, 2), here) == "/elsewhere/deep/x/y.py:1"


def test_gd301_says_a_spawned_worker_ran_the_top_level_first() -> None:
    path = CASES / "tensorflow/spawn_initializer_after_top_level_op.py"
    outcome = analyse(Project(path.parent), path, Target(11))
    (finding,) = {f.message: f for f in outcome.findings if f.code == "GD301"}.values()
    assert "at the main module's top level, which this spawned process runs again first" in finding.message
    assert finding.fix_hint.startswith('Move the module-level GPU call under `if __name__ == "__main__":`')


def test_gd101_on_a_forkserver_worker_says_the_server_ran_the_top_level() -> None:
    path = CASES / "torch" / "forkserver_default_module_level_device.py"
    outcome = analyse(Project(path.parent), path, Target(14))
    (finding,) = {f.message: f for f in outcome.findings if f.code == "GD101"}.values()
    assert finding.message.startswith("the Pool's workers are forked from the forkserver process, which "
                                      "initialized CUDA (PyTorch) when it ran the main module's top level "
                                      "(torch.cuda.is_available, line 17)")
    assert finding.fix_hint is not None and finding.fix_hint.startswith(
        'Move the GPU initialization under `if __name__ == "__main__":`')


def test_gd101_on_a_preloaded_module_names_it_and_the_preload_call() -> None:
    path = CASES / "pycuda" / "forkserver_preload_autoinit.py"
    outcome = analyse(Project(path.parent), path, Target(11))
    (finding,) = {f.message: f for f in outcome.findings if f.code == "GD101"}.values()
    assert "when it imported pycuda.autoinit, named by set_forkserver_preload (line 23)" in finding.message
    assert "the forkserver is told to import pycuda.autoinit here" in [r.message for r in finding.related]


def test_gd301_in_a_forkserver_worker_blames_the_server(tmp_path: Path) -> None:
    path = tmp_path / "main.py"
    path.write_text(
        "import multiprocessing as mp\nimport os\nimport torch\n\ntorch.cuda.set_device(0)\n\n\n"
        "def work(gpu):\n    os.environ['CUDA_VISIBLE_DEVICES'] = str(gpu)\n    return torch.ones(1).cuda()\n\n\n"
        "if __name__ == '__main__':\n    with mp.get_context('forkserver').Pool(2) as pool:\n"
        "        pool.map(work, [0, 1])\n", encoding="utf-8")
    outcome = analyse(Project(tmp_path), path, Target(13))
    (message,) = {f.message for f in outcome.findings if f.code == "GD301"}
    assert "initialized CUDA in the forkserver process, before it forked this one" in message


def test_gd103_does_not_call_an_explicit_choice_the_default() -> None:
    (message,) = _messages("torch/explicit_or_default_fork_pool.py", "GD103")
    assert "uses the default start method, fork, on one way to it" in message
    assert "on another the code chooses fork explicitly" in message


def test_gd101_says_what_each_framework_initialized() -> None:
    """TensorFlow's and JAX's fork hazard needs no GPU (thread pools, backend threads): the
    message does not claim CUDA for them; for PyTorch and CuPy it is CUDA."""
    (tensorflow,) = _messages("tensorflow/fork_pool_after_eager_op.py", "GD101")
    assert "after TensorFlow initialized its runtime in this process" in tensorflow
    (jax,) = _messages("jax/fork_pool_after_prngkey.py", "GD101")
    assert "after JAX initialized its backend in this process" in jax
    (cupy,) = _messages("cupy/device_no_arg_then_fork.py", "GD101")
    assert "after CuPy initialized CUDA in this process" in cupy


def test_a_start_method_set_on_the_other_package_is_named_where_it_does_not_apply(tmp_path: Path) -> None:
    # ``multiprocess`` (dill's copy of multiprocessing) keeps a default context of its own:
    # its set_start_method leaves the standard library's fork in force, and the other way round.
    path = tmp_path / "launch.py"
    path.write_text(
        "import multiprocess\n"
        "import multiprocessing\n"
        "import torch\n\n\n"
        "def work(i):\n"
        "    return torch.ones(i).cuda()\n\n\n"
        "def main():\n"
        "    torch.cuda.init()\n"
        "    multiprocess.set_start_method('spawn', force=True)\n"
        "    p = multiprocessing.Process(target=work, args=(1,))\n"
        "    p.start()\n"
        "    q = multiprocess.Process(target=work, args=(2,))\n"
        "    q.start()\n"
        "    multiprocessing.set_start_method('spawn')\n"
        "    r = multiprocess.get_context().Process(target=work, args=(3,))\n"
        "    r.start()\n\n\n"
        "if __name__ == '__main__':\n"
        "    main()\n"
    )
    outcome = analyse(Project(tmp_path), path, Target(11))
    found = {(f.site.row, f.message) for f in outcome.findings if f.code == "GD101"}
    assert [row for row, _ in found] == [14], found  # not q (spawned by its own package's method), not r
    ((_, message),) = found
    assert message.endswith("(it forks: multiprocess.set_start_method sets the default of multiprocess, "
                             "a separate package, not of multiprocessing, line 12)")
    (finding,) = (f for f in outcome.findings if f.code == "GD101")
    assert any(r.site.row == 12 for r in finding.related)
