"""Links: the scale on which coalition values are attributed (shap's ``link``).

With ``link="logit"`` the explained game is :math:`g(S) = \\operatorname{logit} v(S)`, the log-odds
of the coalition's expected probability, as ``shap.KernelExplainer(..., link="logit")``: the
values then add up to ``logit f(x) - logit E[f(X)]`` (Lundberg & Lee, 2017, section 4).
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

LINKS = ("identity", "logit")


def identity(v: jax.Array) -> jax.Array:
    """The identity link: values are attributed on the model's own scale."""
    return v


def logit(p: jax.Array) -> jax.Array:
    r"""``log(p / (1 - p))``, finite at exactly 0 and 1.

    Probabilities are first clipped to ``[eps, 1 - eps]`` with ``eps`` the gap below 1 of the
    floating type (``2**-24`` in float32, ``2**-53`` in float64), the closest a probability can
    come to 1 and still differ from it, so ``logit(0) = -logit(1)`` is about -16.6 in float32
    (-36.7 in float64) instead of -inf; inside that range the result is the exact
    :math:`\log p - \log(1 - p)`.
    """
    eps = jnp.finfo(p.dtype).epsneg
    q = jnp.clip(p, eps, 1 - eps)
    return jnp.log(q) - jnp.log1p(-q)


def _logistic(x: jax.Array) -> jax.Array:
    """The inverse of :func:`logit`: ``1 / (1 + exp(-x))``."""
    return jax.nn.sigmoid(x)


identity.inverse = identity
logit.inverse = _logistic


def resolve_link(link: Any) -> str:
    """The link's name: ``"identity"`` or ``"logit"`` (shap's ``shap.links`` functions are accepted).

    Raises:
      ValueError: for any other link, naming the two that exist.
    """
    name = getattr(link, "__name__", link)
    if isinstance(name, str) and name in LINKS:
        return name
    raise ValueError(
        f"`link` must be 'identity' or 'logit' (the log-odds of a probability output); got {link!r}."
    )


def link_function(name: str) -> Callable[[jax.Array], jax.Array]:
    """The function of a link name."""
    return identity if name == "identity" else logit


def check_link_outputs(name: str, outputs: Any) -> None:
    """Raise when ``link="logit"`` is given a model whose outputs are not probabilities.

    Raises:
      ValueError: when an output on the background rows lies outside ``[0, 1]``.
    """
    if name != "logit":
        return
    y = np.asarray(outputs)
    outside = ~((y >= 0) & (y <= 1))
    if outside.any():
        bad = y[outside].reshape(-1)[0]
        raise ValueError(
            "link='logit' explains the log-odds of a probability, but the model returned "
            f"{float(bad)!r} on the background, outside [0, 1]. Pass a model that returns probabilities "
            "(such as clf.predict_proba), or use link='identity' for margins and other outputs."
        )
