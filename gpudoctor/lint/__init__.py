"""gpudoctor lint: static analysis of GPU + multiprocessing hazards.

This package never imports the code it checks, a GPU framework, the probe,
pynvml or psutil (enforced by ``gpudoctor/lint/ruff.toml``).
"""
