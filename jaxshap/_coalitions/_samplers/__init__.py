"""KernelSHAP samplers, one design per module, registered by name (see :mod:`._base`)."""

from ._base import Sampler
from ._paired import Paired  # isort: skip  (registration order: the order names are listed in)
from ._leverage import Leverage  # isort: skip
from ._middle import Middle  # isort: skip

__all__ = ["Sampler", "Paired", "Leverage", "Middle"]
