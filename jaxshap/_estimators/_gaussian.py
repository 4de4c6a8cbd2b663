r"""Gaussian conditioning algebra shared by ``LinearExplainer`` and ``maskers.Gaussian``, and the
correlation-dependent Shapley transform of a linear model built on it.

For :math:`X \sim \mathcal N(\mu, \Sigma)` and a coalition :math:`S` (the observed features),

.. math::

    X_{\bar S} \mid X_S = x_S \;\sim\; \mathcal N\bigl(
        \mu_{\bar S} + \Sigma_{\bar S S} \Sigma_{SS}^{-1} (x_S - \mu_S),\;
        \Sigma_{\bar S \bar S} - \Sigma_{\bar S S} \Sigma_{SS}^{-1} \Sigma_{S \bar S}\bigr).

Everything here works in *standardised* coordinates :math:`z = (x - \mu) / d` with
:math:`d = \sqrt{\operatorname{diag}\Sigma}`, on the correlation matrix :math:`C`, validated and
regularised by :mod:`jaxshap._estimators._covariance`. Coalitions are boolean masks and every array
keeps the full ``[M]`` / ``[M, M]`` shape (sub-blocks are expressed by masking or by a
permutation that puts the coalition first), so the functions ``vmap`` over coalitions and ``jit``
once per ``M``.

Two facts carry the cost (see DESIGN.md, "Notes on algorithms"):

* If :math:`L` is the Cholesky factor of :math:`C` with rows and columns in the order
  :math:`\pi`, its leading ``j``-by-``j`` block is the factor of the first ``j`` features, its
  trailing block is the factor of the Schur complement, and
  :math:`C_{\mathrm{rest},S} C_{SS}^{-1} = L_{\mathrm{rest},S} L_{SS}^{-1}`. One factorisation
  therefore gives the conditional regression of *every prefix* of :math:`\pi`:
  :math:`O(M^3)` per permutation. Factorising the *precision* in the reverse order yields
  :math:`L^{-\top}` directly (:func:`antithetic_linear_steps`), so no triangular inverse is needed.
* Putting a coalition first turns conditioning on an arbitrary mask into the prefix case.

Linear models. For :math:`f(x) = \beta x + b` and :math:`X \sim \mathcal N(\mu, \Sigma)`, the
observational value :math:`v_x(S) = E[f(X) \mid X_S = x_S]` is affine in :math:`x - \mu`, so the
Shapley values are a fixed linear map :math:`\phi(x) = T (x - \mu)` (Aas, Jullum & Loland, 2021,
"Explaining individual predictions when features are dependent"; the precompute follows the note
on shap's ``LinearExplainer``). ``T`` is built once, by exact enumeration of all ``2**M``
coalitions (:func:`exact_transform`) or by averaging antithetic permutations
(:func:`sampled_transform`); explaining rows is then one matrix product. These kernels work in
standardised units too: with :math:`z = (x - \mu)/d` and :math:`\tilde\beta = \beta \odot d`,
they return :math:`\tilde T` with :math:`\phi = \tilde T z`; :func:`to_data_units` turns it
into ``T``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy.linalg import cho_solve, solve_triangular

from .._coalitions._combinatorics import all_masks, exact_coefficients, sample_permutations
from .._core._chunking import map_chunks


# --- conditioning on one coalition -----------------------------------------------------------


def conditional_moments(corr: jax.Array, mask: jax.Array) -> tuple[jax.Array, jax.Array]:
    r"""Regression and Schur complement of one coalition, as full-size ``[M, M]`` matrices.

    With ``s`` the coalition as 0/1 and :math:`\tilde C = \mathrm{diag}(s) C \mathrm{diag}(s) +
    \mathrm{diag}(1 - s)` (block-diagonal: :math:`C_{SS}` and an identity), returns

    * ``G`` with :math:`G_{\bar S S} = C_{\bar S S} C_{SS}^{-1}` and zeros elsewhere, so
      :math:`E[z \mid z_S] = s \odot z + G z` (observed features kept, the others regressed);
    * ``K`` with :math:`K_{\bar S \bar S} = C_{\bar S \bar S} - C_{\bar S S} C_{SS}^{-1} C_{S \bar S}`
      and zeros elsewhere, the conditional covariance.

    Args:
      corr: ``[M, M]`` symmetric positive-definite correlation matrix.
      mask: ``[M]`` boolean coalition (``True`` = observed).
    """
    s = mask.astype(corr.dtype)
    out = 1.0 - s
    blocked = s[:, None] * corr * s[None, :] + jnp.diag(out)
    factor = jnp.linalg.cholesky(blocked)
    cross = s[:, None] * corr * out[None, :]  # C_{S, Sbar}, zero elsewhere
    solved = cho_solve((factor, True), cross)  # C_SS^{-1} C_{S, Sbar}, zero elsewhere
    regression = solved.T
    schur = out[:, None] * corr * out[None, :] - cross.T @ solved
    return regression, schur


def coalition_first(mask: jax.Array) -> jax.Array:
    """The stable ordering that lists the coalition's features first: ``[M]`` int."""
    return jnp.argsort(jnp.where(mask, 0, 1), stable=True)


