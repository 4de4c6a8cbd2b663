"""The base class of the model-agnostic explainers: what they share, in small parts.

An explainer binds a model and a masker once; calling it validates the rows (:meth:`_validate`,
with :mod:`._inputs`), plans chunks under the memory budget (:meth:`_plan`, with
:mod:`._chunking`), runs one compiled program over the rows (:func:`._program.run_rows`, which
also pads rows to a few capacities, shards them over devices with :mod:`._sharding` and cuts
host-level blocks), and wraps the results (:meth:`_wrap`). Streams are cut by
:mod:`._streaming`; progress is drawn by :mod:`._progress`. Subclasses only say how many
coalitions a row needs, how much working memory their estimator needs per row, and which
estimator kernel turns coalition values into attributions.

**Compile once.** Explainers are pytrees: their arrays (the masker's background, the model's
parameters when the model is a pytree or a ``functools.partial`` over arrays) are leaves and
everything else is static configuration (see :mod:`._pytree`). So ``jax.jit`` and ``jax.grad``
take an explainer as an argument, gradients with respect to the model's parameters need no
rebuilding, and the one module-level compiled program (:func:`._program.block_program`) serves
every explainer with the same configuration and shapes: a second instance, or one built per step
of a training loop, does not recompile. Concrete rows are padded to a few capacities (the padded
chunks are skipped, not evaluated), so a new number of rows rarely compiles either.

Scale (see :meth:`Explainer.__call__` and :meth:`Explainer.explain_batches`):

* memory: the working set is one chunk, sized from ``memory_budget`` (model evaluations plus the
  estimator's own working set); only the inputs and the results (``[n, M]``) grow with the
  number of rows. Chunk bodies are rematerialised under ``jax.grad``, so the gradient's memory
  is bounded by a chunk too;
* devices: rows sharded over a mesh (``NamedSharding`` on the row axis) are explained where
  they lie, with :func:`jax.shard_map`; ``devices=`` shards them on request; a mesh that spans
  several processes (``jax.distributed``) explains a data set across hosts;
* host-level blocks: with a progress bar, or when streaming batches, the compiled program runs
  on successive blocks of rows of one fixed shape (compiled once).

Row ``i`` (counted from the first row of the call or of the stream) is always explained with
the key ``fold_in(key, i)``, so results do not depend on chunks, blocks, batches or devices
(beyond float rounding: differently shaped batches may sum in a different order).
"""

from __future__ import annotations

import copy
from typing import Any, Callable, Iterator, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .._explanation import Explanation
from ..maskers import Independent
from ._chunking import DEFAULT_MEMORY_BUDGET, chunk_capacity, map_chunks, plan_blocks, plan_chunks
from ._inputs import (
    as_key,
    as_matrix,
    check_finite,
    check_n_features,
    column_names,
    is_traced,
    output_names,
    resolve_feature_names,
)
from ._model import wrap_model
from ._program import run_rows
from ._progress import ProgressBar, wants_progress
from ._pytree import register_fields
from ._streaming import as_rows, check_batch_size, cut_batches, is_array, total_rows

ValueFn = Callable[[jax.Array], jax.Array]


@jax.jit
def drop_output_axis(tree: Any) -> Any:
    """Drop the trailing output axis ``K = 1`` of every leaf (one small program per shape)."""
    return jax.tree_util.tree_map(lambda a: a[..., 0], tree)


def as_masker(masker: Any) -> Any:
    """A masker as given, or ``Independent(masker)`` for a background array or DataFrame."""
    if hasattr(masker, "coalition_values"):
        return masker
    if masker is None:
        raise ValueError(
            "`background` is required: pass background rows [B, M] (for example 100 training rows) "
            "or a masker such as jaxshap.maskers.Independent(data)."
        )
    return Independent(masker)


