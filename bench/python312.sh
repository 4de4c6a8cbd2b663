# Sourced by the setup scripts that need Python 3.12 (bench/shapiq18, bench/shap_latest): sets
# $python to $PYTHON312, else python3.12 on PATH, else pyenv's 3.12.1, or exits with a message.
python="${PYTHON312:-}"
if [ -z "$python" ]; then
  if command -v python3.12 >/dev/null 2>&1 && python3.12 -c 'import sys' >/dev/null 2>&1; then
    python=python3.12
  elif [ -x "$HOME/.pyenv/versions/3.12.1/bin/python" ]; then
    python="$HOME/.pyenv/versions/3.12.1/bin/python"
  else
    echo "no Python 3.12 found: set PYTHON312 to one" >&2
    exit 1
  fi
fi
