"""Turning user inputs (NumPy, JAX, pandas) into validated JAX matrices.

Validation that needs concrete values (NaN and inf checks) is skipped for traced arrays,
so that explainers stay usable inside ``jax.jit`` and ``jax.grad``.
"""

from __future__ import annotations

from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ._validate import integer, is_integer


def is_traced(x: Any) -> bool:
    """True when ``x`` is an abstract value inside a JAX transformation."""
    return isinstance(x, jax.core.Tracer)


def column_names(x: Any) -> list[str] | None:
    """Feature names of a pandas-like DataFrame (duck-typed), else ``None``."""
    columns = getattr(x, "columns", None)
    if columns is None or not hasattr(x, "to_numpy"):
        return None
    return [str(c) for c in columns]


def float_dtype(x: Any) -> np.dtype:
    """The floating dtype to compute in: the input's when it is floating, else JAX's default."""
    dtype = getattr(x, "dtype", None)
    if dtype is not None and jnp.issubdtype(dtype, jnp.floating):
        return jax.dtypes.canonicalize_dtype(dtype)
    return jax.dtypes.canonicalize_dtype(jnp.float_)


def object_numbers(x: np.ndarray) -> np.ndarray:
    """An object array of numbers and ``None`` (missing, as shap reads it) as float64 with NaN;
    any other array as it is (an object array holding anything else is left for the caller to
    refuse)."""
    if x.dtype != object:
        return x
    try:
        return np.asarray(x, dtype=np.float64)  # None becomes NaN
    except (TypeError, ValueError):
        return x


def is_sparse(x: Any) -> bool:
    """True for a ``scipy.sparse`` matrix or array (duck-typed: no scipy import)."""
    return hasattr(x, "tocsr") and hasattr(x, "toarray") and hasattr(x, "nnz")


def _frame_to_numpy(x: Any, name: str) -> np.ndarray:
    """A DataFrame's values as float64, with pandas' nullable ``pd.NA`` as NaN.

    Mixed float, int and bool columns (NumPy or pandas nullable dtypes such as ``Int64``,
    ``Float64``, ``boolean``) are all accepted; columns of any other kind are named in the error.
    """
    dtypes = getattr(x, "dtypes", None)
    if dtypes is not None:
        columns = list(getattr(x, "columns", []))
        bad = [
            (str(c), str(d))
            for c, d in zip(columns, list(dtypes))
            if getattr(d, "kind", "O") not in ("b", "i", "u", "f")
        ]
        if bad:
            shown = ", ".join(f"{c!r} ({d})" for c, d in bad[:5])
            text = any(d != "category" for _, d in bad)
            raise TypeError(
                f"`{name}` has columns that are not numbers: {shown}. "
                + ("Make a text column a pandas category column (`df[col].astype('category')`): the explainers "
                   "and the global effects read it as its codes and give a model fitted on the frame its "
                   "labels; or encode it as numbers (pandas.get_dummies, .cat.codes)." if text else
                   "Encode categorical columns as numbers first (for example with pandas.get_dummies or "
                   ".cat.codes).")
            )
        return x.to_numpy(dtype=np.float64, na_value=np.nan)
    return np.asarray(x.to_numpy())


def as_matrix(x: Any, name: str, *, dtype: Any = None) -> jax.Array:
    """Convert ``x`` to a floating ``[n, M]`` JAX array, promoting a single row to ``[1, M]``.

    The checks and conversions of :func:`host_matrix`, then the rows on the device.
    """
    rows = host_matrix(x, name, dtype=dtype)
    # with its dtype named, jnp.asarray transfers the rows; without, JAX 0.10 lifts a NumPy array
    # through a jitted `stage`, compiled again for every new row count
    return jnp.asarray(rows, dtype=rows.dtype)


def put(a: Any, dtype: Any) -> jax.Array:
    """A host array on the default device in ``dtype``, converted on the host: nothing is compiled
    (JAX 0.10 lifts a NumPy array given to ``jnp.asarray`` without a dtype, and converts a dtype,
    through a small jitted program per shape)."""
    return jax.device_put(np.asarray(a, dtype))


