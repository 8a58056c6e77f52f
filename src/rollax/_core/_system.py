"""``AbstractSystem``: what every model in rollax is, and what every integrator consumes.

A system is an equinox module. Its parameters are the fields declared with
:func:`parameter` (on the system or on a module it holds): float64 arrays, traced (a new value
does not recompile), differentiable, and the only fields that may carry per-start values (a
leading axis beyond the declared ``shape``) in :func:`rollax.solve_ensemble` and
:func:`rollax.sweep`. Every other field is shared by all starts: static ones are the
system's structure. It provides

* the vector field ``vector_field(t, y, mode)``;
* a tuple of :class:`Event` descriptors (``events``) and their values
  ``event_values(t, y, mode)``, one per descriptor, in the same order;
* for hybrid systems: the discrete ``modes``, a ``reset`` map applied at a located event
  (new time, state, mode and bookkeeping, and whether the run ends), the per-trajectory
  bookkeeping ``aux`` (``n_aux`` numbers, started by ``initial_aux``);
* an ``outcome`` classification of a finished run (an enumeration of the system's own);
* optionally ``field_and_events``, the field and the event values in one call, so that an
  integrator that needs both at the same point lets XLA share their common subexpressions;
* optionally its own exact ``flow`` (a closed form, as the penny's (26)) and the step
  ``flow_step`` to take along it: both integrators then move the state along the flow instead
  of a Runge-Kutta step, with the same event samples, root finding and resets.

The same semantics hold on both integrators (:func:`rollax.solve` and
:func:`rollax.solve_ensemble`); :mod:`rollax._core.events` states them.
"""

from __future__ import annotations

import abc
import dataclasses
import enum
import inspect
import math
import typing
from typing import Any, ClassVar, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.core import Tracer
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from rollax._core._config import share_cpu_cache_keys
from rollax._core._solution import Status, code_names
from rollax._core._validate import _show
from rollax._core.events import BOUNDARY, CROSSING, EventSet

# (before any system's program is compiled: one cache key whatever the CPU device count)
share_cpu_cache_keys()


class EventKind(enum.IntEnum):
    """How an event function is read (:mod:`rollax._core.events`)."""

    BOUNDARY = BOUNDARY  # valid while g > 0; fires at the first g <= 0 (also at t0)
    CROSSING = CROSSING  # counts transversal sign changes; fires at the target-th


@dataclasses.dataclass(frozen=True)
class Event:
    """One event of a system: a name, its kind and, for crossings, a target and a direction.

    ``target``: the crossing that fires the event (1 = the first); 0 counts crossings and never
    fires. ``direction``: +1 counts only upward crossings (to ``g > 0``), -1 only downward
    ones, 0 both. A boundary has ``target = 1`` and no direction.
    """

    name: str
    kind: EventKind = EventKind.BOUNDARY
    target: int = 1
    direction: int = 0

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"event name = {self.name!r} must be a non-empty string")
        try:
            kind = (
                EventKind[self.kind.upper()] if isinstance(self.kind, str) else EventKind(self.kind)
            )
        except (KeyError, ValueError):
            raise ValueError(
                f"event kind = {self.kind!r} must be one of "
                f"{[k.name.lower() for k in EventKind]} or an EventKind"
            ) from None
        object.__setattr__(self, "kind", kind)
        if isinstance(self.target, bool) or not (
            isinstance(self.target, (int, np.integer)) and self.target >= 0
        ):
            raise ValueError(f"event target = {self.target!r} must be an integer >= 0")
        if isinstance(self.direction, bool) or self.direction not in (-1, 0, 1):
            raise ValueError(f"event direction = {self.direction!r} must be -1, 0 or 1")
        if kind == EventKind.BOUNDARY and (self.target != 1 or self.direction != 0):
            raise ValueError(
                f"boundary event {self.name!r} takes no target or direction "
                f"(got target = {self.target!r}, direction = {self.direction!r})"
            )


def boundary(name: str) -> Event:
    """A boundary event: the motion is valid while its function is > 0."""
    return Event(name, EventKind.BOUNDARY)


def crossing(name: str, target: int = 1, direction: int = 0) -> Event:
    """A crossing event that fires at its ``target``-th crossing (0: count only)."""
    return Event(name, EventKind.CROSSING, target, direction)


