#!/usr/bin/env bash
# Build a Python 3.12 environment with the newest shap (0.54.1 needs Python >= 3.12) and this
# checkout installed with its test extra, and run the conformance suite (tests/conformance/:
# shap's documentation examples run with shap and with jaxshap, compared) against it.
# Usage, from the repository root:
#   bash bench/shap_latest/setup.sh [VENV_DIR] [-- PYTEST_ARGS...]   (default: .venv-shap-latest)
# The interpreter is $PYTHON312, else python3.12 on PATH, else pyenv's 3.12.1. SHAP_VERSION
# (default 0.54.1) picks shap; SKIP_TESTS=1 only builds the environment.
# The conformance tests are in the slow tier, which pyproject's addopts deselects: the run below
# selects every tier with -m "slow or not slow".
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
venv="${1:-.venv-shap-latest}"
[ "$#" -gt 0 ] && shift
[ "${1:-}" = "--" ] && shift
shap_version="${SHAP_VERSION:-0.54.1}"
. "$(dirname "$0")/../python312.sh"
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
# the test extra (pytest, shap, scikit-learn, pandas, xgboost-cpu, lightgbm, shapiq, ...), then shap pinned
"$venv/bin/python" -m pip install --quiet -e "$root[test]"
"$venv/bin/python" -m pip install --quiet "shap==$shap_version"
"$venv/bin/python" -c 'import sys, shap, jax, numpy, pandas, sklearn, xgboost; print("python", sys.version.split()[0], "shap", shap.__version__, "jax", jax.__version__, "numpy", numpy.__version__, "pandas", pandas.__version__, "scikit-learn", sklearn.__version__, "xgboost", xgboost.__version__)'
if [ "${SKIP_TESTS:-0}" != "1" ]; then
  cd "$root"
  "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/conformance -m "slow or not slow" -rfEs "$@"
fi
