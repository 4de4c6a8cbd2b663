"""TreeSHAP for tree ensembles: model readers, path decomposition, exact kernels.

Each model library's format is read by a :class:`TreeReader` in its own module, registered when
the module is imported below; a new format is one new module and one import line here. The
readers of jaxshap's own ``TreeEnsemble`` and of shap's dictionary format live with the protocol
(:mod:`._reader`) and are registered here, in the order that :func:`supported` lists.
"""

from ._reader import (
    EnsembleReader,
    ShapDictReader,
    TreeReader,
    find_reader,
    import_model,
    reader_for,
    readers,
    register_reader,
    supported,
)
from . import _xgboost, _lightgbm, _catboost, _sklearn, _spark  # noqa: F401  (register the readers)

register_reader(EnsembleReader())
register_reader(ShapDictReader())

from . import _onnx  # noqa: E402, F401

__all__ = ["TreeReader", "find_reader", "import_model", "reader_for", "readers", "supported"]
