"""Recognise a tree model by its type's module and import it into a :class:`TreeEnsemble`.

The model libraries stay optional: nothing is imported until a model of theirs is passed.
"""

from __future__ import annotations

from ._ensemble import TreeEnsemble
from ._shap_dict import is_shap_dict, load_shap_dict

SUPPORTED = (
    "XGBoost: Booster, XGBRegressor, XGBClassifier (and other xgboost.sklearn tree models); "
    "LightGBM: Booster, LGBMRegressor, LGBMClassifier; "
    "scikit-learn: DecisionTree/ExtraTree Regressor/Classifier, RandomForest Regressor/Classifier, "
    "ExtraTrees Regressor/Classifier, GradientBoosting Regressor/Classifier, "
    "HistGradientBoosting Regressor/Classifier, IsolationForest; "
    "shap's dictionary format ({'trees': [{'children_left', 'children_right', 'children_default', "
    "'features', 'thresholds', 'values', 'node_sample_weight'}, ...]})"
)

_SKLEARN = {
    "DecisionTreeRegressor", "DecisionTreeClassifier", "ExtraTreeRegressor", "ExtraTreeClassifier",
    "RandomForestRegressor", "RandomForestClassifier", "ExtraTreesRegressor", "ExtraTreesClassifier",
    "GradientBoostingRegressor", "GradientBoostingClassifier",
    "HistGradientBoostingRegressor", "HistGradientBoostingClassifier", "IsolationForest",
}


def import_model(model) -> TreeEnsemble:
    """Convert a fitted tree model into a :class:`TreeEnsemble`.

    Raises:
      TypeError: for a model that is not one of the supported kinds (the message lists them).
    """
    if isinstance(model, TreeEnsemble):
        return model
    if is_shap_dict(model):
        return load_shap_dict(model)
    cls = type(model)
    module = cls.__module__ or ""
    root = module.split(".")[0]
    fitted = getattr(model, "__sklearn_is_fitted__", None)  # the sklearn wrappers of XGBoost and LightGBM
    if root in ("xgboost", "lightgbm") and fitted is not None and not fitted():
        raise ValueError(f"`model`: the {cls.__name__} is not fitted; call fit before explaining it.")
    if root == "xgboost":
        from ._xgboost import load_xgboost

        return load_xgboost(model)
    if root == "lightgbm":
        from ._lightgbm import load_lightgbm

        return load_lightgbm(model)
    if root == "sklearn" and cls.__name__ in _SKLEARN:
        if not hasattr(model, "n_features_in_"):
            raise ValueError(f"The {cls.__name__} is not fitted; call fit before explaining it.")
        from ._sklearn import load_sklearn

        return load_sklearn(model)
    raise TypeError(
        f"TreeExplainer cannot read a model of type {module}.{cls.__name__}. Supported models: {SUPPORTED}. "
        "For any other model use jaxshap.ExactExplainer, PermutationExplainer or KernelExplainer."
    )
