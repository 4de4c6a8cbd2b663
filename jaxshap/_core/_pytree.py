"""How jaxshap's objects are represented: as pytrees, as strategies chosen by name, as saved files.

Objects as pytrees: arrays are leaves, everything else is static configuration. An explainer (or
a model such as ``functools.partial(mlp, params)``) is split, in the spirit of equinox's
``filter``, into its *dynamic* part (every JAX or NumPy array it holds, the leaves that flow
through ``jax.jit`` and ``jax.grad``) and its *static* part (the tree structure and every other
value: functions, ints, strings), which becomes part of the compiled program's cache key. Two
objects whose static parts are equal and whose arrays have the same shapes share one compiled
program; arrays with different values never change the program. Static values compare by value
when they are hashable (ints, strings, tuples, functions by identity) and by identity otherwise,
so two distinct unhashable objects never share a program (a shared program for different
configurations would be a silent wrong answer).

Strategy classes selected by name (:class:`Registered`): the one registry behind ``sampler=``
and ``prior=``. A family of strategies (KernelSHAP samplers, priors on the control variates) is
rooted in a class that subclasses :class:`Registered` with ``family=(what, argument, public
name)``. Every subclass that sets its own ``name`` is registered under it when defined, so the
caller's argument may be that name (the class's default instance) or an instance. Strategies are
frozen dataclasses: static, hashable configuration of compiled programs.

The saved form of a trained object (:func:`write_saved`, :func:`read_saved`): one NumPy ``.npz``
file of arrays and a JSON ``config``. Trained networks (``AmortizedExplainer``, the learned
maskers) are saved as their arrays plus a JSON ``config`` entry naming the saved ``kind`` and
its ``format_version``; nothing is pickled, so loading runs no code from the file
(``np.load(..., allow_pickle=False)``). A network, a list of ``{"w", "b"}`` layers, is stored as
``{prefix}{i}_w`` and ``{prefix}{i}_b``.
"""

from __future__ import annotations

import functools
import json
from typing import Any, Callable, ClassVar

import jax
import jax.numpy as jnp
import numpy as np


def is_array_leaf(x: Any) -> bool:
    """True for the values that are dynamic leaves: JAX arrays (and tracers) and NumPy arrays."""
    return isinstance(x, (jax.Array, np.ndarray, np.generic)) and not isinstance(x, (str, bytes))


class Static:
    """A hashable wrapper of a static value: equal by value when hashable, else by identity."""

    __slots__ = ("value", "_hash", "_by_id")

    def __init__(self, value: Any):
        self.value = value
        try:
            self._hash, self._by_id = hash(value), False
        except TypeError:
            self._hash, self._by_id = id(value), True

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, Static):
            return NotImplemented
        a, b = self.value, other.value
        if a is b:
            return True
        if self._by_id or other._by_id or type(a) is not type(b) or self._hash != other._hash:
            return False
        try:
            return bool(a == b)
        except Exception:  # an __eq__ that returns arrays or raises: treat as different
            return False

    def __repr__(self) -> str:
        return f"Static({self.value!r})"


def split(obj: Any) -> tuple[tuple[Any, ...], tuple]:
    """Split ``obj`` into ``(dynamic leaves, static spec)``; :func:`merge` inverts it.

    A ``functools.partial`` (not a pytree in JAX) is opened: its function is static and its
    bound arguments are a pytree, so ``partial(mlp, params)`` exposes ``params`` as leaves.
    """
    func = None
    if type(obj) is functools.partial:
        func, obj = Static(obj.func), (obj.args, obj.keywords)
    leaves, treedef = jax.tree_util.tree_flatten(obj)
    dynamic = tuple(leaf for leaf in leaves if is_array_leaf(leaf))
    static = tuple(None if is_array_leaf(leaf) else Static(leaf) for leaf in leaves)
    return dynamic, (func, treedef, static)


def merge(dynamic: Any, spec: tuple) -> Any:
    """Rebuild the object that :func:`split` took apart, with (possibly traced) ``dynamic`` leaves."""
    func, treedef, static = spec
    it = iter(dynamic)
    obj = jax.tree_util.tree_unflatten(treedef, [next(it) if s is None else s.value for s in static])
    if func is not None:
        args, keywords = obj
        return functools.partial(func.value, *args, **keywords)
    return obj


def avals(dynamic: Any) -> tuple:
    """Shapes and dtypes of dynamic leaves (hashable; works for tracers too)."""
    return tuple((tuple(np.shape(a)), np.dtype(a.dtype).str) for a in dynamic)


