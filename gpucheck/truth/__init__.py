"""Helpers of the checks that hold gpudoctor's claims against a real GPU.

``truth_table`` (what each API of the knowledge tables really initializes), ``sampler``
(how exact gpudoctor's per-process GPU memory is, and what supervising costs) and
``nvml_shapes`` (what the real NVML returns, for the fake one the tests use). Every
program that touches a GPU framework or the driver runs as a child process.
"""