class AbstractSystem(eqx.Module):
    """A dynamical system with events, and optionally modes and a reset map.

    Subclasses set the class attributes ``state_names`` (one name per state component; its
    length is the state dimension), ``events`` (a tuple of :class:`Event`, or a property that
    derives them from static fields), and for hybrid systems ``modes``, ``n_aux`` and the
    methods ``reset``, ``initial_aux`` and ``initial_mode``. ``state_units``, ``time_units``,
    ``aux_names`` and ``aux_units`` (one per aux number) label a sweep's dataset. ``outcomes`` is the enumeration
    ``outcome`` returns. Methods: ``vector_field(t, y, mode)``, ``event_values(t, y, mode)``
    (one value per event: a boundary is valid while > 0, a crossing fires at its target-th
    sign change), ``reset(t, y, mode, aux, event) -> (t, y, mode, aux, terminal)``,
    ``outcome(solution)``; optionally ``field_and_events``, ``flow`` and ``flow_step``.

    Event times are differentiated by the implicit function theorem with the slope of the
    event function along the vector field, so within a mode the field must be smooth where an
    event fires: a field that jumps on an event's surface (a friction direction that flips
    exactly where a 'lock' event fires) gives right event times but wrong gradients. Make the
    jump a mode switch (a reset) instead.
    """

    state_names: ClassVar[tuple[str, ...]] = ()
    # the units of the state components and of time, for labelled results (rollax.sweep's
    # dataset); None: not stated ("unspecified" in the dataset)
    state_units: ClassVar[tuple[str, ...] | None] = None
    time_units: ClassVar[str] = "s"
    events: ClassVar[tuple[Event, ...]] = ()
    modes: ClassVar[tuple[str, ...]] = ("default",)
    n_aux: ClassVar[int] = 0
    # names and units of the n_aux bookkeeping numbers, for labelled results (rollax.sweep's
    # dataset splits aux into aux_<name> variables with these units); None: not stated (one
    # variable "aux", units "unspecified")
    aux_names: ClassVar[tuple[str, ...] | None] = None
    aux_units: ClassVar[tuple[str, ...] | None] = None
    outcomes: ClassVar[type[enum.IntEnum] | None] = None
    # event samples per step that both integrators use unless a call says otherwise: a system
    # whose event functions vary slowly on the scale of its steps may lower it (cost per step)
    n_samples: ClassVar[int] = 8
    # the Runge-Kutta pair both integrators use unless a call says otherwise ("dopri5" or
    # "dopri8"; rollax.solve also takes "tsit5" or a diffrax solver)
    solver: ClassVar[str] = "dopri5"
    # the step bound both integrators use unless a call gives dt_max: a system whose events
    # are narrow dips in time (a ball grazing a rim) sets the step that its n_samples resolve
    dt_max: ClassVar[float | None] = None

    def __init_subclass__(cls, **kwargs):
        # a concrete system must name its state: refused when the class is defined, not at
        # its first solve (a property, computed per instance, is checked at construction)
        super().__init_subclass__(**kwargs)
        events = inspect.getattr_static(cls, "events", ())
        if not isinstance(events, (tuple, list, property)) or not all(
            isinstance(e, Event) for e in (() if isinstance(events, property) else events)
        ):
            raise TypeError(
                f"{cls.__name__}.events = {events!r} is not allowed: it must be a tuple of "
                f"rollax.Event, e.g. events = (rollax.crossing('zero'),)"
            )
        names = inspect.getattr_static(cls, "state_names", ())
        if not inspect.isabstract(cls) and not isinstance(names, property) and not tuple(names):
            raise TypeError(
                f"{cls.__name__} has no state_names: a system must name its state "
                f"components, e.g. state_names = ('x', 'v') (their number is the state "
                f"dimension)"
            )
        units = inspect.getattr_static(cls, "state_units", None)
        if units is not None and not isinstance(names, property):
            if not (
                isinstance(units, tuple)
                and len(units) == len(tuple(names))
                and all(isinstance(u, str) for u in units)
            ):
                raise TypeError(
                    f"{cls.__name__}.state_units = {units!r} is not allowed: it must be a "
                    f"tuple of {len(tuple(names))} strings, one per state component "
                    f"{tuple(names)}, or None"
                )

        n_aux = inspect.getattr_static(cls, "n_aux", 0)
        for attr in ("aux_names", "aux_units"):
            value = inspect.getattr_static(cls, attr, None)
            if value is None or isinstance(n_aux, property):
                continue
            if not (
                isinstance(value, tuple)
                and len(value) == n_aux
                and all(isinstance(u, str) and u for u in value)
            ):
                raise TypeError(
                    f"{cls.__name__}.{attr} = {value!r} is not allowed: it must be a tuple of "
                    f"{n_aux} non-empty strings, one per aux number (n_aux = {n_aux}), or None"
                )
        aux_names = inspect.getattr_static(cls, "aux_names", None)
        if aux_names is not None and len(set(aux_names)) != len(aux_names):
            raise TypeError(f"{cls.__name__}.aux_names = {aux_names!r} names one number twice")

    def __check_init__(self):
        # a subclass that forgot state_names once failed later with "vector_field returns
        # shape (2,); it must be (0,)": say what is missing, at construction
        if not tuple(self.state_names):
            raise ValueError(
                f"{type(self).__name__} has no state_names: a system must name "
                f"its state components, e.g. state_names = ('x', 'v') (their "
                f"number is the state dimension)"
            )
        # equinox runs this for every subclass too; the modules a system holds (a Rim, a
        # Ball's rails) check their own parameters when they are built (not again here: an
        # eager rollax.solve pays each check, 0.1 ms for the rim)
        check_parameters(self)

    # ------------------------------------------------------------------ dynamics
    @abc.abstractmethod
    def vector_field(
        self, t: Float[Array, ""], y: Float[Array, " d"], mode: Int[Array, ""]
    ) -> Float[Array, " d"]:
        """dy/dt in the given mode."""

    def event_values(
        self, t: Float[Array, ""], y: Float[Array, " d"], mode: Int[Array, ""]
    ) -> Float[Array, " n"]:
        """The event functions, one per entry of ``events`` (none by default)."""
        return jnp.zeros((0,), jnp.result_type(y))

    def field_and_events(self, t, y, mode) -> tuple[Float[Array, " d"], Float[Array, " n"]]:
        """``(vector_field, event_values)`` at one point; override to share work between them."""
        # (as arrays: a vector_field may return a list of scalars)
        return jnp.asarray(self.vector_field(t, y, mode)), jnp.asarray(
            self.event_values(t, y, mode)
        )

    # ------------------------------------------------------------------ an exact flow
    def flow(
        self,
        t0: Float[Array, ""],
        y0: Float[Array, " d"],
        t1: Float[Array, ""],
        mode: Int[Array, ""],
    ) -> Float[Array, " d"]:
        """The exact state at ``t1`` of the motion from ``(t0, y0)`` in ``mode``, for a system
        that knows it in closed form (not provided by default).

        With a flow, :func:`rollax.solve` and :func:`rollax.solve_ensemble` take steps of
        ``flow_step`` along it (no error control, no Runge-Kutta solver) and sample and locate
        the events on it, so event times are exact to the root finder's rounding. The
        ``vector_field`` is still needed: it gives the slope of an event at its root (event
        times' derivatives, the side a zero start takes). It must be differentiable in ``t1``."""
        raise NotImplementedError(f"{type(self).__name__} has no exact flow")

    def flow_step(
        self, t: Float[Array, ""], y: Float[Array, " d"], mode: Int[Array, ""]
    ) -> Float[Array, ""]:
        """With a ``flow``: the step to take from ``(t, y)``; the events are sampled
        ``n_samples`` times per step, so it must resolve their dips (``dt_max`` bounds it
        further). The default, ``inf``, leaves the step to ``dt_max``, which is then required."""
        return jnp.asarray(jnp.inf, jnp.result_type(y))

    @property
    def has_flow(self) -> bool:
        """Whether the system provides its own exact ``flow``."""
        return type(self).flow is not AbstractSystem.flow

    def check_functions(self, y0, mode: int | Array = 0, t0: float | Array = 0.0) -> None:
        """A ``ValueError`` unless ``vector_field`` (and ``field_and_events``) give ``(d,)`` and
        ``event_values`` one value per entry of ``events`` at a state ``y0`` (``(d,)``) of the
        system. Shapes only: the functions are traced abstractly, once per system structure."""
        # the cache key (a flatten, no array work: an eager rollax.solve call pays it): arrays
        # by shape and dtype, other leaves (a plain int field, static to the compiled solve) by
        # value; by type, a variant with k = 2 of a class checked with k = 1 skipped its check
        # and met JAX's "body_fun must have the same input and output structure" instead
        leaves, treedef = jax.tree_util.tree_flatten(self)
        try:
            key = (
                treedef,
                tuple(
                    (jnp.shape(x), jnp.result_type(x)) if eqx.is_array(x) else (type(x), x)
                    for x in leaves
                ),
                tuple(jnp.shape(y0)),
            )
            hash(key)
        except TypeError:
            key = None
        if key is not None and key in _CHECKED:
            return
        dyn, static = eqx.partition(self, eqx.is_array)
        avals = jax.tree_util.tree_map(
            lambda x: jax.ShapeDtypeStruct(jnp.shape(x), jnp.result_type(x)), dyn
        )
        y = jax.ShapeDtypeStruct(jnp.shape(y0), jnp.result_type(float))
        batched = bool(self.batch_shape())

        hybrid = self.hybrid

        def shapes(sys_, y_, m_):
            t = jnp.asarray(t0, y_.dtype)
            out = (
                sys_.vector_field(t, y_, m_),
                sys_.event_values(t, y_, m_),
                *sys_.field_and_events(t, y_, m_),
            )
            # a list or tuple where one array belongs: named here, not as a bare dtype error
            for w, o in zip(_FUNCTIONS, out):
                if isinstance(o, (list, tuple)):
                    raise ValueError(
                        f"{type(sys_).__name__}.{w} returns a {type(o).__name__}; it must return "
                        f"one array (e.g. jnp.stack([...]))"
                    )
            if hybrid:
                aux = sys_.initial_aux(y_, m_)
                r = sys_.reset(t, y_, m_, aux, jnp.int32(0))
                if not (isinstance(r, tuple) and len(r) == 5):
                    got = f"{len(r)} values" if isinstance(r, tuple) else type(r).__name__
                    raise ValueError(
                        f"{type(sys_).__name__}.reset returns {got}; it must return "
                        f"(t, y, mode, aux, terminal)"
                    )
            return out

        fn = eqx.filter_vmap(shapes, in_axes=(self.batch_axes(), None, None)) if batched else shapes
        out = eqx.filter_eval_shape(
            fn, eqx.combine(avals, static), y, jax.ShapeDtypeStruct((), jnp.int32)
        )
        d, n, name = self.state_dim, len(self.events), type(self).__name__
        want = ((d,), (n,), (d,), (n,))
        for w, o, sh in zip(_FUNCTIONS, out, want):
            got = tuple(jnp.shape(o))[int(batched) :]
            if got != sh:
                per = (
                    f"one per state component ({d})"
                    if sh == (d,)
                    else f"one per event ({n}: {', '.join(e.name for e in self.events)})"
                )
                raise ValueError(f"{name}.{w} returns shape {got}; it must be {sh}, {per}")
            if sh[0] and not jnp.issubdtype(o.dtype, jnp.floating):
                # the integrators differentiate the event functions and locate their roots
                raise ValueError(
                    f"{name}.{w} returns {o.dtype} values; it must return real "
                    f"floating-point values (an event function is located by its "
                    f"sign changes and slopes: return a float, e.g. "
                    f"jnp.asarray(g, float))"
                )
        if key is not None:
            if len(_CHECKED) > 4096:
                _CHECKED.clear()
            _CHECKED.add(key)

    def check_flow_step(self, dt_max) -> None:
        """A ``ValueError`` when the system has a flow but neither a ``flow_step`` nor a
        ``dt_max`` bounds its steps."""
        if self.has_flow and type(self).flow_step is AbstractSystem.flow_step and dt_max is None:
            raise ValueError(
                f"dt_max = None is not allowed for {type(self).__name__}: its exact "
                f"flow has no flow_step, so dt_max (> 0) must bound the steps"
            )

    # ------------------------------------------------------------------ hybrid structure
    @property
    def hybrid(self) -> bool:
        """Whether the system has a reset map (then events do not simply end the run)."""
        return type(self).reset is not AbstractSystem.reset

    def reset(
        self,
        t: Float[Array, ""],
        y: Float[Array, " d"],
        mode: Int[Array, ""],
        aux: Float[Array, " p"],
        event: Int[Array, ""],
    ) -> tuple[
        Float[Array, ""], Float[Array, " d"], Int[Array, ""], Float[Array, " p"], Bool[Array, ""]
    ]:
        """At the located root ``t`` of ``event``: ``(t, y, mode, aux, terminal)`` to go on with
        (a map may move the time ahead, e.g. a slip extrapolated to its stop).

        The default (a non-hybrid system) ends the run at every event."""
        return t, y, mode, aux, jnp.asarray(True)

    def initial_mode(self, t0: Float[Array, ""], y0: Float[Array, " d"]) -> Int[Array, ""]:
        """The mode a run from ``(t0, y0)`` starts in when a call gives none (an index of
        ``modes``): :func:`rollax.solve`, :func:`rollax.solve_ensemble` and
        :func:`rollax.sweep` use it for ``mode=None`` (their default). The default is 0; a
        hybrid system whose modes follow from the state (sticking or slipping, rolling or
        flying) says so here, so that no start begins in a mode its state contradicts."""
        return jnp.zeros((), jnp.int32)

    def initial_aux(self, y0: Float[Array, " d"], mode: Int[Array, ""]) -> Float[Array, " p"]:
        """The bookkeeping a run starts with (``n_aux`` numbers; zeros by default)."""
        return jnp.zeros((self.n_aux,), jnp.result_type(y0))

    def jump_times(self) -> tuple[float | Float[Array, ""], ...] | Float[Array, " k"] | None:
        """Times where the vector field or its derivatives jump (a piecewise control's kinks):
        no step of :func:`rollax.solve` or :func:`rollax.solve_ensemble` straddles one. None by
        default."""
        return None

    def outcome(self, solution) -> Int[Array, ""]:
        """The system's classification of one finished run (an ``outcomes`` value).

        The default is the run's :class:`rollax.Status`. Batches are classified with
        :func:`rollax.classify`."""
        return solution.status

    def outcome_name(self, solution):
        """The names of :func:`rollax.classify`'s outcomes of a (batched) solution, from the
        system's ``outcomes`` enumeration (:class:`rollax.Status` names if it has none): a
        ``str`` for one run, an array of them for a batch."""
        return code_names(classify(self, solution), self.outcomes or Status)

    def describe(self, solution) -> str:
        """One line on how one run ended, in names: its status, the event that ended it, the
        time and mode there, the outcome, steps and resets."""
        if np.ndim(solution.t) != 0:
            raise ValueError(
                f"describe takes one run; this solution has a batch of shape "
                f"{np.shape(solution.t)} (use outcome_name or status_name)"
            )
        e = int(solution.event)
        event = f"event {e} ({self.events[e].name!r})" if 0 <= e < len(self.events) else "no event"
        m = int(solution.mode)
        mode = self.modes[m] if 0 <= m < len(self.modes) else str(m)
        return (
            f"{code_names(solution.status, Status)} at t = {float(solution.t):.10g}:"
            f" {event}, mode {mode!r}; outcome {self.outcome_name(solution)}; "
            f"{int(solution.steps)} steps, {int(solution.resets)} resets before the end"
        )

    # ------------------------------------------------------------------ helpers
    @property
    def state_dim(self) -> int:
        return len(self.state_names)

    @property
    def event_set(self) -> EventSet:
        """The events as the integrators' :class:`rollax._core.events.EventSet` (mode 0 fn, static)."""
        ev = tuple(self.events)
        return EventSet(
            _no_fn,
            tuple(int(e.kind) for e in ev),
            tuple(int(e.target) for e in ev),
            tuple(int(e.direction) for e in ev),
        )

    @typing.overload
    def check_state(
        self, y, name: str = ..., valid=..., *, host: typing.Literal[False] = ...
    ) -> Float[Array, "... d"]: ...
    @typing.overload
    def check_state(
        self, y, name: str = ..., valid=..., *, host: bool
    ) -> Float[Array, "... d"] | Float[np.ndarray, "... d"]: ...
    def check_state(
        self, y, name: str = "y0", valid=None, *, host: bool = False
    ) -> Float[Array, "... d"] | Float[np.ndarray, "... d"]:
        """``y`` as a float array whose last axis is the state, or a ``ValueError``: a wrong
        shape, a value that is not a real number (complex, bool, text) or, where ``y`` is
        concrete, not finite (only the rows where ``valid``, if given). ``host``: a ``y`` that
        is not a JAX array is checked and returned as a NumPy float64 array (no round trip
        through the device: 50 ms of the 1000 x 1000 panel's 0.39 s on an H100 host)."""
        kind = getattr(getattr(y, "dtype", None), "kind", None)
        if kind is None and not isinstance(y, Tracer):
            try:
                kind = np.asarray(y).dtype.kind
            except Exception:
                kind = "O"
        if kind not in ("f", "i", "u"):
            raise ValueError(f"{name} = {_show(y)} is not allowed: it must be real numbers")
        y = (
            np.asarray(y, dtype=np.float64)
            if host and not isinstance(y, jax.Array)
            else jnp.asarray(y, dtype=float)
        )
        d = self.state_dim
        if y.ndim == 0 or (d and y.shape[-1] != d):
            raise ValueError(
                f"{name} has shape {tuple(y.shape)}; {type(self).__name__} needs "
                f"a last axis of {d} ({', '.join(self.state_names)})"
            )
        # one sum first: all finite unless it is not (4 against 25 ms for a million starts
        # on an H100 host); a large finite sum that overflows only sends it the long way
        with np.errstate(over="ignore", invalid="ignore"):  # (inf - inf: the long way)
            if isinstance(y, np.ndarray):
                fast = bool(np.isfinite(np.sum(y)))
            else:  # a device array: one number back, not the array (inside a trace even a
                # concrete array's sum is staged: then the long way, on the host)
                s = None if isinstance(y, Tracer) else jnp.sum(y)
                fast = s is not None and not isinstance(s, Tracer) and bool(jnp.isfinite(s))
        if not isinstance(y, Tracer) and not fast:
            bad = ~np.all(np.isfinite(np.asarray(y)), axis=-1)
            if valid is not None:
                bad = bad & np.asarray(valid, bool)
            if np.any(bad):
                row = int(np.argmax(bad.reshape(-1)))
                a = np.asarray(y).reshape(-1, max(d, 1))[row]
                shown = a.tolist() if a.size <= 8 else f"an array with {a.size} values"
                where = f"row {row} of {name}" if y.ndim > 1 else name
                raise ValueError(f"{where} = {shown} is not allowed: a start must be finite")
        return y

    def check_mode(self, mode, name: str = "mode") -> Int[Array, ""]:
        """``mode`` (an index or a name of ``modes``) as an int32 array, or a ``ValueError``."""
        if isinstance(mode, str):
            if mode not in self.modes:
                raise ValueError(f"{name} = {mode!r} must be one of {list(self.modes)}")
            mode = self.modes.index(mode)
        try:
            m = None if mode is None or isinstance(mode, bool) else jnp.asarray(mode)
        except (TypeError, ValueError):
            m = None
        if m is None or not jnp.issubdtype(m.dtype, jnp.integer):
            raise ValueError(f"{name} = {mode!r} must be an integer index of {list(self.modes)}")
        if not isinstance(m, Tracer) and np.any(
            (np.asarray(m) < 0) | (np.asarray(m) >= len(self.modes))
        ):
            raise ValueError(
                f"{name} = {mode!r} is outside the allowed range [0, {len(self.modes) - 1}]"
            )
        return m.astype(jnp.int32)

    def batch_shape(self) -> tuple[int, ...]:
        """The leading batch shape of the parameters (``()`` for one system).

        Only fields declared with :func:`rollax.parameter` (on the system or on a module it
        holds) are batched, when they have more axes than their declared ``shape``; every
        other array is shared by all starts, whatever its annotation."""
        shapes = set()
        for leaf, core in zip(*_leaves_and_core(self)):
            if core is not None and jnp.ndim(leaf) > core:
                shapes.add(tuple(jnp.shape(leaf))[: jnp.ndim(leaf) - core])
        if len(shapes) > 1:
            raise ValueError(
                f"parameters of {type(self).__name__} have different batch shapes "
                f"{sorted(shapes)}; use one leading axis for all batched fields"
            )
        return shapes.pop() if shapes else ()

    def batch_axes(self):
        """A pytree like the system: 0 on batched parameter leaves, None elsewhere (for
        ``jax.vmap``'s ``in_axes`` over a batch of systems that share their other fields)."""
        leaves, cores = _leaves_and_core(self)
        marks = iter(
            [0 if c is not None and jnp.ndim(x) > c else None for x, c in zip(leaves, cores)]
        )
        return jax.tree_util.tree_map(lambda x: next(marks) if eqx.is_array(x) else None, self)


