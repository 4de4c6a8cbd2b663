"""TreeSHAP for tree ensembles: model import, path decomposition, exact kernels, explainer."""

from ._explainer import TreeExplainer
from ._import import SUPPORTED, import_model

__all__ = ["SUPPORTED", "TreeExplainer", "import_model"]
