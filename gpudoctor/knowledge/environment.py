"""Environment variables the CUDA driver itself reads, once, at initialization.

Any driver initialization makes a later write useless. Source: CUDA programming guide,
"CUDA Environment Variables". The variables a framework reads when it builds its runtime
are in its record (``Framework.environment``); registry.READERS joins both.
"""

from __future__ import annotations

DRIVER = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")
