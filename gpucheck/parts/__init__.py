"""The checks of ``make gpu-check``, one module each.

A check module defines ``NAME`` (short, used for ``--parts`` and its folder), ``ORDER``
(an int: the runner goes in ascending order) and ``run(ctx: Context) -> PartResult``.
The runner finds the modules here by listing the package.
"""
