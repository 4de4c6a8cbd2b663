"""TreeSHAP for tree ensembles: model import, path decomposition, exact kernels."""

from ._import import SUPPORTED, import_model

__all__ = ["SUPPORTED", "import_model"]
