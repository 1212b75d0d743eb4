"""One wording for each hazard: the rule docs, the probe and the pytest plugin say the same."""

from __future__ import annotations

import pytest

from gpudoctor import hazards
from gpudoctor.lint.rules._registry import all_rules, rule_by_code
from gpudoctor.probe import error_strings
from gpudoctor.pytest_plugin.checks import fork_failure
from gpudoctor.pytest_plugin.markers import ForkSafe


def test_fill_puts_the_sentences_in_and_refuses_an_unknown_cause() -> None:
    text = "Why: {{multithreaded-fork.why}} For a forkserver worker, {{forkserver-after-init.fix}}"
    assert hazards.fill(text) == (f"Why: {hazards.MULTITHREADED_FORK.why} For a forkserver worker, "
                                  f"{hazards.FORKSERVER_AFTER_INIT.fix}")
    with pytest.raises(KeyError):
        hazards.fill("{{no-such-cause.why}}")


def test_rule_docs_are_filled_from_the_catalogue() -> None:
    for rule in all_rules():
        assert "{{" not in rule.documentation(), rule.code
    gd101, gd102 = rule_by_code("GD101"), rule_by_code("GD102")
    assert gd101 is not None and gd102 is not None
    assert hazards.FORK_AFTER_INIT.why in gd101.documentation()
    assert f"For a forkserver worker, {hazards.FORKSERVER_AFTER_INIT.fix}" in gd101.documentation()
    assert hazards.MULTITHREADED_FORK.why in gd102.documentation()
    assert {hazards.FORK_AFTER_INIT.rule, hazards.MULTITHREADED_FORK.rule} == {"GD101", "GD102"}
    gd104 = rule_by_code("GD104")
    assert gd104 is not None and hazards.PROCESS_START_AT_IMPORT.why in gd104.documentation()
    assert hazards.PROCESS_START_AT_IMPORT.rule == "GD104"
    # What happens at run time only: no rule can find it in the code.
    assert hazards.WORKER_DIED_IN_TASK.rule is None


def test_causes_are_the_words_of_the_error_string_categories() -> None:
    assert hazards.FORK_AFTER_INIT.cause == error_strings.FORK_AFTER_INIT
    assert hazards.MULTITHREADED_FORK.cause == error_strings.MULTITHREADED_FORK
    assert hazards.PROCESS_START_AT_IMPORT.cause == error_strings.START_AT_IMPORT
    assert set(hazards.BY_CAUSE) == {h.cause for h in hazards.BY_CAUSE.values()}


@pytest.mark.parametrize(("runtimes", "threads", "hazard"), [
    (["tensorflow"], 9, hazards.FORK_AFTER_INIT),
    ([], 3, hazards.MULTITHREADED_FORK),
])
def test_fork_safe_reports_the_same_sentences(runtimes: list[str], threads: int, hazard: hazards.Hazard) -> None:
    events = [{"event": "fork-parent", "pid": 10, "threads": threads, "runtimes": runtimes, "fork_t": 1.0,
               "site": "/elsewhere/test_x.py:3 in test_x"},
              {"event": "fork-child", "pid": 11, "ppid": 10, "fork_t": 1.0}]
    failure = fork_failure(ForkSafe(threads=True), events, root=10)
    assert failure is not None
    assert failure.section[1].splitlines()[-2:] == [hazards.why_for(hazard, runtimes), hazard.fix_line]


def test_the_fork_after_init_sentence_names_only_what_the_parent_had() -> None:
    why = hazards.FORK_AFTER_INIT
    assert hazards.why_for(why, []) == why.why  # nothing known: every framework, as the rule docs say
    assert hazards.why_for(hazards.MULTITHREADED_FORK, ["tensorflow"]) == hazards.MULTITHREADED_FORK.why
    cpu = hazards.why_for(why, ["tensorflow"])
    assert cpu.startswith("TensorFlow's intra-op thread pool does not survive `fork()`") and "CUDA context" not in cpu
    assert hazards.why_for(why, ["jax:cpu"]).startswith("JAX's (XLA's) CPU thread pool does not survive")
    numba = hazards.why_for(why, ["numba.cuda", "cuda-driver"])
    assert numba.startswith("A CUDA context does not survive") and "Numba raises" in numba
    assert "PyTorch" not in numba and "CuPy" not in numba
    assert hazards.why_for(why, ["cuda-driver"]).endswith("its first CUDA call fails or hangs.")
