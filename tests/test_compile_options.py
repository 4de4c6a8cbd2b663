"""jaxshap's compile options (jaxshap._platform._compile_options)."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxshap._platform import _compile_options
from jaxshap._platform._compile_options import CPU_OPTIONS, compile_options, program


def test_compile_options_on_a_cpu_and_how_to_turn_them_off(monkeypatch):
    monkeypatch.delenv("JAXSHAP_XLA_DEFAULTS", raising=False)  # whatever the shell running the tests set
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    compile_options.cache_clear()
    try:
        if jax.default_backend() == "cpu":
            assert dict(compile_options()) == CPU_OPTIONS
        else:
            assert compile_options() == ()
        monkeypatch.setenv("JAXSHAP_XLA_DEFAULTS", "1")
        compile_options.cache_clear()
        assert compile_options() == ()
        monkeypatch.delenv("JAXSHAP_XLA_DEFAULTS")
        # the user's own choice in XLA_FLAGS wins
        monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_use_fusion_emitters=true")
        compile_options.cache_clear()
        assert compile_options() == ()
        monkeypatch.delenv("XLA_FLAGS")
        # an option this jaxlib does not know is dropped, not raised
        monkeypatch.setattr(_compile_options, "CPU_OPTIONS", {"xla_cpu_no_such_option_anywhere": True})
        compile_options.cache_clear()
        assert compile_options() == ()
    finally:
        monkeypatch.undo()
        compile_options.cache_clear()


def test_program_is_the_jitted_function_with_the_options(monkeypatch):
    made = []
    real_jit = jax.jit
    monkeypatch.setattr(_compile_options.jax, "jit", lambda fn, **kw: made.append(kw) or real_jit(fn, **kw))
    calls = []

    @program(static_argnames=("power",))
    def f(x, power):
        calls.append(power)
        return x**power

    x = jnp.arange(4.0)
    np.testing.assert_array_equal(np.asarray(f(x, power=3)), np.arange(4.0) ** 3)
    f(x + 1, power=3)
    assert calls == [3]  # traced once: one jitted function, cached
    assert f._cache_size() == 1 and f.__name__ == "f"
    mine = [kw for kw in made if "static_argnames" in kw]  # not compile_options' own probe
    assert len(mine) == 1 and mine[0]["static_argnames"] == ("power",)
    assert mine[0].get("compiler_options", {}) == dict(compile_options())


def test_program_inside_a_trace_is_part_of_the_callers_program():
    """JAX refuses compile options on a nested jit: inside jit, grad and vmap the program is a plain jit."""

    @program()
    def f(x):
        return jnp.sin(x) * 2.0

    x = jnp.linspace(0.0, 1.0, 5)
    np.testing.assert_allclose(np.asarray(jax.jit(f)(x)), 2 * np.sin(np.asarray(x)), rtol=1e-6)
    np.testing.assert_allclose(float(jax.grad(lambda t: f(t).sum())(x)[0]), 2.0, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(jax.vmap(f)(x[:, None]))[:, 0], 2 * np.sin(np.asarray(x)), rtol=1e-6)


def test_each_call_chooses_the_options_and_explainers_say_which(monkeypatch):
    made = []
    real_jit = jax.jit
    monkeypatch.setattr(_compile_options.jax, "jit", lambda fn, **kw: made.append(kw) or real_jit(fn, **kw))

    @program()
    def f(x):
        return x + 1.0

    x = jnp.zeros(3)
    f.call(False, x)
    f.call(True, x)
    tuned = [kw for kw in made if "compiler_options" in kw]
    assert len(tuned) == (1 if compile_options() else 0) and len(made) - len(tuned) >= 1
    # the coalition explainers ask for the options; TreeSHAP's kernels run slower with them
    import jaxshap
    from jaxshap._explainers._tree._kernels import TreeRows

    assert jaxshap.KernelExplainer.compile_tuned and jaxshap.ExactExplainer.compile_tuned
    assert jaxshap.PermutationExplainer.compile_tuned
    assert not TreeRows.compile_tuned


def test_program_under_a_trace_that_only_a_closure_carries():
    """A model closing over parameters under jax.grad: no argument is a tracer, the call is traced."""

    def loss(scale):
        @program()
        def f(x):
            return jnp.sin(x) * scale

        return f(jnp.ones(3)).sum()

    np.testing.assert_allclose(float(jax.grad(loss)(2.0)), 3 * np.sin(1.0), rtol=1e-6)
    np.testing.assert_allclose(float(jax.jit(loss)(2.0)), 6 * np.sin(1.0), rtol=1e-6)
