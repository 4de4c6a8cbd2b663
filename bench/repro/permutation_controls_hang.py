import sys, time, numpy as np, jax
sys.path.insert(0, "."); sys.path.insert(0, "tests")
from conftest import make_mlp
import jaxshap
params, apply = make_mlp(11, 6, hidden=12)
model = jax.jit(lambda X: apply(params, X))
rng = np.random.default_rng(11)
background = rng.normal(size=(12, 6)).astype(np.float32)
X = rng.normal(size=(8, 6)).astype(np.float32)
for w in map(int, sys.argv[1:]):
    t0 = time.perf_counter()
    e = jaxshap.PermutationExplainer(model, background, n_permutations=w)(X, key=jax.random.key(5))
    print(w, "done", time.perf_counter() - t0, float(e.stderr.mean()), flush=True)