class Explainer:
    """Base class of the model-agnostic explainers (not used directly).

    Args:
      model: callable ``[n, M] -> [n]`` or ``[n, K]``; JAX-traceable, or a plain NumPy callable
        such as a scikit-learn ``predict`` (evaluated on the host, in batches).
      background: background rows ``[B, M]`` (array or DataFrame), used through
        :class:`jaxshap.maskers.Independent`, or a masker.
      feature_names: optional names of the ``M`` features; by default the columns of a
        DataFrame background or of the explained rows, else ``Feature j``.
      memory_budget: bytes of working memory that one chunk of model evaluations may use
        (default :data:`jaxshap.DEFAULT_MEMORY_BUDGET`, 512 MiB). The rows' coalitions are
        evaluated in chunks of whole rows (or, when one row does not fit, of coalitions) whose
        inputs, model activations and outputs fit the budget, so memory grows with the chunk
        and not with the number of rows; only the inputs and results (``[n, M]``) are held in
        full. On a CPU chunks are further capped at the cache-friendly
        :data:`jaxshap._runtime._chunking.CPU_CHUNK_BYTES`. Results do not depend on the budget.

    An explainer is a pytree (arrays are leaves, the configuration is static), so it can be an
    argument of ``jax.jit`` and ``jax.grad``::

        explain = jax.jit(lambda ex, X: ex(X).values)
        explain(ExactExplainer(partial(mlp, params), background), X)   # compiled once
        grads = jax.grad(lambda ex: (ex(X).values ** 2).sum())(explainer)
        grads.model.leaves                                             # d loss / d params
    """

    def __init__(
        self,
        model: Callable,
        background: Any,
        *,
        feature_names: Sequence[str] | None = None,
        memory_budget: int = DEFAULT_MEMORY_BUDGET,
    ):
        self.masker = as_masker(background)
        if isinstance(memory_budget, bool) or not isinstance(memory_budget, (int, np.integer)) or memory_budget <= 0:
            raise ValueError(f"`memory_budget` must be a positive number of bytes; got {memory_budget!r}.")
        self.memory_budget = int(memory_budget)
        self.n_features = self.masker.n_features
        self._check_n_features(self.n_features)
        self.model = wrap_model(model, self.n_features, self.masker.dtype, self.masker.probe_rows)
        self._names = None if feature_names is None else tuple(str(n) for n in feature_names)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        register_fields(cls)

    # --- what subclasses define ------------------------------------------------------------
    def _check_n_features(self, n_features: int) -> None:
        """Raise for feature counts this estimator cannot handle."""

    def _coalitions_per_row(self) -> int:
        raise NotImplementedError

    def _working_set_per_row(self) -> int:
        """Bytes the estimator itself holds per row besides model evaluations (masks, designs,
        Gram matrices), counted by the chunk planner. Subclasses refine it."""
        itemsize = np.dtype(self.masker.dtype).itemsize
        c, m, k = self._coalitions_per_row(), self.n_features, self.model.n_outputs
        return c * (m + 2 * itemsize * k)  # boolean masks and the coalition values (with their weights)

    def _estimate(self, key: jax.Array, value_fn: ValueFn) -> tuple[jax.Array, jax.Array, jax.Array | None]:
        """Return ``(phi [M, K], base [K], stderr [M, K] or None)`` for one row."""
        raise NotImplementedError

    # --- planning ---------------------------------------------------------------------------
    def _plan(self, n_rows: int, exact: bool = True) -> tuple[int, int]:
        """``(rows_per_chunk, coalitions_per_chunk)`` for ``n_rows`` rows under the memory budget.

        With ``exact`` the chunks are balanced over exactly ``n_rows`` rows; else the largest
        chunk that fits (one plan for any number of rows, so programs are shared).
        """
        args = (
            self._coalitions_per_row(),
            self.masker.evals_per_coalition,
            self.model.bytes_per_row + np.dtype(self.masker.dtype).itemsize * self.n_features,
            self.memory_budget,
            self._working_set_per_row(),
        )
        if exact:
            return plan_chunks(n_rows, *args)
        return chunk_capacity(*args)

    def _evals_per_row(self) -> int:
        return self._coalitions_per_row() * self.masker.evals_per_coalition

    # --- the per-device work (inside the compiled program) ----------------------------------
    def _explain_local(self, X, keys, rows_per_chunk, coalitions_per_chunk, n_valid=None):
        """Explain rows ``X [b, M]`` with per-row keys ``keys [b]``, chunk by chunk (traced).

        Chunks of rows that start at or past ``n_valid`` (a traced count, or ``None``) are skipped.
        """
        f, masker = self.model.fn, self.masker

        def one_row(k, x):
            def value_fn(masks):
                return map_chunks(lambda m: masker.coalition_values(f, x, m), masks, coalitions_per_chunk)

            return self._estimate(k, value_fn)

        return map_chunks(lambda args: jax.vmap(one_row)(*args), (keys, X), rows_per_chunk, n_valid)

    def _core(self) -> "Explainer":
        """This explainer without its metadata (feature names), as the compiled program's argument:
        explainers that differ only in names share a program."""
        core = copy.copy(self)
        core._names = None
        return core

    # --- validation and wrapping ------------------------------------------------------------
    def _validate(self, X: Any) -> jax.Array:
        X = as_matrix(X, "X", dtype=self.masker.dtype)
        check_n_features(X, self.n_features, "X", "the background")
        if isinstance(X, jax.Array) and not is_traced(X) and not X.is_fully_addressable:
            # rows spread over processes: check on the devices, without gathering them
            if not bool(jax.jit(lambda a: jnp.isfinite(a).all())(X)):
                raise ValueError("`X` contains NaN or inf; impute or drop those values before explaining.")
        else:
            check_finite(X, "X")
        return X

    def _wrap(self, phi, base, stderr, X, names) -> Explanation:
        if self.model.single_output:
            phi, base, stderr = drop_output_axis((phi, base, stderr))
        feature_names = resolve_feature_names(self._names, self.n_features, self.masker.feature_names, names)
        outputs = None if self.model.single_output else output_names(self.model.n_outputs)
        return Explanation(phi, base, X, stderr, feature_names, outputs)

    # --- running ----------------------------------------------------------------------------
    def _run(self, X: jax.Array, key: jax.Array, offset: int, devices: Any, bar: ProgressBar | None, blocked: bool):
        """Explain validated rows ``X``, as global rows ``offset, offset + 1, ...``: see
        :func:`jaxshap._runtime._program.run_rows`. Returns ``(phi, base, stderr)``."""
        return run_rows(
            self._core(),
            X,
            key,
            planner=self._plan,
            evals_per_row=self._evals_per_row(),
            offset=offset,
            devices=devices,
            bar=bar,
            blocked=blocked,
        )

    def __call__(self, X: Any, key: Any = None, *, progress: bool | None = None, devices: Any = None) -> Explanation:
        """Explain the rows of ``X``.

        Args:
          X: rows to explain, ``[n, M]`` (array or DataFrame; one row ``[M]`` is promoted). A JAX
            array sharded over a mesh along its rows (``jax.device_put(X, NamedSharding(mesh,
            P("rows")))``) is explained where it lies: each device explains its own rows and the
            results come back sharded the same way. That mesh may span several processes
            (``jax.distributed``): see :meth:`explain_batches` and the README's "Explaining
            across hosts".
          key: PRNG key for sampling estimators; ``None`` means ``jax.random.key(0)``. Row ``i``
            uses ``fold_in(key, i)``, whatever the chunks, blocks or devices.
          progress: show a progress bar (rows done, rate, time left) on ``sys.stderr``; ``None``
            (the default) shows it only when ``sys.stderr`` is an interactive terminal. Never
            shown while JAX is tracing (inside ``jax.jit``, ``jax.grad``, ``jax.vmap``). With a
            bar the rows run as successive equal blocks of one compiled program.
          devices: ``None`` (default) runs where ``X`` lies; ``"local"`` shards the rows over
            all of this process's devices (``jax.local_devices()``); a sequence of devices
            shards them over those. Results equal the single-device ones.

        Returns:
          An :class:`Explanation` with ``values`` ``[n, M]`` (or ``[n, M, K]``).
        """
        names = column_names(X)
        X = self._validate(X)
        key = as_key(key)
        show = wants_progress(progress) and not is_traced(X)
        bar = ProgressBar(X.shape[0]) if show else None
        try:
            phi, base, stderr = self._run(X, key, 0, devices, bar, blocked=show)
        finally:
            if bar is not None:
                bar.close()
        return self._wrap(phi, base, stderr, X, names)

    def explain_batches(
        self,
        batches: Any,
        key: Any = None,
        *,
        batch_size: int | None = None,
        progress: bool | None = None,
        devices: Any = None,
    ) -> Iterator[Explanation]:
        """Explain a stream of rows batch by batch, yielding one :class:`Explanation` per batch.

        Only one batch is in memory at a time, so a data set larger than memory (a
        ``numpy.memmap``, ``np.load(path, mmap_mode="r")``, or a generator reading files) can be
        explained with results written out as they come. Rows are numbered across the whole
        stream and row ``i`` uses ``fold_in(key, i)``, so the values do not depend on how the
        rows are cut into batches, and equal ``__call__`` on all rows at once (up to float
        rounding).

        Example (write the values of a memory-mapped data set to a memory-mapped result)::

            X = np.load("rows.npy", mmap_mode="r")                    # [n, M], not loaded
            out = np.lib.format.open_memmap("shap.npy", "w+", np.float32, X.shape)
            row = 0
            for expl in explainer.explain_batches(X, key=jax.random.key(0)):
                out[row : row + len(expl)] = np.asarray(expl.values)
                row += len(expl)
            out.flush()

        Args:
          batches: a 2-D array (NumPy, memory-mapped, JAX or a DataFrame), cut into batches of
            ``batch_size`` rows (the last batch is padded to the same shape, so one program is
            compiled); or any iterable of 2-D batches (each distinct batch shape compiles once).
          key: PRNG key for sampling estimators; ``None`` means ``jax.random.key(0)``.
          batch_size: rows per batch when ``batches`` is an array; by default a few chunks'
            worth of rows planned from ``memory_budget``.
          progress: progress bar over the rows, as in :meth:`__call__` (the total is known for an
            array or an iterable with ``len``, else only the count and rate are shown).
          devices: as in :meth:`__call__`: ``"local"`` or a sequence of devices shards each batch.

        Yields:
          One :class:`Explanation` per batch, in order (JAX arrays; ``np.asarray`` copies them out).
        """
        batch_size = check_batch_size(batch_size)
        key = as_key(key)
        show = wants_progress(progress)
        bar = ProgressBar(total_rows(batches)) if show else None
        if batch_size is None and is_array(batches):
            n = int(batches.shape[0])
            rows, _ = self._plan(n)
            batch_size = plan_blocks(n, rows, self._evals_per_row())
        offset = 0
        try:
            for batch, n_real in cut_batches(batches, batch_size):
                names = column_names(batch)
                X = self._validate(batch)
                phi, base, stderr = self._run(X, key, offset, devices, bar, blocked=True)
                if n_real != X.shape[0]:
                    phi, base, X = phi[:n_real], base[:n_real], X[:n_real]
                    stderr = None if stderr is None else stderr[:n_real]
                offset += n_real
                yield self._wrap(phi, base, stderr, X, names)
        finally:
            if bar is not None:
                bar.close()


register_fields(Explainer)
