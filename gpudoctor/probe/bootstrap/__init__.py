"""The directory gpudoctor puts first on ``PYTHONPATH`` of a supervised command.

It holds only ``sitecustomize.py``, which every Python process of the supervised
tree runs at startup. A package (this file) so that wheels ship it.
"""
