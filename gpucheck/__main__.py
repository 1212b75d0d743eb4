"""``python -m gpucheck``: see :mod:`gpucheck.runner`."""

from gpucheck.runner import main

raise SystemExit(main())
