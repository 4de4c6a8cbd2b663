"""What TreeExplainer explains (``model_output``): the transform, the base value, the check.

``model_output`` picks a transform ``g`` of the ensemble's raw output ``f`` (see
:mod:`jaxshap._tree._interventional`):

* ``"raw"``: ``g`` is the identity;
* ``"probability"``: the ensemble's own ``output_transform`` (``"sigmoid"`` or ``"softmax"``;
  the identity for models whose raw output already is the probability);
* ``"predict_proba"``: as ``"probability"``, and for a binary classifier both columns
  ``(1 - p, p)`` (the output is *doubled*);
* ``"log_loss"``: the training loss given the label (``"logistic_nlogloss"`` for binary
  classifiers, ``"squared_loss"`` for squared-error regressors).

"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._core._platform import cached_jit
from .._core._validate import choice
from .._engine._program import host_or_device
from .._tree import _interventional
from .._tree._ensemble import TreeEnsemble
from .._core._inputs import put
from ._tree_build import Build


OUTPUTS = ("raw", "probability", "predict_proba", "log_loss")
LOSSES = ("logistic_nlogloss", "squared_loss")  # transforms whose base value depends on the label


def _probability(ensemble: TreeEnsemble, model_output: str, model: Any) -> tuple[str, bool]:
    """``(transform, doubled)`` for ``"probability"`` and ``"predict_proba"``."""
    transform = ensemble.output_transform
    if transform == "softmax" and ensemble.n_outputs > _interventional.MAX_SOFTMAX_CLASSES:
        raise ValueError(
            f"model_output={model_output!r} supports up to {_interventional.MAX_SOFTMAX_CLASSES} classes; this "
            f"model has {ensemble.n_outputs}. Use model_output='raw'."
        )
    if transform in ("sigmoid", "softmax"):
        doubled = model_output == "predict_proba" and transform == "sigmoid" and hasattr(model, "predict_proba")
        return transform, doubled
    if transform == "identity" and hasattr(model, "predict_proba"):
        return "identity", False  # the raw output already is the probability
    raise ValueError(
        f"model_output={model_output!r} needs a classifier whose output transform is known; this "
        f"{ensemble.source} model's is not (output_transform={transform!r}). Use model_output='raw'."
    )


@dataclasses.dataclass(frozen=True)
class TreeOutput:
    """The explained output of a tree model.

    Attributes:
      model_output: as the user passed it.
      transform: ``g`` (a name in :data:`jaxshap._tree._interventional.TRANSFORMS`).
      doubled: a binary ``predict_proba``: columns ``(1 - p, p)`` from the values of ``p``.
      n_outputs: ``K`` of the explained output (the ensemble's, twice when doubled).
    """

    model_output: str
    transform: str
    doubled: bool
    n_outputs: int

    @classmethod
    def resolve(cls, model_output: Any, ensemble: TreeEnsemble, model: Any) -> "TreeOutput":
        """The output ``model_output`` names for this model.

        Raises:
          ValueError: for an unknown ``model_output``, or one the model cannot give.
        """
        choice(model_output, "model_output", OUTPUTS)
        doubled = False
        if model_output == "raw":
            transform = "identity"
        elif model_output in ("probability", "predict_proba"):
            transform, doubled = _probability(ensemble, model_output, model)
        elif ensemble.loss == "binary_crossentropy":
            transform = "logistic_nlogloss"
        elif ensemble.loss == "squared_error":
            transform = "squared_loss"
        else:
            raise ValueError(
                f"model_output='log_loss' supports binary classifiers (log loss) and squared-error regressors; "
                f"this {ensemble.source} model's loss is {ensemble.loss!r}."
            )
        return cls(model_output, transform, doubled, ensemble.n_outputs * (2 if doubled else 1))

    @property
    def needs_labels(self) -> bool:
        return self.transform in LOSSES

    def labels(self, y: Any, n: int) -> np.ndarray:
        """``[n]`` float64 labels of the explained rows (zeros when the output needs none)."""
        if not self.needs_labels:
            return np.zeros(n)
        if y is None:
            raise ValueError("model_output='log_loss' needs the labels: call the explainer with `y=` [n].")
        yv = np.asarray(y, dtype=np.float64).reshape(-1)
        if yv.shape[0] != n:
            raise ValueError(f"`y` has {yv.shape[0]} labels but `X` has {n} rows; pass one label per row.")
        return yv

    def expected_value(self, build: Build, dtype) -> Any:
        """The base value ``[K]`` (a scalar for one output); for a loss, the function of the
        label ``y`` that gives the mean loss over the background at ``y``."""
        if self.needs_labels:
            return functools.partial(_label_base, self.transform, build.fb, build.weights)
        if self.transform == "identity":
            base = build.base
        else:
            zeros = np.zeros(np.shape(build.fb)[0])
            g = outputs_of_margins(put(build.fb, dtype), put(zeros, dtype), transform=self.transform)
            base = build.weights @ np.asarray(g, np.float64)
        if self.doubled:
            base = np.concatenate([1.0 - base, base])
        return put(base[0] if base.size == 1 else base, dtype)

    def of_raw(self, raw: np.ndarray, y: np.ndarray) -> np.ndarray:
        """``[n, K]`` the explained output from the raw output ``[n, K_raw]`` and labels (float64)."""
        if self.transform == "identity":
            out = raw
        else:
            g = outputs_of_margins(put(raw, np.float32), put(y, np.float32), transform=self.transform)
            out = np.asarray(g, np.float64)
        if self.doubled:
            out = np.concatenate([1.0 - out, out], axis=-1)
        return out

    def double(self, phi, base):
        """A binary classifier's ``predict_proba`` columns ``(1 - p, p)`` from the values and base
        values of ``p`` (through NumPy on a CPU, so a new number of rows compiles nothing)."""
        if not self.doubled:
            return phi, base
        phi = host_or_device(lambda a: np.concatenate([-a, a], axis=-1), _negate_and_keep, phi)
        base = host_or_device(lambda a: np.concatenate([1.0 - a, a], axis=-1), _complement_and_keep, base)
        return phi, base


@cached_jit(static_argnames=("transform",))
def outputs_of_margins(margins: jax.Array, labels: jax.Array, transform: str) -> jax.Array:
    """``g(m_i, y_i)`` for each row's margins ``[n, K]`` and label ``[n]``: one program, kept
    across processes (eager operations would compile a few small programs every process)."""
    return jax.vmap(lambda m, y: _interventional.apply(transform, m, y))(margins, labels)


_negate_and_keep = jax.jit(lambda phi: jnp.concatenate([-phi, phi], axis=-1))
_complement_and_keep = jax.jit(lambda base: jnp.concatenate([1.0 - base, base], axis=-1))


def assert_additive(phi, base, expected: np.ndarray, *, float32: bool) -> None:
    """Raise when ``values.sum(1) + base_values`` differ from the model's own ``expected``
    output ``[n, K]`` beyond the compute precision's tolerance.

    Raises:
      RuntimeError: naming the first row and output that differ.
    """
    phi = np.asarray(phi, np.float64)
    base = np.asarray(base, np.float64)
    total = phi.sum(1) + base
    scale = np.abs(phi).sum(1) + np.abs(base) + np.abs(expected)
    tol = 1e-5 + (1e-4 if float32 else 1e-10) * scale
    bad = np.abs(total - expected) > tol
    if bad.any():
        i, j = np.argwhere(bad)[0]
        raise RuntimeError(
            f"Additivity check failed: for row {i}, output {j}, values.sum() + base_values = {total[i, j]:.8g} "
            f"but the model's output is {expected[i, j]:.8g}. Please report this with the model; pass "
            "check_additivity=False to skip the check."
        )


def _label_base(transform: str, fb: np.ndarray, weights: np.ndarray, y: Any) -> Any:
    """The (weighted) mean over the background margins ``fb`` of the loss at label ``y`` (a scalar
    for one output), in float64."""
    with jax.enable_x64(True):
        base = weights @ np.asarray(_interventional.apply(transform, jnp.asarray(fb, jnp.float64), float(y)))
    return base[0] if base.size == 1 else base
