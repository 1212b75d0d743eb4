"""``make gpu-check``: every GPU path of gpudoctor run for real on a machine with an NVIDIA GPU.

Not part of the installed package: it runs from a clone, with the repository on
``sys.path`` and the interpreter that holds the GPU frameworks (``PYTHON=...``). Each
module of :mod:`gpucheck.parts` checks one thing and returns a :class:`PartResult`;
the runner (``python -m gpucheck``) writes them into one report.
"""
