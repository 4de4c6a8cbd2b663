"""Argument checks, one home: every message names the argument, states the rule and shows the value;
and warnings that blame the user's line.

Each check returns the value converted to a plain Python type (so it can be static configuration)
or raises ``ValueError``. Booleans are never numbers here: ``True`` is not a budget of one byte,
nor one permutation.

A message reads ``` `name` must be RULE; got VALUE.``` where ``RULE`` is derived from the bounds
(``"an integer of at least 2"``) unless a caller words it (``rule="a positive number of rows"``).

A warning about the user's arguments points at the user's code: :func:`user_stacklevel` is the
``stacklevel`` of the first frame outside the ``jaxshap`` package.
"""

from __future__ import annotations

import math
import os
import sys
from typing import Any, Sequence

import numpy as np


DEFAULT_MEMORY_BUDGET = 512 * 2**20
"""The working memory one explainer call may use, in bytes (512 MiB)."""


def _fail(name: str, rule: str, value: Any) -> ValueError:
    return ValueError(f"`{name}` must be {rule}; got {value!r}.")


def is_integer(value: Any) -> bool:
    """True for Python and NumPy integers, False for booleans (which are ints in Python)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def is_number(value: Any) -> bool:
    """True for Python and NumPy reals, False for booleans."""
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def _bounds_rule(kind: str, least: Any, most: Any) -> str:
    if least is not None and most is not None:
        return f"{kind} from {least} to {most}"
    if least == 1 and kind == "an integer":
        return "a positive integer"
    if least is not None:
        return f"{kind} of at least {least}"
    if most is not None:
        return f"{kind} of at most {most}"
    return kind


def integer(value: Any, name: str, *, least: int | None = None, most: int | None = None,
            multiple_of: int | None = None, rule: str | None = None) -> int:
    """``value`` as an ``int``, checked to be an integer (not a bool) within ``[least, most]``.

    Args:
      value: what the user passed.
      name: the argument's name, as the user spells it.
      least, most: inclusive bounds (``None``: unbounded).
      multiple_of: if given, ``value`` must be a multiple of it.
      rule: the rule in words, for the message (default: derived from the bounds).

    Raises:
      ValueError: naming ``name``, the rule and the value.
    """
    ok = is_integer(value) and (least is None or value >= least) and (most is None or value <= most)
    if not ok or (multiple_of is not None and value % multiple_of):
        kind = "an integer" if multiple_of is None else f"a multiple of {multiple_of}"
        raise _fail(name, rule or _bounds_rule(kind, least, most), value)
    return int(value)


def number(value: Any, name: str, *, least: float | None = None, above: float | None = None,
           below: float | None = None, most: float | None = None, rule: str | None = None) -> float:
    """``value`` as a finite ``float`` (not a bool), with ``value >= least``, ``> above``, ``< below``,
    ``<= most``.

    Raises:
      ValueError: naming ``name``, the rule and the value (NaN and infinities fail every rule).
    """
    ok = is_number(value) and math.isfinite(float(value))
    ok = ok and (least is None or value >= least) and (above is None or value > above)
    ok = ok and (below is None or value < below) and (most is None or value <= most)
    if not ok:
        if rule is None:
            bounds = [f"{word} {bound}" for word, bound in
                      (("at least", least), ("above", above), ("below", below), ("at most", most)) if bound is not None]
            rule = " ".join(["a finite number"] + [" and ".join(bounds)] * bool(bounds))
        raise _fail(name, rule, value)
    return float(value)


def flag(value: Any, name: str) -> bool:
    """``value`` as a ``bool``; only ``True``, ``False`` (or NumPy's) are flags."""
    if not isinstance(value, (bool, np.bool_)):
        raise _fail(name, "True or False", value)
    return bool(value)


def choice(value: Any, name: str, options: Sequence[Any]) -> Any:
    """``value`` if it is one of ``options``, else a message listing them."""
    if isinstance(value, (list, dict, set)) or value not in tuple(options):
        raise _fail(name, "one of " + ", ".join(repr(o) for o in options), value)
    return value


def layer_widths(value: Any, name: str = "hidden") -> tuple[int, ...]:
    """A network's hidden layer widths: one positive integer or a sequence of them, as a tuple.

    Raises:
      ValueError: naming ``name``, for anything else.
    """
    if is_integer(value):
        value = (value,)
    try:
        return tuple(integer(h, name, least=1, rule="a positive layer width, or a sequence of them") for h in value)
    except TypeError as err:
        raise ValueError(f"`{name}` must be a sequence of layer widths such as (256, 256); got {value!r}.") from err


def memory_budget(value: Any) -> int:
    """``memory_budget``: a positive integer number of bytes.

    Raises:
      ValueError: naming ``memory_budget``, the default and the value.
    """
    return integer(value, "memory_budget", least=1, rule=(
        f"a positive number of bytes, an integer (default {DEFAULT_MEMORY_BUDGET}, 512 MiB)"))


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def user_stacklevel() -> int:
    """The ``stacklevel`` for a :func:`warnings.warn` in the calling function that points at the
    first frame outside the ``jaxshap`` package, however many of its own frames (wrappers,
    helpers) lie between."""
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    return level


def interaction_order(interactions: object, most: int | None = None) -> int:
    """The order an explainer's ``interactions=`` asks for: ``False``/``None``/``0`` none (0),
    ``True`` shap's pairwise matrix (2), an int ``k`` the order-``k`` tensor.

    Raises:
      ValueError: naming ``interactions`` for anything else, or an order above ``most`` (what the
        explainer implements), so that no call returns a lower order than the one asked for.
    """
    if interactions is None or interactions is False:
        return 0
    if interactions is True:
        order = 2
    elif isinstance(interactions, (int, np.integer)) and not isinstance(interactions, bool) and interactions >= 0:
        order = int(interactions)
    else:
        raise ValueError(f"`interactions` must be True (pairs), False or an order k >= 1; got {interactions!r}.")
    if most is not None and order > most:
        can = f"up to order {most}" if most else "no interaction values"
        raise ValueError(f"`interactions={interactions!r}` asks for order {order}; this explainer computes {can}. "
                         "ExactExplainer (up to 20 features) and TreeExplainer compute every order.")
    return order
