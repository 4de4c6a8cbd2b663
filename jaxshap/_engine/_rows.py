"""The runtime every explainer shares: a base class for explainers that work row by row.

A :class:`RowExplainer` says how to explain one chunk of rows (:meth:`~RowExplainer._explain_rows`,
traced), how much memory a row takes, how to validate input and how to wrap results; this base
gives it the rest, the same for every explainer: ``__call__`` with ``progress=`` and
``devices=``, :meth:`~RowExplainer.explain_batches` for streams, chunking under
``memory_budget``, rows padded to a few capacities, sharding over devices, host-level blocks,
and the pytree registration that lets one compiled program (:func:`._program.block_program`)
serve every instance of the same configuration. Every explainer runs on it: the model-agnostic
:class:`Explainer` (Exact, Permutation, Kernel) and ``LinearExplainer``, ``GradientExplainer``
and ``AmortizedExplainer`` (its explaining pass) subclass it; ``integrated_gradients`` and
``TreeExplainer`` hold a private subclass for their compiled kernels (rows ``[x, baseline]``;
one tree build's tables as leaves) and call :meth:`~RowExplainer._run` after their own
host-side preparation of the rows.

Contract (see each method):

* ``_explain_rows(X [r, M], keys [r]) -> (phi [r, M, K], base [r, K], stderr or None)``;
* ``_bytes_per_row() -> int`` (working memory of one row inside ``_explain_rows``);
* ``_validate(X) -> jax.Array`` and ``_wrap(phi, base, stderr, X, names) -> Explanation``;
* attributes ``memory_budget`` and ``n_features``; arrays held as attributes are pytree leaves,
  everything else (hashable) is static configuration.
"""

from __future__ import annotations

from typing import Any, Iterator

import jax

from .._result._explanation import Explanation
from .._core._chunking import (ProgressBar, check_batch_size, chunk_bytes, cut_batches, is_single_batch, map_chunks,
                               plan_blocks, progress_bar, total_rows)
from .._core._inputs import as_key, column_names, is_sparse, is_traced
from .._core._model import model_errors
from ._program import run_rows
from .._core._pytree import register_fields