# system structures whose function shapes were checked (check_functions)
_FUNCTIONS = (
    "vector_field",
    "event_values",
    "field_and_events (the field)",
    "field_and_events (the event values)",
)
_CHECKED: set = set()


def _leaves_and_core(tree):
    """The array leaves of ``tree`` (in ``jax.tree_util`` order) and each one's number of
    per-system axes: the length of its declared :func:`parameter` ``shape``, or ``None`` for
    a leaf that is not a parameter (shared by every start, never batched)."""
    leaves, cores = [], []

    def walk(node, core):
        if eqx.is_array(node):
            leaves.append(node)
            cores.append(core)
        elif isinstance(node, eqx.Module):
            for f in dataclasses.fields(node):
                if f.metadata.get("static", False):
                    continue
                shape = f.metadata.get(_SHAPE) if f.metadata.get(_PARAMETER) else None
                walk(getattr(node, f.name), None if shape is None else len(shape))
        elif isinstance(node, (tuple, list)):
            for x in node:
                walk(x, None)
        else:
            for x in jax.tree_util.tree_leaves(node):
                if eqx.is_array(x):
                    leaves.append(x)
                    cores.append(None)

    walk(tree, None)
    ref = [x for x in jax.tree_util.tree_leaves(tree) if eqx.is_array(x)]
    if len(ref) != len(leaves) or any(a is not b for a, b in zip(ref, leaves)):
        # an exotic pytree: nothing in it is batched
        return ref, [None] * len(ref)
    return leaves, cores