def host_matrix(x: Any, name: str, *, dtype: Any = None) -> np.ndarray | jax.Array:
    """``x`` as a floating ``[n, M]`` matrix, promoting a single row to ``[1, M]``: NumPy for
    host input (not copied when it already has the dtype), a JAX array for JAX input.

    Args:
      x: array-like, JAX array, ``scipy.sparse`` matrix (densified) or pandas-like DataFrame
        (mixed float/int/bool and nullable columns; ``pd.NA`` becomes NaN).
      name: the argument's name, used in error messages.
      dtype: floating dtype to cast to; by default the input's own floating dtype, or
        float32 (float64 under ``jax_enable_x64``) for non-floating input.

    Raises:
      TypeError: when ``x`` cannot be read as a numeric array, or holds complex numbers.
      ValueError: when ``x`` is not one- or two-dimensional, or has no columns.
    """
    if hasattr(x, "to_numpy") and column_names(x) is not None:
        x = _frame_to_numpy(x, name)
    elif is_sparse(x):
        x = x.toarray()
    if not is_traced(x) and not isinstance(x, (jax.Array, np.ndarray)):
        try:
            x = np.asarray(x)
        except Exception as err:  # pragma: no cover - depends on the object
            raise TypeError(f"`{name}` must be an array-like of numbers; got {type(x).__name__}.") from err
    if isinstance(x, np.ndarray):
        x = object_numbers(x)
    if jnp.issubdtype(x.dtype, jnp.complexfloating):
        raise TypeError(
            f"`{name}` holds complex numbers (dtype {x.dtype}); Shapley values need real features. Pass "
            "the real and imaginary parts (or modulus and phase) as separate real columns."
        )
    if not (jnp.issubdtype(x.dtype, jnp.number) or jnp.issubdtype(x.dtype, jnp.bool_)):
        raise TypeError(
            f"`{name}` must hold numbers; got dtype {x.dtype}. Encode categorical columns as numbers first."
        )
    x = as_rows(x, name)
    target = jax.dtypes.canonicalize_dtype(dtype if dtype is not None else float_dtype(x))
    check_fits(x, target, name)
    if isinstance(x, np.ndarray):
        return x.astype(target, copy=False)
    return jnp.asarray(x, dtype=target)


def as_rows(x: Any, name: str) -> Any:
    """``x`` (NumPy or JAX) as rows ``[n, M]``: one row ``[M]`` is promoted; anything else that is
    not 2-D, or has no columns, is refused naming ``name``."""
    if x.ndim == 1:
        x = x[None, :]
    if x.ndim != 2:
        raise ValueError(f"`{name}` must be a 2-D array of shape [rows, features]; got shape {tuple(x.shape)}.")
    if x.shape[1] == 0:
        raise ValueError(f"`{name}` has no feature columns; pass an array of shape [rows, features].")
    return x


def check_fits(x: Any, dtype: Any, name: str) -> None:
    """Raise a ``ValueError`` when concrete finite values of ``x`` overflow the floating ``dtype``.

    Casting float64 values above float32's range gives inf, which would later be reported as
    "NaN or inf" in data that holds none.
    """
    if is_traced(x) or not jnp.issubdtype(dtype, jnp.floating):
        return
    source = np.dtype(x.dtype)
    if not (np.issubdtype(source, np.number) and source.itemsize > np.dtype(dtype).itemsize):
        return
    top = np.finfo(dtype).max
    a = np.asarray(x)
    too_big = np.isfinite(a) & (np.abs(a) > top)
    if too_big.any():
        where = tuple(int(i) for i in np.argwhere(too_big)[0])
        raise ValueError(
            f"`{name}` holds values too large for {np.dtype(dtype).name} (first {a[where]:.3g} at index {where}; "
            f"the largest is {float(top):.3g}). Rescale the features, or enable x64 "
            "(jax.config.update('jax_enable_x64', True)) to work in float64."
        )


def align_columns(x: Any, reference: Sequence[str] | None, name: str = "X") -> Any:
    """Reorder a DataFrame's columns to the background's, by name.

    Nothing changes when ``x`` is not a DataFrame, when the background had no column names, or
    when the columns already match. Reordered columns are put back in the background's order;
    missing or unexpected columns raise, so that no value is ever attributed to the wrong name.

    Raises:
      ValueError: naming the missing and the unexpected columns.
    """
    if reference is None:
        return x
    reference = [str(r) for r in reference]
    if getattr(x, "ndim", None) == 1 and hasattr(x, "index") and hasattr(x, "to_numpy"):
        return _align_series(x, reference, name)
    names = column_names(x)
    if names is None:
        return x
    if names == reference:
        return x
    missing = [r for r in reference if r not in names]
    extra = [c for c in names if c not in reference]
    if missing or extra or len(set(names)) != len(names) or len(names) != len(reference):
        parts = []
        if missing:
            parts.append(f"missing {missing}")
        if extra:
            parts.append(f"not in the background {extra}")
        if not parts:
            parts.append("duplicated column names")
        raise ValueError(
            f"`{name}`'s columns do not match the background's: {'; '.join(parts)}. Pass a DataFrame with "
            f"the background's columns {reference} (in any order: they are matched by name)."
        )
    return x.iloc[:, [names.index(r) for r in reference]]


