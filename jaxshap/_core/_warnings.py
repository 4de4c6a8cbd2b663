"""Warnings that blame the user's line: the ``stacklevel`` of the first frame outside jaxshap."""

from __future__ import annotations

import os
import sys

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def user_stacklevel() -> int:
    """The ``stacklevel`` for a :func:`warnings.warn` in the calling function that points at the
    first frame outside the ``jaxshap`` package, however many of its own frames (wrappers,
    helpers) lie between."""
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    return level
