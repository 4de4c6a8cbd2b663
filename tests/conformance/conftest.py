"""The conformance suite: shap's own documentation examples, run with ``shap`` and with ``jaxshap``.

Each test holds one example's code as a function of the library module (written ``shap`` in
the function, as in the notebook), runs it once with ``shap`` and once with ``jaxshap`` on the
same inputs, and compares the values (see ``conformance_data``). Data that shap downloads is
replaced by local data of the same shape; sizes are cut (rows explained, trees) so the suite
runs on two CPU cores in a few minutes.
"""

import os
import sys
import warnings

import pytest

sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture(autouse=True)
def _quiet():
    """shap's and jaxshap's advisory warnings (background sizes, deprecations) are not under test here."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