def _align_series(x: Any, reference: list[str], name: str) -> Any:
    """One row given as a pandas Series (``df.iloc[0]``): its index labels are the column names."""
    labels = [str(i) for i in x.index]
    if labels == reference:
        return x
    if sorted(labels) == sorted(reference) and len(set(labels)) == len(labels):
        return x.iloc[[labels.index(r) for r in reference]]
    if any(isinstance(i, str) for i in x.index):
        missing = [r for r in reference if r not in labels]
        extra = [c for c in labels if c not in reference]
        raise ValueError(
            f"`{name}` (one row, a Series) has labels that do not match the background's columns: missing "
            f"{missing}, not in the background {extra}. Pass a row with the background's columns {reference}."
        )
    return x  # a Series with a positional index: its values are taken in order


@jax.jit
def _all_finite(values: jax.Array) -> jax.Array:
    return jnp.isfinite(values).all()


def check_finite_rows(values: Any, name: str, what: str, inputs: Any = None) -> None:
    """Raise a ``ValueError`` naming the first rows where ``values`` ``[n, ...]`` is NaN or inf.

    Used on a model's outputs (and what is computed from them), so that a model returning NaN
    (for example on NaN in ``X`` it cannot handle) is reported instead of silently propagated.
    When ``inputs`` (the rows ``[n, M]``) is given and holds NaN or inf in a bad row, the message
    points at the first such entry. No-op for traced arrays.
    """
    if is_traced(values) or values is None or np.size(values) == 0:
        return
    on_cpu = isinstance(values, jax.Array) and all(d.platform == "cpu" for d in values.devices())
    if isinstance(values, jax.Array) and not on_cpu and bool(_all_finite(values)):
        return  # checked where the values lie: nothing is copied to the host (nor compiled on a CPU)
    arr = np.asarray(values)
    finite = np.isfinite(arr.reshape(arr.shape[0], -1)).all(axis=1)
    if finite.all():
        return
    rows = np.flatnonzero(~finite)
    shown = ", ".join(str(int(r)) for r in rows[:10]) + (", ..." if rows.size > 10 else "")
    where = ""
    if inputs is not None and not is_traced(inputs):
        x = np.asarray(inputs)[rows]
        bad = np.argwhere(~np.isfinite(x))
        if bad.size:
            where = f"; `{name}` itself holds NaN or inf there (first at index ({int(rows[bad[0][0]])}, {int(bad[0][1])}))"
    raise ValueError(
        f"{what} is NaN or inf for {rows.size} row(s) of `{name}` (rows {shown}){where}. Impute the missing "
        f"values of `{name}` or use a model that handles them (such as XGBoost), or check the model's "
        "output on those rows."
    )


