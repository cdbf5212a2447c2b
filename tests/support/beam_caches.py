"""Work the local runners repeat on the same inputs, done once per input in the test process.

Each piece answers exactly what Beam's own function answers; only the repetition goes. Jobs the tests start as
processes (the CLI, crash and Flink tests) run Beam unchanged.

* **The state and timer specs of a DoFn.** The streaming DirectRunner searches every step's DoFn for them
  (``userstate.get_dofn_specs``: ``inspect.signature`` of every method ``dir`` lists) several times at every bundle.
  The jobs' own DoFns answer once per class (``transforms.core.inspected.InspectedOnceDoFn``, through Beam's own
  hook), but the steps ``assert_that`` adds to a test pipeline are Beam's. In a TestStream test of the measurement
  job (1,100 bundles) the search was 4.5 s of its 7.7 s. The specs come from the DoFn's methods' default arguments:
  its class's methods, and the callables its instance holds (the function a ``Map`` wraps), so the answer is cached
  per class and those callables (kept alive with the entry, so that their ids stay theirs).
* **The DirectRunner's pickling of a DoFn at every bundle.** Each bundle runs a fresh copy of the step's DoFn,
  unpickled from the pickled original (``_ParDoEvaluator.start_bundle``). The original does not change between
  bundles, so it is pickled once (Beam's own TODO there: "consider storing the serialized form") and each bundle
  still unpickles a copy of its own; a copy's specs are its original's.
* **``inspect.signature`` of a function** (``typehints.decorators.get_signature``), asked for every step built and
  every bundle started: cached per function (a bound method's per its function: the signature does not depend on
  the instance bound).
* **dill's trace switch.** Beam turns dill's trace off after every pickling (``dill._dill._trace(False)``), and
  ``Logger.setLevel`` then clears the cache of every logger of the process, although the level is already off.

In four of the in-process test files (py-spy on ``tests/transforms/budgeting/test_measurement.py`` and three others)
the four were a quarter of the samples; with the caches the files took 184 CPU-seconds against 240 (benchmarks/
README.md, "The test suite's time").
"""
from __future__ import annotations

import contextlib
import inspect
import logging
import types
import weakref
from typing import Any

import dill
from apache_beam.internal import pickler
from apache_beam.runners.direct import transform_evaluator
from apache_beam.transforms import core, ptransform, userstate
from apache_beam.transforms import util as beam_util
from apache_beam.typehints import decorators

_search_specs = userstate.get_dofn_specs
_signature = decorators.get_signature
_FOUND_SPECS: dict[tuple, tuple[tuple[set, set], tuple[Any, ...]]] = {}
_PICKLED: dict[int, tuple[weakref.ref, bytes]] = {}  # id of a step's DoFn -> (the DoFn, its pickled bytes)
_PICKLED_FROM: dict[int, weakref.ref] = {}  # id of those bytes -> the DoFn
_ORIGINAL: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # a bundle's copy of a DoFn -> the DoFn
_SIGNATURES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # function -> (its defaults, its signature)
_BOUND_SIGNATURES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # the same for its bound methods


def _original(dofn: Any) -> Any:
    """The step's DoFn of which ``dofn`` is a bundle's copy, else ``dofn``."""
    try:
        return _ORIGINAL.get(dofn, dofn)
    except TypeError:  # unhashable
        return dofn


def _specs_once(dofn: Any) -> tuple[set, set]:
    dofn = _original(dofn)
    held = tuple(value for value in vars(dofn).values() if callable(value))
    key = (type(dofn), tuple(map(id, held)))
    found = _FOUND_SPECS.get(key)
    if found is None:
        found = _FOUND_SPECS[key] = (_search_specs(dofn), held)
    states, timers = found[0]
    return set(states), set(timers)


def _forget(key: int, data: bytes) -> None:
    _PICKLED.pop(key, None)
    _PICKLED_FROM.pop(id(data), None)


class _PickledOnce:
    """``pickler`` as the DirectRunner's ParDo evaluator uses it (``loads(dumps(dofn))``), a DoFn pickled once."""

    @staticmethod
    def dumps(dofn: Any) -> bytes:
        entry = _PICKLED.get(id(dofn))
        if entry is not None and entry[0]() is dofn:
            return entry[1]
        data = pickler.dumps(dofn)
        key = id(dofn)
        try:
            alive = weakref.ref(dofn, lambda _: _forget(key, data))
        except TypeError:  # not weakly referable: pickled every time, as Beam does
            return data
        _PICKLED[key], _PICKLED_FROM[id(data)] = (alive, data), alive
        return data

    @staticmethod
    def loads(data: bytes) -> Any:
        copy = pickler.loads(data)
        original = _PICKLED_FROM.get(id(data), lambda: None)()  # alive: so are its bytes, whose id is theirs
        if original is not None:
            with contextlib.suppress(TypeError):  # unhashable, or not weakly referable: its specs are searched
                _ORIGINAL[copy] = original
        return copy


def _signature_once(function: Any) -> inspect.Signature:
    if isinstance(function, types.FunctionType):
        cache, key = _SIGNATURES, function
    elif isinstance(function, types.MethodType) and isinstance(function.__func__, types.FunctionType):
        cache, key = _BOUND_SIGNATURES, function.__func__
    else:
        return _signature(function)
    # what the signature is read from besides the code, which a function keeps
    defaults = (key.__defaults__, key.__kwdefaults__,
                key.__dict__.get("__signature__"), key.__dict__.get("__wrapped__"))
    found = cache.get(key)
    if found is None or any(a is not b for a, b in zip(found[0], defaults, strict=True)):
        found = cache[key] = (defaults, _signature(function))
    return found[1]


def _trace(boolean: bool) -> None:
    """dill's ``_trace``, which sets its logger's level only when it changes."""
    level = logging.INFO if boolean else logging.WARN
    if dill._dill.log.level != level:
        dill._dill.log.setLevel(level)


def install() -> None:
    """Put the cached answers in the place of Beam's, for this process (a test worker)."""
    userstate.get_dofn_specs = _specs_once
    transform_evaluator.get_dofn_specs = _specs_once
    transform_evaluator.pickler = _PickledOnce()
    for module in (decorators, core, ptransform, beam_util):
        module.get_signature = _signature_once
    dill._dill._trace = _trace
