"""What gpudoctor knows of each framework and each way to start a process, as data.

The bottom of the house: one record per framework (``framework.py`` defines its shape;
``tensorflow.py``, ``torch.py``, ...), what each of its APIs does to a process, and the
tables the linter, the probe, the pytest plugin and the IPython extension all read
(``registry.py``, ``processes.py``, ``distributed.py``), with the facts seen at run time
(``distributed_runtime.py``, ``openmp_runtime.py``). Nothing here imports any other part
of gpudoctor.
"""