def register_fields(cls: type, skip: Callable[[str], bool] = lambda name: name.endswith("_")) -> type:
    """Register ``cls`` as a pytree over its instance attributes.

    Every attribute is split with :func:`split`: its arrays become children and the rest (the
    configuration) the static auxiliary data. Attributes for which ``skip(name)`` is true (by
    default fitted results such as ``last_rounds_``) are left out of the tree.
    """

    def flatten(obj):
        children, aux = [], []
        for name in sorted(vars(obj)):
            if skip(name):
                continue
            dynamic, spec = split(vars(obj)[name])
            children.extend(dynamic)
            aux.append((name, spec, len(dynamic)))
        return children, tuple(aux)

    def unflatten(aux, children):
        obj = object.__new__(cls)
        i = 0
        for name, spec, count in aux:
            setattr(obj, name, merge(children[i : i + count], spec))
            i += count
        return obj

    jax.tree_util.register_pytree_node(cls, flatten, unflatten)
    return cls


class Registered:
    """Mixin of a family's root: registration by ``name``, :meth:`registered` and :meth:`resolve`.

    Example::

        @dataclasses.dataclass(frozen=True)
        class Sampler(Registered, abc.ABC, family=("KernelSHAP sampler", "sampler", "jaxshap.coalitions.Sampler")):
            ...
    """

    name: ClassVar[str] = ""
    _registry: ClassVar[dict[str, type]]
    _family: ClassVar[tuple[str, str, str]]

    def __init_subclass__(cls, *, family: tuple[str, str, str] | None = None, **kwargs: Any):
        super().__init_subclass__(**kwargs)
        if family is not None:  # a family's root: its own table, classes in the order defined
            cls._registry, cls._family = {}, family
            return
        name = cls.__dict__.get("name")
        if not name:  # a base for others, or an instance-only strategy
            return
        known = cls._registry.get(name)
        if known is not None and (known.__module__, known.__qualname__) != (cls.__module__, cls.__qualname__):
            raise ValueError(f"a {cls._family[0]} named {name!r} exists already ({known.__qualname__}).")
        cls._registry[name] = cls

    @classmethod
    def registered(cls) -> dict[str, Any]:
        """Every registered strategy of the family by name, each with its default parameters."""
        return {name: klass() for name, klass in cls._registry.items()}

    @classmethod
    def resolve(cls, choice: Any, *, others: tuple[str, ...] = ()) -> Any:
        """The strategy ``choice`` selects: an instance itself, a name its registered class.

        Raises:
          ValueError: naming the argument, for an unknown name or anything else (``others`` are
            names the caller accepts besides the registered ones, for the message).
        """
        if isinstance(choice, cls):
            return choice
        if isinstance(choice, str) and choice in cls._registry:
            return cls._registry[choice]()
        _, argument, public = cls._family
        names = ", ".join(repr(n) for n in (*cls._registry, *others))
        raise ValueError(f"`{argument}` must be one of {names} or a {public}; got {choice!r}.")


def write_saved(path: str, config: dict, arrays: dict[str, Any]) -> None:
    """Write ``arrays`` and the JSON-serialisable ``config`` to ``path``."""
    with open(path, "wb") as fh:
        np.savez(fh, config=np.array(json.dumps(config)), **{k: np.asarray(v) for k, v in arrays.items()})


def read_saved(path: str, kind: str, version: int) -> tuple[dict, dict[str, np.ndarray]]:
    """``(config, arrays)`` of a file written by :func:`write_saved` for a ``kind`` at ``version``.

    Raises:
      ValueError: when the file is not a saved ``kind`` (no ``config``, another ``kind``) or has
        another format version.
    """
    with np.load(path, allow_pickle=False) as files:
        if "config" not in files:
            raise ValueError(f"{path!r} is not a saved {kind} (no `config` entry).")
        config = json.loads(str(files["config"]))
        arrays = {k: files[k] for k in files.files if k != "config"}
    found = config.get("kind", kind)
    if found != kind:
        raise ValueError(f"{path!r} is not a saved {kind}: it holds a {found}; load it with {found}.load.")
    if config.get("format_version") != version:
        raise ValueError(f"{path!r} has format version {config.get('format_version')}; this jaxshap reads {version}.")
    return config, arrays


def network_arrays(params: list[dict], prefix: str = "layer") -> dict[str, Any]:
    """A network's layers as named arrays: ``{prefix}{i}_w`` and ``{prefix}{i}_b``."""
    arrays = {}
    for i, layer in enumerate(params):
        arrays[f"{prefix}{i}_w"], arrays[f"{prefix}{i}_b"] = layer["w"], layer["b"]
    return arrays


def network_from_arrays(arrays: dict[str, np.ndarray], n_layers: int, prefix: str = "layer") -> list[dict]:
    """The network :func:`network_arrays` saved, as JAX arrays."""
    return [
        {"w": jnp.asarray(arrays[f"{prefix}{i}_w"]), "b": jnp.asarray(arrays[f"{prefix}{i}_b"])} for i in range(n_layers)
    ]
