"""Priors of KernelSHAP's odd control variates, one per module, registered by name (see :mod:`._base`)."""

from ._base import RowPrior
from ._isotropic import Isotropic  # isort: skip  (registration order: the order names are listed in)
from ._hierarchical import Hierarchical  # isort: skip
from ._leading import Leading  # isort: skip

__all__ = ["RowPrior", "Isotropic", "Hierarchical", "Leading"]
