"""GD001: a ``# noqa: GDxxx`` comment that suppresses nothing."""

from __future__ import annotations

from collections.abc import Iterator

from gpudoctor.lint.findings import WARNING, Finding
from gpudoctor.lint.rules._base import CheckContext, Rule

# A noqa directive whose colon no rule code follows (XYZ, say): see gpudoctor.lint.noqa.
MALFORMED = ("invalid noqa directive: expected a comma-separated list of rule codes after `# noqa:` "
             "(e.g. `# noqa: GD101`), so it suppresses nothing")


class UnusedNoqa(Rule):
    """## What it does
    Reports a `# noqa: GD101` (or any other gpudoctor code) on a line where gpudoctor
    reports no finding with that code. Codes of other tools (`E501`, `F401`) and bare
    `# noqa` comments are left alone.

    Also reports a `# noqa:` that names no rule code at all (`# noqa: XYZ`,
    `# noqa: fork`, a `# noqa:` with nothing after the colon). Such a comment suppresses
    nothing, as in ruff; write `# noqa` alone to suppress every finding on the line.

    ## Why is this bad?
    A stale suppression hides the next real problem on that line: after the code
    changes, a new fork-after-init bug there would never be reported.

    ## Fix safety
    The fix (take the code out of the comment) is unsafe: a finding in a helper module
    may come from the analysis of a file that calls the helper (its pool forks after the
    caller initialized CUDA). A run naming the helper alone (the per-file pre-commit
    hook, an editor) analyses those callers too, as far as its budget goes; when it
    cannot analyse them all it says so and reports no unused directive, but a caller
    outside the project, or one written later, may still need the suppression.

    ## Example
    ```python
    | with mp.get_context("spawn").Pool(2) as pool:  # noqa: GD101
    |     pool.map(work, items)
    ```

    Use instead:
    ```python
    | with mp.get_context("spawn").Pool(2) as pool:
    |     pool.map(work, items)
    ```

    ## References
    - [ruff: unused-noqa (RUF100)](https://docs.astral.sh/ruff/rules/unused-noqa/)
    """

    code = "GD001"
    name = "unused-noqa"
    severity = WARNING
    summary = "Unused noqa directive"
    fix_title = "Remove the unused code from the noqa comment"
    INVALID = (
        """\
        | import multiprocessing as mp
        |
        | def work(x):
        |     return x
        |
        | if __name__ == "__main__":
        |     # ruleid: GD001
        |     with mp.get_context("spawn").Pool(2) as pool:  # noqa: GD101
        |         pool.map(work, [1])
        """,
        """\
        | import multiprocessing as mp
        | import cupy as cp
        |
        | def work(x):
        |     return float(cp.sum(cp.asarray(x)))
        |
        | if __name__ == "__main__":
        |     cp.ones(3)
        |     # ruleid: GD001, GD101
        |     with mp.Pool(2) as pool:  # noqa: fork
        |         pool.map(work, [[1]])
        """,
    )
    VALID = (
        """\
        | import multiprocessing as mp
        | import cupy as cp
        |
        | def work(x):
        |     return float(cp.sum(cp.asarray(x)))
        |
        | if __name__ == "__main__":
        |     cp.ones(3)
        |     with mp.Pool(2) as pool:  # noqa: GD101
        |         pool.map(work, [[1]])
        """,
        """\
        | import multiprocessing as mp
        |
        | def work(x):
        |     return x
        |
        | if __name__ == "__main__":
        |     with mp.get_context("spawn").Pool(2) as pool:  # noqa: E501
        |         pool.map(work, [1])
        """,
    )

    def check(self, ctx: CheckContext) -> Iterator[Finding]:
        return iter(())  # the engine reports these once every other rule has run