def check_missing_for_model(X: Any, model: Any, name: str = "X") -> None:
    """Before a model is explained on ``X``: where ``X`` holds NaN or inf, evaluate ``model`` on
    just those rows and raise one ``ValueError`` when it raises or returns NaN or inf there.

    Missing values go to the model, as shap gives them (XGBoost and scikit-learn's
    HistGradientBoosting handle them); a model that cannot handle them is named here, before
    its compiled program runs (where a NumPy model's exception would be logged by JAX's callback
    first). No-op for traced or not fully addressable rows, and rows without NaN or inf.

    Args:
      X: the validated rows ``[n, M]``.
      model: a callable on NumPy rows ``[r, M]`` (the user's model, or a JAX model's function).
      name: the rows' argument name.
    """
    if is_traced(X) or (isinstance(X, jax.Array) and not X.is_fully_addressable):
        return
    on_cpu = not isinstance(X, jax.Array) or all(d.platform == "cpu" for d in X.devices())
    if not on_cpu and bool(_all_finite(X)):
        return  # checked where the rows lie: nothing copied to the host
    rows_np = np.asarray(X)
    finite = np.isfinite(rows_np).all(axis=1)
    if finite.all():
        return
    rows = np.flatnonzero(~finite)
    try:
        outputs = np.asarray(model(rows_np[rows]))
        problem = None if np.isfinite(outputs).all() else "returned NaN or inf"
    except Exception as err:  # the model's own complaint, quoted below
        text = str(err).strip().splitlines()
        problem = f"raised {type(err).__name__}" + (f" ({text[0]})" if text else "")
    if problem is None:
        return
    first = np.argwhere(~np.isfinite(rows_np[rows]))[0]
    shown = ", ".join(str(int(r)) for r in rows[:10]) + (", ..." if rows.size > 10 else "")
    raise ValueError(
        f"`{name}` holds NaN or inf in {rows.size} row(s) (rows {shown}; first at index ({int(rows[first[0]])}, "
        f"{int(first[1])})) and the model {problem} on them. Impute the missing values of `{name}` or drop those "
        "rows, or use a model that handles them (such as XGBoost or scikit-learn's HistGradientBoosting)."
    ) from None


def check_finite(x: jax.Array, name: str) -> None:
    """Raise a ``ValueError`` when a concrete ``x`` holds NaN or inf (no-op for traced arrays)."""
    if is_traced(x):
        return
    finite = np.isfinite(np.asarray(x))
    if not finite.all():
        bad = np.argwhere(~finite)[0]
        raise ValueError(
            f"`{name}` contains NaN or inf (first at index {tuple(int(i) for i in bad)}); "
            "impute or drop those values before explaining."
        )


def check_finite_outputs(
    values: Any,
    what: str = "`model`",
    *,
    row_ids: Any = None,
    unit: str = "row",
    source: str = "",
    hint: str = "fix the model or drop those rows; attributions of NaN or inf are meaningless.",
    limit: int = 5,
) -> None:
    """Raise a ``ValueError`` when concrete ``values`` hold NaN or inf, naming the first bad rows.

    A NaN or inf from the model would otherwise flow silently into averages, ratios and
    comparisons (a NaN denominator compares false, and a statistic becomes 0). No-op for traced
    arrays.

    Args:
      values: outputs with one row per leading index (``[n]`` or ``[n, ...]``), or, as a boolean
        array, a flag per row that says whether that row's outputs are finite (so a compiled
        program can return ``isfinite(...).all(-1)`` instead of the outputs).
      what: who produced them, for the message (for example ``"`model`"``).
      row_ids: the ids to report for the rows (for example their positions in the user's
        data before subsampling); default ``0 .. n - 1``.
      unit: what a row is called in the message (``"row"``, ``"grid point"``).
      source: where the rows come from, appended to the ids (for example ``" of `X`"``).
      hint: what to do, appended to the message.
      limit: at most this many ids are listed.

    Raises:
      ValueError: ``"<what> returned NaN or inf at <unit>(s) [i, j, ...]<source> (k of n). <hint>"``.
    """
    if is_traced(values):
        return
    v = np.asarray(values)
    if v.ndim == 0:
        v = v[None]
    if v.size == 0:
        return
    if v.dtype == np.bool_:
        bad = ~v.reshape(v.shape[0], -1).all(axis=1)
    elif np.issubdtype(v.dtype, np.inexact):
        bad = ~np.isfinite(v.reshape(v.shape[0], -1)).all(axis=1)
    else:
        return
    if not bad.any():
        return
    idx = np.flatnonzero(bad)
    ids = idx if row_ids is None else np.asarray(row_ids)[idx]
    shown = ", ".join(str(int(i)) for i in ids[:limit]) + (", ..." if idx.size > limit else "")
    raise ValueError(
        f"{what} returned NaN or inf at {unit}(s) [{shown}]{source} ({idx.size} of {bad.size}); {hint}"
    )


def check_n_features(x: jax.Array, n_features: int, name: str, reference: str) -> None:
    """Raise a ``ValueError`` when ``x`` has a different number of columns than expected."""
    if x.shape[1] != n_features:
        raise ValueError(
            f"`{name}` has {x.shape[1]} features but {reference} has {n_features}; "
            f"pass rows with the same {n_features} columns, in the same order."
        )