def parameter_fields(tree) -> dict[str, tuple]:
    """Every :func:`parameter` field of ``tree`` and of the modules it holds, as
    ``{"rim.mu": ("rim", "mu"), ...}`` (dotted name: attribute path)."""
    out: dict[str, tuple] = {}

    def walk(node, path):
        if isinstance(node, eqx.Module):
            for f in dataclasses.fields(node):
                if f.metadata.get("static", False):
                    continue
                if f.metadata.get(_PARAMETER):
                    out[".".join(path + (f.name,))] = path + (f.name,)
                else:
                    walk(getattr(node, f.name, None), path + (f.name,))
        elif isinstance(node, (tuple, list)):
            for i, x in enumerate(node):
                walk(x, path + (str(i),))

    walk(tree, ())
    return out


def check_parameters(module: eqx.Module, where: str | None = None) -> None:
    """A ``ValueError`` naming the field unless every :func:`parameter` field of ``module``
    is a finite real array whose trailing axes are its declared ``shape`` (a named axis, a
    string, takes any length). Traced values are checked where they are concrete. A system
    checks its own fields; a module with parameters that a system may hold (a ``Rim``, a
    ``Ball``) calls this from its own ``__check_init__``."""
    where = type(module).__name__ if where is None else where
    for f in dataclasses.fields(module):
        if not f.metadata.get(_PARAMETER):
            continue
        v = getattr(module, f.name, None)
        if isinstance(v, Tracer):
            continue
        if isinstance(v, float) and f.metadata.get(_SHAPE) == ():  # a number (convert=False)
            if math.isnan(v) or (f.metadata.get(_FINITE, True) and math.isinf(v)):
                must = "be finite" if f.metadata.get(_FINITE, True) else "not be NaN"
                raise ValueError(
                    f"{where}.{f.name} = {v!r} is not allowed: a parameter must {must}"
                )
            continue
        try:  # (a converted parameter is an array; one declared convert=False may be a number)
            a = None if isinstance(v, (str, bytes, bool)) or v is None else np.asarray(v)
        except Exception:
            a = None
        if a is None or a.dtype.kind not in "iuf":
            raise ValueError(
                f"{where}.{f.name} = {_show(v)} is not allowed: a parameter must be a real "
                f"number or an array of them"
            )
        shape = f.metadata.get(_SHAPE, ())
        tail = a.shape[a.ndim - len(shape) :] if a.ndim >= len(shape) else None
        if tail is None or any(isinstance(n, int) and n != m for n, m in zip(shape, tail)):
            shown = tuple(shape)
            raise ValueError(
                f"{where}.{f.name} has shape {a.shape}; it is declared "
                f"rollax.parameter(shape={shown}): allowed are {shown} and, for per-start "
                f"values, (N,) + {shown}"
            )
        finite = f.metadata.get(_FINITE, True)
        bad = ~np.isfinite(a) if finite else np.isnan(a)
        if a.dtype.kind in "fc" and np.any(bad):
            shown = a.tolist() if a.size <= 8 else f"an array of shape {a.shape}"
            must = "be finite" if finite else "not be NaN"
            raise ValueError(f"{where}.{f.name} = {shown} is not allowed: a parameter must {must}")


