"""``InspectedOnceDoFn``: a DoFn whose methods' signatures Beam reads once per class instead of at every bundle.

The streaming DirectRunner builds a new ``DoFnRunner`` for every bundle of every step, and with it reads the
signature of each method of the DoFn (``inspect.signature``, about 28 methods for a plain ``DoFn``) several times:
``DoFnSignature``, ``is_stateful_dofn``, ``validate_stateful_dofn`` and the state context each walk them all.
Measured here with Beam 2.77: 3.8 to 6.2 ms per bundle and step for this project's stateful DoFns, a third of a
topic-to-topic run's time when the job itself does nothing (``benchmarks/stream_floor.py``).

Beam asks an object for ``_inspect_<method>`` before it inspects ``<method>`` (``apache_beam.transforms.core.
get_function_arguments``: the hook its own ``CallableWrapperDoFn`` uses). ``InspectedOnceDoFn`` answers it for every
method with the arguments read the first time for the class. A DoFn's methods, and the state and timer
parameters they declare, belong to its class, so the answer is the one Beam would compute. A Beam without the
hook only loses the speed.

At every bundle Beam also finds the DoFn's state and timers (``get_dofn_specs``, twice or three times) by reading
every method ``dir`` lists: about 40 for a plain DoFn. Only the methods that declare a DoFn parameter (a state, a
timer, the key, the timestamp, ...) add anything to what it finds, so ``dir`` of an ``InspectedOnceDoFn`` lists
those (``get_dofn_specs`` is Beam's one use of ``dir`` on a DoFn). Measured on the summary-client job from a
topic (305,243 events, 498 bundles): the runner's starts of bundles took 0.89 s of the run before, 0.40 s after
(with the job's last ``beam.Map`` and plain DoFns on that path made into ``InspectedOnceDoFn`` subclasses).
"""
from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import apache_beam as beam
from apache_beam.transforms.core import _DoFnParam, get_function_args_defaults

_HOOK = "_inspect_"
_ARGUMENTS: dict[tuple[type, str], tuple[list[str], list[Any]]] = {}  # (DoFn class, method) -> (args, defaults)
_DECLARING: dict[type, tuple[str, ...]] = {}  # DoFn class -> its methods that declare a DoFn parameter


class InspectedOnceDoFn(beam.DoFn):
    """A DoFn whose methods' arguments (``get_function_args_defaults``) are read once per class and method."""

    def __getattr__(self, name: str) -> Callable[[], tuple[list[str], list[Any]]]:
        """Only ``_inspect_<method>``, which no DoFn of the class defines, reaches here."""
        if not name.startswith(_HOOK):
            raise AttributeError(name)
        key = (type(self), name[len(_HOOK):])
        arguments = _ARGUMENTS.get(key)
        if arguments is None:
            arguments = _ARGUMENTS[key] = get_function_args_defaults(getattr(self, key[1]))
        return lambda: arguments

    def __dir__(self) -> list[str]:
        """The methods that declare a DoFn parameter (see the module's docstring), read once per class."""
        names = _DECLARING.get(type(self))
        if names is None:
            names = _DECLARING[type(self)] = tuple(
                name for name in object.__dir__(self)
                if isinstance(getattr(self, name, None), types.MethodType)
                and any(isinstance(default, _DoFnParam) for default in getattr(self, _HOOK + name)()[1])
            )
        return list(names)  # a list of its own: the caller may change it
