"""InspectedOnceDoFn: Beam sees the same arguments, state and timers as for a plain DoFn, read once per class."""
from __future__ import annotations

import apache_beam as beam
from apache_beam.coders import VarIntCoder
from apache_beam.runners.common import DoFnSignature
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.test_stream import TestStream
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms.core import get_function_arguments
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.transforms.userstate import BagStateSpec, TimerSpec, get_dofn_specs, on_timer

from transforms.core import inspected
from transforms.core.inspected import InspectedOnceDoFn


class _SumAtEnd:
    """A stateful DoFn's body: sums each key's values and emits the sum when the watermark passes 10."""

    VALUES = BagStateSpec("values", VarIntCoder())
    AT = TimerSpec("at", TimeDomain.WATERMARK)

    def process(self, element, values=beam.DoFn.StateParam(VALUES), at=beam.DoFn.TimerParam(AT)):
        values.add(element[1])
        at.set(10)

    @on_timer(AT)
    def emit(self, key=beam.DoFn.KeyParam, values=beam.DoFn.StateParam(VALUES)):
        yield key, sum(values.read())


class _Plain(_SumAtEnd, beam.DoFn):
    pass


class _Inspected(_SumAtEnd, InspectedOnceDoFn):
    pass


def test_beam_reads_the_same_arguments_state_and_timers():
    plain, fast = _Plain(), _Inspected()
    for method in ("process", "emit", "start_bundle", "setup"):
        assert get_function_arguments(fast, method) == get_function_arguments(plain, method)
    assert get_dofn_specs(fast) == get_dofn_specs(plain)
    assert DoFnSignature(fast).is_stateful_dofn()


def test_dir_lists_the_methods_that_declare_dofn_parameters():
    assert sorted(dir(_Inspected())) == ["emit", "process"]  # what get_dofn_specs reads (the other test: the same specs)
    assert "start_bundle" in dir(_Plain())


def test_the_arguments_are_read_once_per_class_and_method():
    fast = _Inspected()
    get_function_arguments(fast, "process")
    cached = inspected._ARGUMENTS[(_Inspected, "process")]
    assert get_function_arguments(_Inspected(), "process") is cached  # another instance: the same reading


def test_other_missing_attributes_are_still_missing():
    fast = _Inspected()
    assert not hasattr(fast, "no_such_attribute")
    assert not hasattr(fast, "_inspect_no_such_method")


def test_a_stateful_streaming_step_runs_the_same():
    stream = (TestStream().add_elements([("a", 1), ("b", 2), ("a", 3)]).advance_watermark_to(20)
              .advance_watermark_to_infinity())
    with TestPipeline(options=beam.options.pipeline_options.PipelineOptions(["--streaming"])) as pipeline:
        sums = pipeline | stream | beam.ParDo(_Inspected())
        assert_that(sums, equal_to([("a", 4), ("b", 2)]))