def _no_fn(t, y, args):  # pragma: no cover - the integrators call the system instead
    raise RuntimeError("call system.event_values")


def _to_parameter(x):
    # a float64 array; what cannot be one (text, None, a complex number) is kept as given, so
    # that the system's check (which knows the field's name) refuses it by name
    if isinstance(x, Tracer):
        return x
    if x is None or isinstance(x, (str, bytes, bool, np.bool_)):
        return x
    try:
        a = np.asarray(x)
    except Exception:
        return x
    if a.dtype.kind not in "iuf":
        return x
    return jnp.asarray(a, dtype=float)


def _to_host_parameter(x):
    # convert=False: a real Python number stays one (a float), a sequence becomes a NumPy
    # array; arrays and what cannot be a parameter are kept as given (the check names it)
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return float(x)
    if isinstance(x, (list, tuple)):
        try:
            a = np.asarray(x)
        except Exception:
            return x
        return a.astype(float) if a.dtype.kind in "iuf" else x
    return x


def parameter(
    default=None,
    *,
    shape: Any = (),
    finite: bool = True,
    convert: bool = True,
    units: str | None = None,
    uncertain: tuple[float, float] | None = None,
    source: str | None = None,
    **kwargs,
):
    """A parameter field, the one way to declare one: stored as a float64 array (traced under
    ``jit``, so a new value does not recompile; differentiable; sweepable by name).

    ``shape`` is the shape of one system's value: ``()`` a scalar, ``(3,)`` a 3-vector; a
    string is a named axis of any length (``("n",)``: a vector of any length, ``("K", "n")``).
    It alone decides batching: a value with more axes than ``shape`` carries per-start values
    on its leading axis (:func:`rollax.solve_ensemble`, :func:`rollax.sweep`). Fields not
    declared with ``parameter`` are never batched, whatever their annotation: they are shared
    by every start. A value whose trailing axes are not ``shape``, or that is not finite
    (NaN, inf; ``finite=False`` allows +-inf, as ``mu = inf``: no slipping), is refused when
    the system is built (a ``ValueError`` naming the field).

    ``convert=False`` keeps the value as given (a Python number stays one): for a model module
    that is also used on its own, where Python numbers keep it hashable (``jax.jit`` of its
    bound methods) and constant-folded; the system that holds it converts its parameters to
    arrays (:class:`rollax.systems.RimRolling` and its ``rim``). ``units``: the value's units
    (UDUNITS text: ``"m"``, ``"1/s"``, ``"1"`` for a pure number), written on a sweep axis over
    the parameter and in the sweep's dataset.

    ``uncertain``: ``(lo, hi)``, the range the value is known to lie in (a measured or
    rule-given band; the default should lie inside it), and ``source``: where the default and
    the range come from (a citation, or the assumption stated). Both are declarations, read by
    :func:`parameter_ranges`, for analyses that marginalise over or probe the range; neither
    limits the values a system accepts."""
    if units is not None and not isinstance(units, str):
        raise ValueError(f"units = {units!r} must be a string (UDUNITS: 'm', '1/s', '1') or None")
    try:
        if isinstance(shape, (str, bytes)):
            raise TypeError
        shape = tuple(n if isinstance(n, str) else int(n) for n in shape)
    except (TypeError, ValueError):
        raise ValueError(
            f"shape = {shape!r} must be a tuple of non-negative integers or axis names"
        ) from None
    if any(isinstance(n, int) and n < 0 for n in shape):
        raise ValueError(
            f"shape = {shape!r} must be a tuple of non-negative integers or axis names"
        )
    for name, flag in (("finite", finite), ("convert", convert)):
        if not isinstance(flag, bool):
            raise ValueError(f"{name} = {flag!r} must be True or False")
    if uncertain is not None:
        try:
            if isinstance(uncertain, (str, bytes)) or len(uncertain) != 2:
                raise TypeError
            lo_, hi_ = float(uncertain[0]), float(uncertain[1])
        except (TypeError, ValueError):
            raise ValueError(
                f"uncertain = {uncertain!r} must be a pair (lo, hi) of finite numbers"
            ) from None
        if not (math.isfinite(lo_) and math.isfinite(hi_) and lo_ < hi_):
            raise ValueError(f"uncertain = {uncertain!r} must be finite with lo < hi")
        if default is not None and np.ndim(default) == 0 and not lo_ <= float(default) <= hi_:
            raise ValueError(f"uncertain = {uncertain!r} must hold the default {default!r}")
        uncertain = (lo_, hi_)
    if source is not None and not isinstance(source, str):
        raise ValueError(f"source = {source!r} must be a string or None")
    kwargs["converter"] = _to_parameter if convert else _to_host_parameter
    meta = {**kwargs.pop("metadata", {}), _PARAMETER: True, _SHAPE: shape, _FINITE: finite}
    if units is not None:
        meta[_UNITS] = units
    if uncertain is not None:
        meta[_RANGE] = uncertain
    if source is not None:
        meta[_SOURCE] = source
    if default is None:
        return eqx.field(metadata=meta, **kwargs)
    if np.ndim(default) > 0:  # an array default (mutable for dataclasses): one copy per system
        value = np.array(default)
        return eqx.field(default_factory=lambda: value.copy(), metadata=meta, **kwargs)
    return eqx.field(default=default, metadata=meta, **kwargs)


