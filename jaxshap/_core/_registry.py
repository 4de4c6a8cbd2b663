"""Strategy classes selected by name: the one registry behind ``sampler=`` and ``prior=``.

A family of strategies (KernelSHAP samplers, priors on the control variates) is rooted in a class
that subclasses :class:`Registered` with ``family=(what, argument, public name)``. Every subclass
that sets its own ``name`` is registered under it when defined, so the caller's argument may be
that name (the class's default instance) or an instance. Strategies are frozen dataclasses: static,
hashable configuration of compiled programs.
"""

from __future__ import annotations

from typing import Any, ClassVar


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
