"""GD000: a file gpudoctor needed to read could not be parsed."""

from __future__ import annotations

from collections.abc import Iterator

from gpudoctor.lint.findings import ERROR, Finding
from gpudoctor.lint.rules._base import CheckContext, Rule


class UnparseableFile(Rule):
    """## What it does
    Reports a file gpudoctor needs to analyse but cannot parse (a syntax error, a null
    byte, invalid UTF-8): a file whose code starts processes or configures the GPU, a
    module such a file imports, or any file that cannot be read as text. An unparseable
    module is reported where the parser stops, and also at the import that led to it when
    only the importing file is linted (as in pre-commit, which names changed files).

    A file that can matter to no rule (it starts no process and writes no GPU setting) is
    not parsed at all, which is what keeps gpudoctor fast on large code bases; its syntax
    errors are left to Python and to your other linters.

    In a Jupyter notebook, a code cell that is not Python (a half-typed line, LaTeX pasted
    into a code cell, a bracket left open) is a warning at that cell: IPython rejects such
    a cell and runs the others, so gpudoctor leaves it out and checks the rest. IPython's
    own syntax (magics, shell escapes, `%%bash` cells, Colab form lines) is not an error.

    A warning at the first line of a file says where its analysis was cut short by one of
    its bounds (calls followed 24 deep, code nested past the analysis's meter, 20,000
    calls analysed, 400 events kept of what one call does), when something the file does lies past
    it: the findings shown are right, and one there may be missing. A function reached
    only past the calls followed is still analysed on its own; what ran before it is not
    known there.

    ## Why is this bad?
    gpudoctor cannot see what such a file does before it forks, so it cannot vouch
    for it. The file would also fail at import time.

    ## Example
    ```python
    | import tensorflow as tf
    | with strategy.scope():
    |     # model definition goes here
    ```

    Use instead:
    ```python
    | import tensorflow as tf
    | with strategy.scope():
    |     model = build_model()
    ```

    ## References
    - [Python grammar](https://docs.python.org/3/reference/grammar.html)
    """

    code = "GD000"
    name = "unparseable-file"
    severity = ERROR
    summary = "File cannot be parsed"
    INVALID = (
        "import multiprocessing\n# ruleid: GD000\ndef broken(:\n    pass\n",
    )
    VALID = ("import multiprocessing\n\ndef fine():\n    pass\n",)

    def check(self, ctx: CheckContext) -> Iterator[Finding]:
        return iter(())  # the engine reports parse failures with this rule's metadata