def resolve_feature_names(
    names: Sequence[str] | None, n_features: int, *candidates: list[str] | None
) -> tuple[str, ...]:
    """Pick explicit names, else the first DataFrame's columns, else ``Feature 0`` ... ``Feature M-1``."""
    for option in (names, *candidates):
        if option is not None:
            option = [str(n) for n in option]
            if len(option) != n_features:
                raise ValueError(
                    f"`feature_names` has {len(option)} names but the data has {n_features} features."
                )
            return tuple(option)
    return tuple(f"Feature {j}" for j in range(n_features))


def _direct_bits(seed: int) -> np.ndarray | None:
    """The bits of ``jax.random.key(seed)`` where they are known without a device call: for the
    default threefry implementation a seed in ``[0, 2**31)`` has the bits ``[0, seed]``."""
    if jax.config.jax_default_prng_impl == "threefry2x32" and 0 <= seed < 2**31:
        return np.array([0, seed], np.uint32)
    return None


def seed_key(seed: int) -> jax.Array:
    """``jax.random.key(seed)`` without compiling threefry's seeding program (about 0.1 s of a
    cold process): where :func:`_direct_bits` knows the key's bits, they are wrapped directly."""
    bits = _direct_bits(seed)
    return jax.random.key(seed) if bits is None else jax.random.wrap_key_data(bits)


def key_bits(key: jax.Array) -> jax.Array:
    """The raw ``uint32`` bits of a PRNG key (typed, or legacy ``uint32[2]``), concrete or traced."""
    return jax.random.key_data(key) if jnp.issubdtype(key.dtype, jax.dtypes.prng_key) else key


def as_key(key: Any) -> jax.Array:
    """Return a PRNG key: ``None`` means the fixed default ``jax.random.key(0)``; an int seeds one.

    Raises:
      ValueError: for an int seed outside what ``jax.random.key`` takes, ``[-2**63, 2**63)``.
      TypeError: for anything that is not a JAX key (``jax.random.key``, or a legacy
        ``jax.random.PRNGKey`` of shape ``[2]`` and dtype uint32), an int or ``None``.
    """
    if key is None:
        return seed_key(0)
    if is_integer(key):
        # exactly the seeds jax.random.key takes (it keeps their low 32 bits without x64)
        return seed_key(integer(key, "key", least=-(2**63), most=2**63 - 1, rule=(
            "a JAX PRNG key such as jax.random.key(0), or an int seed in [-2**63, 2**63)")))
    dtype = getattr(key, "dtype", None)
    if dtype is not None and isinstance(key, (jax.Array, np.ndarray)):
        if jnp.issubdtype(dtype, jax.dtypes.prng_key) and np.ndim(key) == 0:
            return key
        if dtype == np.uint32 and np.shape(key) == (2,):
            return jnp.asarray(key)
    raise TypeError(
        f"`key` must be a JAX PRNG key such as jax.random.key(0), or an int seed; got {type(key).__name__}"
        f"{'' if dtype is None else f' of dtype {dtype} and shape {tuple(np.shape(key))}'}."
    )


def host_key_bits(key: Any) -> np.ndarray:
    """The ``uint32`` bits of :func:`as_key`'s key for ``key``, on the host (for a NumPy generator
    seeded by them). ``None`` and an int seed that :func:`_direct_bits` knows cost no device call
    (a key made on an accelerator and read back is two); anything else goes through
    :func:`as_key`, which checks it."""
    seed = 0 if key is None else key
    if is_integer(seed):
        bits = _direct_bits(int(seed))
        if bits is not None:
            return bits
    return np.asarray(key_bits(as_key(key)), np.uint32)


def check_walks(n_permutations: Any, minimum: int) -> int:
    """Validate ``n_permutations``, a number of antithetic walks: an even integer of at least ``minimum``.

    Raises:
      ValueError: naming ``n_permutations`` and the rule.
    """
    rule = (f"an even integer of at least {minimum} (each antithetic pair is a permutation and its "
            "reverse)")
    return integer(n_permutations, "n_permutations", least=minimum, multiple_of=2, rule=rule)


def default_output_names(n_outputs: int) -> tuple[str, ...]:
    """The names of a multi-output model's ``K`` outputs, the one place they are made:
    ``Output 0`` ... ``Output K-1``."""
    return tuple(f"Output {k}" for k in range(int(n_outputs)))