class RowExplainer:
    """Base of every explainer: the shared runtime (not used directly; see the module docstring)."""

    memory_budget: int
    n_features: int
    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "tree_flatten" not in vars(cls):  # a subclass with its own pytree methods registers itself
            register_fields(cls)

    # --- what subclasses define ------------------------------------------------------------
    def _explain_rows(self, X: jax.Array, keys: jax.Array) -> Any:
        """``(phi [r, M, K], base [r, K], stderr [r, M, K] or None)`` for one chunk of rows (traced)."""
        raise NotImplementedError

    def _bytes_per_row(self) -> int:
        """Working memory of one row inside :meth:`_explain_rows`, for chunk planning."""
        raise NotImplementedError

    def _validate(self, X: Any) -> jax.Array:
        raise NotImplementedError

    def _wrap(self, phi, base, stderr, X, names) -> Explanation:
        raise NotImplementedError

    def _n_columns(self) -> int:
        """Columns of the explained rows (``n_features`` unless the players are groups of columns)."""
        return self.n_features

    def _align(self, X: Any) -> Any:
        """Match a DataFrame's columns to the explainer's feature names (none here)."""
        return X

    def _empty(self, X: jax.Array, names) -> Explanation:
        """The explanation of zero rows (validated ``X [0, M]``): arrays with a leading axis of 0.

        The shapes come from tracing the per-row work on one row (nothing is evaluated), so
        ``plan_chunks`` never sees zero rows.
        """
        rows, coalitions = self._plan(1)
        one = jax.ShapeDtypeStruct((1,) + tuple(X.shape[1:]), X.dtype)
        keys = jax.eval_shape(lambda: jax.random.split(jax.random.key(0), 1))
        shapes = jax.eval_shape(lambda x, k: self._explain_local(x, k, rows, coalitions), one, keys)
        phi, base, stderr = jax.tree_util.tree_map(
            lambda a: jax.numpy.zeros((0,) + tuple(a.shape[1:]), a.dtype), shapes
        )
        return self._wrap(phi, base, stderr, X, names)

    def _call_sparse(self, X: Any, key: Any, progress: Any, devices: Any) -> Explanation:
        """Explain ``scipy.sparse`` rows block by block, densifying one block at a time."""
        n = self._n_columns()
        if X.shape[1] != n:
            raise ValueError(
                f"`X` has {X.shape[1]} features but the explainer has {n}; "
                f"pass rows with the same {n} columns, in the same order."
            )
        X = X.tocsr()
        rows, _ = self._plan(max(int(X.shape[0]), 1))
        block = max(1, plan_blocks(int(X.shape[0]), rows, self._evals_per_row()))
        blocks = (X[i : i + block] for i in range(0, X.shape[0], block))
        parts = list(self.explain_batches(blocks, key, progress=progress, devices=devices))
        cat = lambda *a: None if a[0] is None else jax.numpy.concatenate(a, axis=0)  # noqa: E731
        first = parts[0]
        return Explanation(
            cat(*[p.values for p in parts]),
            cat(*[p.base_values for p in parts]),
            cat(*[p.data for p in parts]),
            cat(*[p.stderr for p in parts]),
            first.feature_names,
            first.output_names,
        )

    # --- planning ---------------------------------------------------------------------------
    def _plan(self, n_rows: int, exact: bool = True) -> tuple[int, int | None]:
        """``(rows_per_chunk, None)``: as many rows as fit the memory budget (at most ``n_rows``
        when ``exact``)."""
        rows = max(1, chunk_bytes(self.memory_budget) // max(int(self._bytes_per_row()), 1))
        return (min(rows, max(n_rows, 1)) if exact else rows), None

    def _evals_per_row(self) -> int:
        """Work units per row, to size host-level blocks (model evaluations for model-agnostic
        explainers; bytes of working memory here)."""
        return max(int(self._bytes_per_row()), 1)

    # --- the per-device work (inside the compiled program) ----------------------------------
    def _explain_local(self, X, keys, rows_per_chunk, coalitions_per_chunk, n_valid=None):
        """Explain rows ``X [b, M]`` with keys ``keys [b]`` in chunks; chunks past ``n_valid`` are skipped."""
        del coalitions_per_chunk
        return map_chunks(lambda args: self._explain_rows(*args), (X, keys), rows_per_chunk, n_valid)

    def _explain_keyed(self, X, key, index, rows_per_chunk, coalitions_per_chunk, n_valid=None):
        """Explain rows ``X [b, M]``, global rows ``index [b]``, under the call's ``key`` (traced).

        The hook for work shared by every row of a call: the default gives row ``i`` the key
        ``fold_in(key, i)`` and explains rows independently (:meth:`_explain_local`); an
        explainer that draws one design for all rows (``KernelExplainer``'s shared coalitions)
        overrides it and derives that design from ``key`` alone, once per block.
        """
        keys = jax.vmap(lambda i: jax.random.fold_in(key, i))(index)
        return self._explain_local(X, keys, rows_per_chunk, coalitions_per_chunk, n_valid)

    def _call_core(self, X: jax.Array, key: jax.Array) -> "RowExplainer":
        """The compiled program's argument for one call (:meth:`_core`; an explainer may attach
        arrays it computes on the host from the call's concrete key)."""
        return self._core()

    def _core(self) -> "RowExplainer":
        """This explainer without its metadata (feature names), as the compiled program's argument:
        explainers that differ only in names share a program."""
        core = object.__new__(type(self))  # not copy.copy: that goes through pickling's __setstate__
        core.__dict__.update(vars(self))
        if "_names" in vars(core):
            core._names = None
        return core

    # --- validation and wrapping ------------------------------------------------------------
    def _run(self, X: jax.Array, key: jax.Array, offset: int, devices: Any, bar: ProgressBar | None, blocked: bool):
        """Explain validated rows ``X``, as global rows ``offset, offset + 1, ...``: see
        :func:`jaxshap._engine._program.run_rows`. Returns ``(phi, base, stderr)``."""
        return run_rows(
            self._call_core(X, key),
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
          progress: show a progress bar (rows done, rate, time left; tqdm's when installed) on
            ``sys.stderr`` after 1 s; ``None`` (the default): as shap, after 10 s, for a run of
            many model evaluations or in a terminal (see :mod:`jaxshap._core._chunking`). Never
            shown while JAX is tracing (inside ``jax.jit``, ``jax.grad``, ``jax.vmap``). With a
            bar the rows run as successive equal blocks of one compiled program.
          devices: ``None`` (default) runs where ``X`` lies; ``"local"`` shards the rows over
            all of this process's devices (``jax.local_devices()``); a sequence of devices
            shards them over those. Results equal the single-device ones.

        Returns:
          An :class:`Explanation` with ``values`` ``[n, M]`` (or ``[n, M, K]``).
        """
        key = as_key(key)
        if is_sparse(X) and getattr(X, "shape", (0,))[0] > 0:
            return self._call_sparse(X, key, progress, devices)
        X = self._align(X)
        names = column_names(X)
        X = self._validate(X)
        if X.shape[0] == 0:
            return self._empty(X, names)
        bar = None if is_traced(X) else progress_bar(progress, X.shape[0], X.shape[0] * self._evals_per_row())
        show = bar is not None
        with model_errors():
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
        if is_single_batch(batches):  # a DataFrame's columns are matched to the explainer's once, before it is cut
            batches = self._align(batches)
        bar = progress_bar(progress, total_rows(batches))
        if batch_size is None and is_single_batch(batches):
            n = max(int(batches.shape[0]), 1)  # planned for one row: an empty array yields no batch
            rows, _ = self._plan(n)
            batch_size = plan_blocks(n, rows, self._evals_per_row())
        offset = 0
        try:
            for batch, n_real in cut_batches(batches, batch_size):
                batch = self._align(batch)
                names = column_names(batch)
                X = self._validate(batch)
                if X.shape[0] == 0:
                    yield self._empty(X, names)
                    continue
                with model_errors():
                    phi, base, stderr = self._run(X, key, offset, devices, bar, blocked=True)
                    if n_real != X.shape[0]:
                        phi, base, X = phi[:n_real], base[:n_real], X[:n_real]
                        stderr = None if stderr is None else stderr[:n_real]
                    offset += n_real
                    out = self._wrap(phi, base, stderr, X, names)
                yield out
        finally:
            if bar is not None:
                bar.close()


register_fields(RowExplainer)