"""Tests on a library's version: which comparisons are read, and when a set of them can hold."""

from __future__ import annotations

import libcst as cst
import pytest

from gpudoctor.lint.frontend.version_tests import VersionTest, can_all_hold, version_test


def _test(code: str) -> VersionTest | None:
    return version_test(cst.parse_expression(code))


@pytest.mark.parametrize(("code", "expected"), [
    ('version.parse(tf.__version__) < version.parse("2.1.0")', VersionTest("tf.__version__", "<", (2, 1, 0))),
    ('LooseVersion(torch.__version__) >= LooseVersion("1.8")', VersionTest("torch.__version__", ">=", (1, 8))),
    # the literal on the left: the operator is turned round
    ('Version("1.8") <= packaging.version.Version(torch.__version__)', VersionTest("torch.__version__", ">=", (1, 8))),
    ('parse_version(tf.version.VERSION) == parse_version("2.0")', VersionTest("tf.version.VERSION", "==", (2, 0))),
    ('version.parse(jax.__version__) != "0.4.1"', VersionTest("jax.__version__", "!=", (0, 4, 1))),
])
def test_a_parsed_version_compared_with_a_release_is_a_version_test(code: str, expected: VersionTest) -> None:
    assert _test(code) == expected


@pytest.mark.parametrize("code", [
    'tf.__version__ >= "2.0"',  # compared as strings: "2.10" < "2.9"
    'str(tf.__version__) >= "2.0"',
    'version.parse(tf.__version__) >= version.parse("2.1.0rc1")',  # a pre-release is not read
    'version.parse(tf.__version__) >= minimum',
    'version.parse(tf.__version__) in versions',
    '"1" < version.parse(tf.__version__) < "3"',
    "rank == 0",
    'version.parse(config.name) >= "2.0"',
])
def test_anything_else_is_not_one(code: str) -> None:
    assert _test(code) is None


def test_an_early_exits_name_is_read_back_from_its_text() -> None:
    assert version_test('if version.parse(tf.__version__) >= version.parse("2.0.0"): raise') == \
        VersionTest("tf.__version__", ">=", (2, 0, 0))
    assert version_test('if version.parse(tf.__version__) >= versi…') is None  # shortened: not read
    assert version_test("if rank != 0: return") is None


def _holds(*tests: tuple[str, str, str]) -> bool:
    return can_all_hold(VersionTest(subject, op, tuple(int(p) for p in release.split(".")))
                        for subject, op, release in tests)


def test_releases_are_dense_and_padded() -> None:
    tf = "tf.__version__"
    assert not _holds((tf, "<", "2.0"), (tf, ">=", "2.1"))  # TensorFlowOnSpark's two functions
    assert _holds((tf, ">=", "2.0"), (tf, "<", "2.1"))
    assert _holds((tf, ">", "2.0"), (tf, "<", "2.0.1"))  # 2.0.0.1 lies between
    assert not _holds((tf, ">", "2.0"), (tf, "<=", "2.0.0"))
    assert _holds((tf, ">=", "2.0"), (tf, "<=", "2.0.0"))
    assert not _holds((tf, ">=", "2.0"), (tf, "<=", "2"), (tf, "!=", "2.0.0"))
    assert not _holds((tf, "==", "1.15"), (tf, ">=", "2"))
    assert _holds((tf, "!=", "1.15"), (tf, ">=", "1.15"))


def test_tests_on_different_subjects_never_contradict() -> None:
    assert _holds(("tf.__version__", "<", "2.0"), ("torch.__version__", ">=", "2.1"))
    # the same library written another way is another subject: nothing is assumed
    assert _holds(("tf.__version__", "<", "2.0"), ("tensorflow.__version__", ">=", "2.1"))
