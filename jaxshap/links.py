"""Links, as ``shap.links``: the scale on which coalition values are attributed.

Pass one as ``link=`` to an explainer (``link=jaxshap.links.logit``, or its name ``"logit"``):
:func:`identity` attributes the model's own output, :func:`logit` the log-odds of a probability.
Each has its ``inverse`` (``logit.inverse`` is the logistic function), as shap's.
"""

from ._engine._explainer import identity, logit

__all__ = ["identity", "logit"]
