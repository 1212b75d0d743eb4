"""Run gpudoctor as ``python -m gpudoctor``."""

import sys

from gpudoctor.cli import main

sys.exit(main())
