"""Run gpudoctor as ``python -m gpudoctor``."""

import sys

from gpudoctor.cli import run

# Guarded: a spawned worker process imports the main module again, and must not run it.
if __name__ == "__main__":
    sys.exit(run())
