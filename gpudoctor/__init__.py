"""gpudoctor: find and explain GPU + process-parallelism failures."""

__version__ = "0.1.0"
