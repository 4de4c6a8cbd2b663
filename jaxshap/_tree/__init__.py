"""TreeSHAP for tree ensembles: model readers, path decomposition, exact kernels.

Each model format is read by a :class:`TreeReader` in its own module, registered when the
module is imported below; a new format is one new module and one import line here.
"""

from ._reader import TreeReader, readers
from . import _xgboost, _lightgbm, _catboost, _sklearn, _isolation_forest, _passthrough, _shap_dict, _onnx  # noqa: F401  (register the readers)
from ._import import find_reader, import_model, reader_for, supported

__all__ = ["TreeReader", "find_reader", "import_model", "reader_for", "readers", "supported"]
