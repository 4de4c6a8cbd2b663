#!/usr/bin/env bash
# Build the Python 3.12 environment that runs shapiq 1.8's approximators for
# `python -m bench kernel_accuracy` (shapiq >= 1.5 needs Python >= 3.12; the project's own
# environment may be older). Usage, from the repository root:
#   bash bench/shapiq18/setup.sh [VENV_DIR]        (default: .venv-shapiq18)
# The interpreter is $PYTHON312, else python3.12 on PATH, else pyenv's 3.12.1.
set -euo pipefail
venv="${1:-.venv-shapiq18}"
. "$(dirname "$0")/../python312.sh"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet -r "$(dirname "$0")/requirements.txt"
"$venv/bin/python" -c 'import shapiq, xgboost, lightgbm, numpy; print("shapiq", shapiq.__version__, "xgboost", xgboost.__version__, "lightgbm", lightgbm.__version__, "numpy", numpy.__version__)'