_PARAMETER = "rollax.parameter"
_SHAPE = "rollax.parameter.shape"
_UNITS = "rollax.parameter.units"
_RANGE = "rollax.parameter.uncertain"
_SOURCE = "rollax.parameter.source"


def _field_at(tree, path):
    """The module holding the parameter at ``path`` (from :func:`parameter_fields`) and its
    dataclass field."""
    node = tree
    for k in path[:-1]:
        node = node[int(k)] if isinstance(node, (tuple, list)) else getattr(node, k)
    return node, {f.name: f for f in dataclasses.fields(node)}[path[-1]]


def parameter_units(tree) -> dict[str, str | None]:
    """The declared units of every :func:`parameter` field of ``tree`` (dotted name: units,
    None where not stated)."""
    out = {}
    for name, path in parameter_fields(tree).items():
        node, f = _field_at(tree, path)
        out[name] = f.metadata.get(_UNITS)
    return out


_FINITE = "rollax.parameter.finite"


class ParameterRange(NamedTuple):
    """A parameter's declared uncertainty (:func:`parameter`'s ``uncertain`` and ``source``):
    the value it has in the system, the range it is known to lie in, its units and source."""

    value: float
    lo: float
    hi: float
    units: str | None
    source: str | None


def parameter_ranges(tree) -> dict[str, ParameterRange]:
    """The parameters of ``tree`` (a system, or a module it holds) that declare an uncertainty
    (``parameter(..., uncertain=(lo, hi))``), by dotted name: the system's value (a scalar
    value; a batched one is refused by name), the declared range, units and source. A system
    whose values lie outside a declared range is allowed (the range is the default's
    uncertainty, not a limit); analyses that sample the range sample the declared one."""
    out = {}
    for name, path in parameter_fields(tree).items():
        node, f = _field_at(tree, path)
        rng = f.metadata.get(_RANGE)
        if rng is None:
            continue
        v = getattr(node, path[-1])
        if np.ndim(v) != 0:
            raise ValueError(
                f"{name} has shape {np.shape(v)}: a declared range describes one system's "
                f"scalar value, not a batch"
            )
        value = math.nan if isinstance(v, Tracer) else float(v)
        out[name] = ParameterRange(
            value, rng[0], rng[1], f.metadata.get(_UNITS), f.metadata.get(_SOURCE)
        )
    return out


def classify(system: AbstractSystem, solution) -> Int[Array, "*b"]:
    """``system.outcome`` of every run of a (batched) :class:`rollax.Solution`.

    ``system`` may carry per-start parameters (a leading batch axis on some fields, as given
    to :func:`rollax.solve_ensemble`); each run is classified with its own parameters."""
    fields = {
        f.name: None
        if getattr(solution, f.name) is None
        else jax.tree_util.tree_map(jnp.asarray, getattr(solution, f.name))
        for f in dataclasses.fields(solution)
    }
    return _classify(system, type(solution)(**fields))


@eqx.filter_jit
def _classify(system, solution):
    nb = jnp.ndim(solution.t)
    if nb == 0:
        return system.outcome(solution)
    shape = jnp.shape(solution.t)
    size = int(np.prod(shape))
    flat = jax.tree_util.tree_map(lambda x: jnp.reshape(x, (size,) + jnp.shape(x)[nb:]), solution)
    out = eqx.filter_vmap(_outcome_of, in_axes=(system.batch_axes(), 0))(system, flat)
    return jnp.reshape(out, shape)


def _outcome_of(system, solution):
    return system.outcome(solution)
