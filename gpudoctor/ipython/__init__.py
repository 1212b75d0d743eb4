"""gpudoctor inside a running IPython kernel (``%load_ext gpudoctor``).

A notebook is where a fork after a GPU runtime bites hardest: the state that poisons the
fork was made cells ago, and the cells did not run in the order the file shows. The
extension reports what this kernel holds right now (``%gpudoctor``), which cell put it
there, and lints the cells in the order the kernel ran them (``%gpudoctor lint``).

IPython is not a dependency of gpudoctor: nothing here imports it; IPython hands the
extension its shell.
"""
