"""The KernelSHAP sampler protocol: how a design shares its sampled pairs among coalition sizes.

A KernelSHAP plan (:func:`jaxshap.coalitions.kernel_plan`) enumerates the outermost layers
``{s, M - s}`` that its budget covers and samples complementary pairs from the others; every
sampled coalition carries its Horvitz-Thompson weight, so each design estimates the same
kernel-weighted sums without bias and differs only in its variance. A :class:`Sampler` says
what differs between designs:

* :meth:`Sampler.size_mass`: the mass of one coalition size; the sampled pairs are shared among
  the sampled layers in proportion to it (each layer keeps at least one pair);
* :meth:`Sampler.enumeration_mass`: the mass that decides which layers are enumerated (a layer is
  enumerated while its share of the remaining budget covers it); by default the same;
* ``name``: the string that selects the design (``sampler="paired"``).

A subclass that sets ``name`` is registered when it is defined, so ``sampler="its name"`` and
``sampler=TheClass()`` both select it. Samplers are frozen dataclasses: plans are cached per
sampler and samplers are static configuration of compiled programs, so they must be hashable,
immutable and equal by value.
"""

from __future__ import annotations

import abc
import dataclasses

from ..._core._registry import Registered


@dataclasses.dataclass(frozen=True)
class Sampler(Registered, abc.ABC, family=("KernelSHAP sampler", "sampler", "jaxshap.coalitions.Sampler")):
    """A KernelSHAP design: the mass of each coalition size (see the module docstring).

    Subclass it with ``@dataclasses.dataclass(frozen=True)`` (when it has parameters, each with a
    default: a name selects the class's default instance), give it a ``name`` and define
    :meth:`size_mass`; it is then selected by that name or by an instance. A subclass without a
    ``name`` of its own is not registered (a base for other designs, or an instance-only one).
    """

    @abc.abstractmethod
    def size_mass(self, n_features: int, size: int) -> float:
        """The mass of coalition size ``s`` (``0 < s < M``; positive, in any unit): a sampled layer
        ``{s, M - s}`` receives pairs in proportion to the mass of its sizes."""

    def enumeration_mass(self, n_features: int, size: int) -> float:
        """The mass of size ``s`` when deciding which layers to enumerate (:meth:`size_mass` by default)."""
        return self.size_mass(n_features, size)
