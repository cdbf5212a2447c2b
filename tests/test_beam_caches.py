"""The test process's caches of Beam's repeated work (tests/support/beam_caches.py) answer what Beam answers:
installed by tests/conftest.py, they are the functions these tests call through Beam's own names. Deterministic."""
from __future__ import annotations

import inspect
import logging

import apache_beam as beam
import dill
from apache_beam.internal import pickler
from apache_beam.runners.direct import transform_evaluator
from apache_beam.transforms import userstate
from apache_beam.transforms.userstate import BagStateSpec, TimerSpec, on_timer
from apache_beam.typehints import decorators

from tests.support import beam_caches


class _Buffering(beam.DoFn):
    BUFFER = BagStateSpec("buffer", beam.coders.VarIntCoder())
    FLUSH = TimerSpec("flush", userstate.TimeDomain.WATERMARK)

    def process(self, element, buffer=beam.DoFn.StateParam(BUFFER), flush=beam.DoFn.TimerParam(FLUSH)):
        buffer.add(element[1])

    @on_timer(FLUSH)
    def flushed(self, buffer=beam.DoFn.StateParam(BUFFER)):
        yield sum(buffer.read())


def test_beams_names_are_the_caches():
    assert userstate.get_dofn_specs is transform_evaluator.get_dofn_specs is beam_caches._specs_once
    assert decorators.get_signature is beam_caches._signature_once
    assert isinstance(transform_evaluator.pickler, beam_caches._PickledOnce)


def test_a_signature_is_inspects_and_follows_a_function_whose_defaults_change():
    def scaled(value, factor=2):
        return value * factor

    assert decorators.get_signature(scaled) == inspect.signature(scaled)
    assert decorators.get_signature(scaled) is decorators.get_signature(scaled)  # the cached answer
    scaled.__defaults__ = (3,)
    assert decorators.get_signature(scaled).parameters["factor"].default == 3
    bound = _Buffering().process
    assert decorators.get_signature(bound) == inspect.signature(bound)  # without self
    assert decorators.get_signature(str.strip) == beam_caches._signature(str.strip)  # not a function: Beam's own


def test_a_dofn_is_pickled_once_and_each_bundle_gets_a_copy_with_the_originals_specs():
    dofn = _Buffering()
    evaluator_pickler = transform_evaluator.pickler
    data = evaluator_pickler.dumps(dofn)
    assert evaluator_pickler.dumps(dofn) is data
    assert pickler.loads(data).__class__ is _Buffering
    first, second = evaluator_pickler.loads(data), evaluator_pickler.loads(data)
    assert first is not second and first is not dofn
    assert userstate.get_dofn_specs(first) == userstate.get_dofn_specs(dofn) == beam_caches._search_specs(dofn)
    assert {spec.name for spec in userstate.get_dofn_specs(second)[0]} == {"buffer"}


def test_dills_trace_sets_the_level_it_is_asked_for():
    log = dill._dill.log
    try:
        dill._dill._trace(True)
        assert log.level == logging.INFO
        dill._dill._trace(False)
        dill._dill._trace(False)
        assert log.level == logging.WARN
    finally:
        log.setLevel(logging.WARN)
