"""The demo: train an MLP on the shipped diabetes data with optax and explain it exactly.

Run with ``python -m jaxshap`` (or ``jaxshap-demo``). Prints held-out accuracy, a table of the
largest attributions per row with the efficiency check, the mean absolute attributions, and
saves a beeswarm plot when the ``plots`` extra (shap, matplotlib) is installed.
"""

from __future__ import annotations

import argparse
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

from ._explainers._exact import ExactExplainer
from .datasets import load_diabetes


def init_mlp(key: jax.Array, sizes: list[int]) -> list[tuple[jax.Array, jax.Array]]:
    """Glorot-scaled weights and zero biases for a tanh MLP with the given layer sizes."""
    keys = jax.random.split(key, len(sizes) - 1)
    return [
        (jax.random.normal(k, (a, b)) * jnp.sqrt(2.0 / (a + b)), jnp.zeros(b))
        for k, a, b in zip(keys, sizes[:-1], sizes[1:])
    ]


def mlp(params, x):
    for w, b in params[:-1]:
        x = jnp.tanh(x @ w + b)
    w, b = params[-1]
    return (x @ w + b)[..., 0]


def train(params, X, y, steps: int, learning_rate: float = 3e-3, weight_decay: float = 0.1):
    """Full-batch AdamW on mean squared error, the whole loop compiled as one scan."""
    optimiser = optax.adamw(learning_rate, weight_decay=weight_decay)

    def loss(p):
        return jnp.mean((mlp(p, X) - y) ** 2)

    def step(carry, _):
        p, state = carry
        value, grads = jax.value_and_grad(loss)(p)
        updates, state = optimiser.update(grads, state, p)
        return (optax.apply_updates(p, updates), state), value

    (params, _), losses = jax.jit(lambda p: jax.lax.scan(step, (p, optimiser.init(p)), None, length=steps))(params)
    return params, losses


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jaxshap", description=__doc__)
    parser.add_argument("--steps", type=int, default=250, help="training steps (default 250; more overfits 342 rows)")
    parser.add_argument("--rows", type=int, default=100, help="held-out rows to explain (default 100)")
    parser.add_argument("--show", type=int, default=8, help="rows printed in the table (default 8)")
    parser.add_argument("--plot", default="jaxshap_beeswarm.png", help="where to save the beeswarm ('' for none)")
    args = parser.parse_args(argv)

    X, y, names = load_diabetes()
    rng = np.random.default_rng(0)
    order = rng.permutation(len(X))
    test, tr = order[: args.rows], order[args.rows :]
    mu, sd = X[tr].mean(0), X[tr].std(0)
    y_mu, y_sd = y[tr].mean(), y[tr].std()

    print(f"jaxshap demo: diabetes progression, {len(X)} patients, {X.shape[1]} features ({', '.join(names)})")
    t0 = time.perf_counter()
    params = init_mlp(jax.random.key(0), [X.shape[1], 16, 1])
    Xs = jnp.asarray((X[tr] - mu) / sd, jnp.float32)
    params, losses = train(params, Xs, jnp.asarray((y[tr] - y_mu) / y_sd, jnp.float32), args.steps)
    jax.block_until_ready(params)

    def model(Z):
        """The trained network on raw features, in disease-progression units."""
        return mlp(params, (Z - mu.astype(np.float32)) / sd.astype(np.float32)) * y_sd + y_mu

    pred = np.asarray(model(jnp.asarray(X[test], jnp.float32)))
    r2 = 1 - np.mean((pred - y[test]) ** 2) / np.var(y[test])
    print(f"MLP 10-16-1 trained with optax AdamW: {args.steps} steps in {time.perf_counter() - t0:.1f} s; "
          f"held-out R^2 = {r2:.3f} on {len(test)} rows")

    background = X[tr][rng.choice(len(tr), 100, replace=False)]
    explainer = ExactExplainer(model, background, feature_names=names)
    X_test = X[test].astype(np.float32)
    t0 = time.perf_counter()
    expl = jax.block_until_ready(explainer(X_test))
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    expl = jax.block_until_ready(explainer(X_test))
    warm = time.perf_counter() - t0
    n_evals = len(test) * 2 ** X.shape[1] * len(background)
    print(f"ExactExplainer: {len(test)} rows x {2 ** X.shape[1]} coalitions x {len(background)} background rows "
          f"= {n_evals:,} model evaluations in {warm:.2f} s warm ({first:.2f} s with compilation)\n")

    values, base = np.asarray(expl.values), np.asarray(expl.base_values)
    efficiency = np.abs(values.sum(1) + base - pred)
    print(f"{'row':>3}  {'f(x)':>7}  {'E[f]':>7}  largest attributions (feature=value: SHAP)")
    for i in range(min(args.show, len(test))):
        top = np.argsort(-np.abs(values[i]))[:3]
        cells = "  ".join(f"{names[j]}={X_test[i, j]:g}: {values[i, j]:+7.2f}" for j in top)
        print(f"{i:>3}  {pred[i]:7.1f}  {base[i]:7.1f}  {cells}")
    print(f"\nefficiency: max |sum(SHAP) + E[f] - f(x)| over {len(test)} rows = {efficiency.max():.2e} "
          f"(relative {efficiency.max() / np.abs(pred).max():.1e})")

    importance = np.abs(values).mean(0)
    print("\nmean |SHAP| over held-out rows:")
    for j in np.argsort(-importance):
        print(f"  {names[j]:>4}  {importance[j]:6.2f}  {'#' * int(round(40 * importance[j] / importance.max()))}")

    if args.plot:
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
            import shap
        except ImportError:
            print("\n(install the plots extra for a beeswarm plot: pip install 'jaxshap[plots]')")
            return 0
        shap.plots.beeswarm(expl.to_shap(), show=False)
        plt.gcf().savefig(args.plot, dpi=120, bbox_inches="tight")
        plt.close("all")
        print(f"\nbeeswarm plot saved to {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