def permuted_cholesky(corr: jax.Array, order: jax.Array) -> jax.Array:
    """Lower Cholesky factor of ``corr`` with rows and columns taken in ``order``."""
    return jnp.linalg.cholesky(corr[order][:, order])


def coalition_factor(corr: jax.Array, mask: jax.Array, z: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    r"""The coalition-first Cholesky factor and the whitened observed values of one coalition.

    With the coalition put first (:func:`coalition_first`), :math:`L = \begin{pmatrix} L_{SS} &
    0 \\ L_{\bar S S} & L_{\bar S \bar S}\end{pmatrix}` is the Cholesky factor of the
    permuted ``corr`` and :math:`w_S = L_{SS}^{-1} z_S` (forward substitution: the first
    :math:`|S|` entries only read the first :math:`|S|` right-hand sides). Both the conditional
    draws (:func:`conditional_draws`) and the marginal density of :math:`z_S`
    (:func:`marginal_log_density`) follow from them.

    Args:
      corr: ``[M, M]`` positive-definite correlation matrix.
      mask: ``[M]`` boolean coalition.
      z: ``[M]`` standardised row (only ``z_S`` is read).

    Returns:
      ``(order, factor, first, w)``: the ordering ``[M]``, ``L`` ``[M, M]`` (in that order),
      ``first`` ``[M]`` (``True`` on the leading :math:`|S|` positions) and ``w`` ``[M]``
      (:math:`w_S` on those positions, zeros after).
    """
    m = corr.shape[0]
    order = coalition_first(mask)
    factor = permuted_cholesky(corr, order)
    first = jnp.arange(m) < mask.sum()
    w = solve_triangular(factor, jnp.where(first, z[order], 0.0), lower=True)
    return order, factor, first, jnp.where(first, w, 0.0)


def marginal_log_density(factor: jax.Array, first: jax.Array, w: jax.Array) -> jax.Array:
    r""":math:`\log \mathcal N(z_S;\, 0, C_{SS})` from :func:`coalition_factor`'s outputs.

    .. math::

        \log \mathcal N(z_S; 0, C_{SS}) = -\tfrac12 \lVert w_S \rVert^2
            - \sum_{r < |S|} \log L_{rr} - \tfrac{|S|}{2} \log 2\pi,

    since :math:`z_S^\top C_{SS}^{-1} z_S = \lVert L_{SS}^{-1} z_S \rVert^2` and
    :math:`\log\det C_{SS} = 2 \sum_{r<|S|} \log L_{rr}`. The empty coalition gives 0.
    """
    diag = jnp.where(first, jnp.diagonal(factor), 1.0)
    size = first.sum().astype(factor.dtype)
    return -0.5 * (w**2).sum() - jnp.log(diag).sum() - 0.5 * size * jnp.log(2.0 * jnp.pi)


def conditional_draws(corr: jax.Array, mask: jax.Array, z: jax.Array, noise: jax.Array) -> jax.Array:
    r"""Draws of :math:`z \mid z_S` through the coalition-first Cholesky factor.

    With :func:`coalition_factor`'s :math:`L` and :math:`w_S = L_{SS}^{-1} z_S`, every draw is
    :math:`L w` with :math:`w_{\bar S} = \varepsilon_{\bar S}`: its :math:`\bar S` part is the
    conditional mean :math:`L_{\bar S S} L_{SS}^{-1} z_S` plus :math:`L_{\bar S \bar S}
    \varepsilon`, whose covariance is the Schur complement. The noise is indexed by the original
    feature, so the same draws serve every coalition and row (common random numbers).

    Args:
      corr: ``[M, M]`` positive-definite correlation matrix.
      mask: ``[M]`` boolean coalition.
      z: ``[M]`` standardised row (only ``z_S`` is read).
      noise: ``[N, M]`` standard-normal draws.

    Returns:
      ``[N, M]`` draws; the coalition's entries reproduce ``z_S`` up to rounding.
    """
    return conditional_draws_rows(corr, mask, z[None, :], noise)


def conditional_draws_rows(corr: jax.Array, mask: jax.Array, z: jax.Array, noise: jax.Array) -> jax.Array:
    r"""Draws of :math:`z \mid z_S` for rows that differ in their given values: ``[N, M]``.

    :func:`conditional_draws` with one coalition-first factorisation shared by ``N`` rows: draw
    ``n`` is :math:`L w_n` with :math:`w_{n,S} = L_{SS}^{-1} z_{n,S}` and
    :math:`w_{n,\bar S} = \varepsilon_{n,\bar S}`.

    Args:
      corr: ``[M, M]`` positive-definite correlation matrix.
      mask: ``[M]`` boolean coalition (the given features).
      z: ``[N, M]`` standardised rows (only their ``S`` entries are read), or ``[1, M]`` for one
        row shared by every draw.
      noise: ``[N, M]`` standard-normal draws.
    """
    order, factor, first, _ = coalition_factor(corr, mask, z[0])
    # Forward substitution: the first |S| entries only read the first |S| right-hand sides.
    w_s = solve_triangular(factor, jnp.where(first[None, :], z[:, order], 0.0).T, lower=True).T
    w = jnp.where(first[None, :], w_s, noise[:, order])
    draws = w @ factor.T
    return draws[:, jnp.argsort(order)]


# --- every prefix of a permutation at once -----------------------------------------------------


def precision_matrix(corr: jax.Array) -> jax.Array:
    """``C^{-1}`` through the Cholesky factor of ``C`` (symmetric positive definite)."""
    factor = jnp.linalg.cholesky(corr)
    return cho_solve((factor, True), jnp.eye(corr.shape[0], dtype=corr.dtype))


def antithetic_linear_steps(
    precision: jax.Array, beta: jax.Array, cov_beta: jax.Array, order: jax.Array, rotations: tuple[int, ...] = (0,)
) -> jax.Array:
    r"""Marginal contributions of a linear model along antithetic walks, :math:`O(M^3)` per walk.

    For :math:`S` the features before feature ``i`` in a walk, the coefficients of
    :math:`\beta E[z \mid z_S]` on ``z`` are :math:`C_{SS}^{-1} g_S` with :math:`g = C\beta^\top`,
    and ``i``'s contribution is the change when ``i`` joins: its *innovation* (its residual given
    :math:`z_S`, scaled to unit variance) times the covariance of that innovation with the
    prediction.

    Let :math:`R` be the lower Cholesky factor of the precision :math:`\Lambda = C^{-1}` with rows and
    columns in the order :math:`\rho` (:math:`R R^\top = \Lambda_\rho`). Its leading blocks factor
    the precision of trailing sets, so :math:`R^\top` is the inverse of the covariance's Cholesky
    factor in the *reverse* order, and :math:`(R^\top z_\rho)_r` is the unit-variance innovation
    of feature :math:`\rho_r` given the features after it in :math:`\rho`. For the walk that
    visits :math:`\rho` backwards, feature :math:`\rho_r` therefore contributes
    :math:`h_r R_{c r}` to the coefficient of :math:`z_{\rho_c}`, with
    :math:`h = R^\top g_\rho` (the innovations' covariances with the prediction; equivalently
    :math:`R h = \beta_\rho`). The contributions telescope to :math:`R R^\top g_\rho = \beta_\rho`;
    the rounding left over (of order :math:`\epsilon\,\kappa(C)`) is given to the feature that
    joins last, whose contribution is defined by that telescoping, so efficiency holds to
    rounding in :math:`\beta` even for an ill-conditioned ``C``. One factorisation gives every
    prefix regression of a walk, with no triangular inverse and no triangular solve (both slow
    on a CPU).

    The walk that visits :math:`\rho` forwards uses :math:`J \Lambda_\rho J` (``J`` the reversal),
    and the walks along :math:`\rho` rotated by ``k`` places use the gathered matrix rolled by
    ``k`` rows and columns: flips and rolls are copies, so every walk of the group shares one
    gather of the precision matrix and one gather back to the original coordinates (a general
    gather is much dearer than a flip or a roll). Each walk is a uniform permutation when
    ``order`` is; rotating by ``M // 2`` also spreads every feature over four positions, a
    stratification of the walks.

    Args:
      precision: ``C^{-1}`` (:func:`precision_matrix`), ``[M, M]``.
      beta: ``[K, M]`` standardised coefficients (original feature order).
      cov_beta: ``g = C beta^T``, ``[M, K]``.
      order: ``[M]`` permutation ``rho``.
      rotations: static rotations of ``rho``; each gives a walk backwards and one forwards.

    Returns:
      ``[K, M, M]``, the sum over the ``2 * len(rotations)`` walks: entry ``[k, m, i]`` is the
      coefficient of ``z_m`` in feature ``i``'s contribution (note the order: features on the
      last axis). Summed over ``i`` it gives ``2 * len(rotations) * beta``.
    """
    gathered = precision[order][:, order]
    beta_rho = beta[:, order]  # [K, M]
    g_rho = cov_beta[order].T  # [K, M]

    def walk(matrix, g, b):
        factor = jnp.linalg.cholesky(matrix)
        steps = factor[None, :, :] * (g @ factor)[:, None, :]  # [K, c, r]: h_r R_{cr}, h = R^T g
        # Position 0 joins last: its contribution closes the telescoping sum to beta exactly.
        return steps.at[:, :, 0].add(b - steps.sum(-1))

    total = jnp.zeros(beta.shape[:1] + gathered.shape, gathered.dtype)
    for k in rotations:
        x, g, b = jnp.roll(gathered, -k, (0, 1)), jnp.roll(g_rho, -k, 1), jnp.roll(beta_rho, -k, 1)
        pair = walk(x, g, b) + walk(x[::-1, ::-1], g[:, ::-1], b[:, ::-1])[:, ::-1, ::-1]
        total = total + jnp.roll(pair, k, (1, 2))
    back = jnp.argsort(order)
    return total[:, back][:, :, back]


EXACT_CHUNK = 4096
"""Coalitions per vectorised batch in :func:`exact_transform`."""


def coalition_linear_weights(corr: jax.Array, g: jax.Array, mask: jax.Array) -> jax.Array:
    r"""``w_S`` with :math:`\beta E[z \mid z_S] = w_S \cdot z`, i.e. :math:`C_{SS}^{-1} g_S` padded with zeros.

    Uses :math:`\beta_S + C_{SS}^{-1} C_{SR}\beta_R = C_{SS}^{-1} (C\beta^\top)_S`, solved with the
    block-diagonal :math:`\mathrm{diag}(s) C \mathrm{diag}(s) + \mathrm{diag}(1 - s)` (static shapes).

    Args:
      corr: ``[M, M]`` correlation matrix.
      g: ``C beta^T``, ``[M, K]``.
      mask: ``[M]`` boolean coalition.

    Returns:
      ``[K, M]``, zero outside the coalition.
    """
    s = mask.astype(corr.dtype)
    blocked = s[:, None] * corr * s[None, :] + jnp.diag(1.0 - s)
    factor = jnp.linalg.cholesky(blocked)
    return cho_solve((factor, True), s[:, None] * g).T


def exact_transform(corr: jax.Array, beta: jax.Array) -> jax.Array:
    r"""The exact transform by enumerating every coalition.

    .. math::

        \tilde T_{k,j,:} = \sum_{S \not\ni j} \frac{|S|!\,(M - |S| - 1)!}{M!}
            \bigl(w_{S \cup j} - w_S\bigr)_{k}

    (Shapley, 1953), evaluated as one contraction of the Shapley coefficient matrix with the
    ``[2**M, K, M]`` coalition weights. Costs ``2**M`` Cholesky factorisations of size ``M``.

    Args:
      corr: ``[M, M]`` correlation matrix.
      beta: ``[K, M]`` standardised coefficients.

    Returns:
      ``[K, M, M]``.
    """
    m = corr.shape[0]
    masks = all_masks(m)
    g = corr @ beta.T
    weights = map_chunks(
        jax.vmap(lambda s: coalition_linear_weights(corr, g, s)), masks, min(EXACT_CHUNK, masks.shape[0])
    )  # [C, K, M]
    coef = exact_coefficients(masks, dtype=corr.dtype)  # [M, C]
    return jnp.einsum("jc,ckm->kjm", coef, weights)


def sampled_transform(
    key: jax.Array,
    corr: jax.Array,
    beta: jax.Array,
    n_permutations: int,
    chunk: int | None = None,
    precision: jax.Array | None = None,
) -> jax.Array:
    r"""The transform averaged over ``n_permutations`` antithetic walks.

    Walks come in groups of four from one uniform permutation :math:`\rho`: :math:`\rho`
    backwards and forwards, and :math:`\rho` rotated by ``M // 2`` backwards and forwards (a
    budget that is 2 modulo 4 ends with one plain pair). Every walk is marginally a uniform
    permutation, so the average is unbiased for :math:`\tilde T`; the rotation stratifies the
    positions of each feature (see :func:`jaxshap._estimators._gaussian.antithetic_linear_steps`, which
    computes a group with one gather and one Cholesky factorisation per walk). Each walk's
    contributions telescope to :math:`\tilde\beta`, so efficiency is exact. ``chunk`` groups run
    per vectorised step of a scan, which bounds the memory to ``chunk * K * M**2`` numbers.

    Args:
      key: PRNG key.
      corr: ``[M, M]`` correlation matrix.
      beta: ``[K, M]`` standardised coefficients.
      n_permutations: number of walks, even and at least 2 (static).
      chunk: groups per vectorised step (static). By default 1 on a CPU (one group at a time,
        without a batch axis) and 2 on accelerators.
      precision: ``C^{-1}`` if already known (computed in float64 on the host, it keeps the
        walks accurate for condition numbers near ``1 / eps`` of the working dtype, where an
        inverse in that dtype loses every digit); by default :func:`precision_matrix` of ``corr``.

    Returns:
      ``[K, M, M]``.
    """
    m = corr.shape[0]
    n_groups, n_pairs = divmod(n_permutations // 2, 2)
    orders = sample_permutations(key, m, n_groups + n_pairs)  # [G (+1), M]
    precision = precision_matrix(corr) if precision is None else precision.astype(corr.dtype)
    cov_beta = corr @ beta.T
    total = jnp.zeros((beta.shape[0], m, m), corr.dtype)
    if n_groups:
        if chunk is None:
            chunk = 1 if jax.default_backend() == "cpu" else 2
        chunk = max(1, min(chunk, n_groups))
        rotations = (0, m // 2)
        group = lambda o: antithetic_linear_steps(precision, beta, cov_beta, o, rotations)
        if chunk == 1:  # no batch axis rather than a vmap of one
            total, _ = jax.lax.scan(lambda acc, o: (acc + group(o), None), total, orders[:n_groups])
        else:
            n_steps = -(-n_groups // chunk)
            pad = n_steps * chunk - n_groups
            weight = jnp.concatenate([jnp.ones(n_groups, corr.dtype), jnp.zeros(pad, corr.dtype)])
            groups = jnp.concatenate([orders[:n_groups], jnp.broadcast_to(orders[:1], (pad, m))], axis=0)

            def step(acc, args):
                o, w = args
                return acc + jnp.tensordot(w, jax.vmap(group)(o), axes=1), None

            total, _ = jax.lax.scan(step, total, (groups.reshape(n_steps, chunk, m), weight.reshape(n_steps, chunk)))
    if n_pairs:
        total = total + antithetic_linear_steps(precision, beta, cov_beta, orders[-1])
    # antithetic_linear_steps puts features on the last axis; the transform has them first.
    return jnp.swapaxes(total, 1, 2) / n_permutations


def to_data_units(transform: jax.Array, safe_scale: jax.Array) -> jax.Array:
    r"""``T = \tilde T \,\mathrm{diag}(1/d)``, so that :math:`\phi = T (x - \mu)`."""
    return transform / safe_scale[None, None, :]
