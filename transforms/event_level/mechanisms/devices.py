"""ARA event-level reports per device, over the pipelines' rows (Ghazi et al. Sec. 2.2, Alg. 4 and Alg. 8).

What the Beam wiring (``transforms/event_level/reports.py``) replays, batch and streaming alike; no Beam import here.

* **Configuration** (``source_config``): an ``EventLevelSource`` row's event-level configuration as an
  ``event_level.EventLevelConfig``: unset max reports, trigger specs, windows and buckets take the source
  type's defaults (``uniform_config``, ``default_windows``); each ``TriggerSpec`` row gives every trigger data
  value it lists its windows and buckets. ``SourceCheck`` turns an invalid configuration (a
  ``ConfigurationError``, or one ``check_configuration`` refuses at the job's epsilon: information gain above
  the source type's limit, too many states) into its dead-letter reason. Configurations repeat across
  sources, so both are cached.
* **Randomized response** (``choose_randomized``): Alg. 8's s* for many sources at once. With a secure source
  (the default) every group of sources sharing a configuration takes one ``randomized_response_array`` call.
  With a seeded source each source's draw is a function of (seed, device, source id, source time) only: the
  truthful test compares the first 64 bits of ``keyed_token`` with ``truthful_threshold`` (the comparison
  ``randomized_response`` makes) and a randomized source's output is ``randbelow(|O|)`` of its
  ``keyed_child``, so batch and streaming runs, which register a device's sources in different groups,
  choose the same s*. Either way s* is independent of everything else, as Alg. 9 requires.
* **A device** (``EventLevelDevice``): the mechanism's ``EventLevelClient`` fed in ``event_order`` (time,
  sources before triggers, then id), whose reports are turned into ``EventLevelReport`` rows naming their
  source's reporting origin and destination. Inside the client a source is named by its registration number
  on the device, so sources that repeat an id keep apart.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import lru_cache

import numpy as np

from schemas.rows import EventLevelReport, EventLevelSource
from transforms.core.mechanisms.noise import RandomSource
from transforms.event_level.mechanisms.client import EventLevelClient, EventSource, EventTrigger
from transforms.event_level.mechanisms.config import (
    MAX_EVENT_LEVEL_REPORTS,
    MAX_TRIGGER_DATA,
    MODULUS,
    ConfigurationError,
    EventLevelConfig,
    TriggerDataSpec,
    default_windows,
    uniform_config,
)
from transforms.event_level.mechanisms.information_gain import check_configuration
from transforms.event_level.mechanisms.outputs import Output, count_outputs, unrank_output, unrank_outputs_array
from transforms.event_level.mechanisms.randomized_response import (
    TRUTHFUL,
    randomized_response_array,
    truthful_threshold,
)

KEY = "event_level"  # first element of every keyed draw of this client
_SOURCE, _TRIGGER = 0, 1


def _build_config(source_type: str, expiry: int, max_reports: int | None, matching: str,
                  specs: tuple | None) -> EventLevelConfig:
    if max_reports is not None and not 0 <= max_reports <= MAX_EVENT_LEVEL_REPORTS:  # before building its buckets
        raise ConfigurationError("max_reports_out_of_range", f"max_event_level_reports must be in [0, 20], "
                                 f"got {max_reports}")
    # the source type's defaults; checks the type, expiry, max reports and matching mode first
    defaults = uniform_config(source_type, expiry_seconds=expiry, max_event_level_reports=max_reports, matching=matching)
    if specs is None:
        return defaults
    values = sum(len(spec.trigger_data) for spec in specs)
    if values > MAX_TRIGGER_DATA:  # before building that many specs
        raise ConfigurationError("too_many_trigger_data", f"{values} trigger data values (at most {MAX_TRIGGER_DATA})")
    reports = defaults.max_event_level_reports
    trigger_specs = []
    for spec in specs:
        windows = spec.window_ends_seconds or default_windows(source_type, expiry)
        buckets = spec.summary_buckets or tuple(range(1, reports + 1))
        trigger_specs += [TriggerDataSpec(value, tuple(windows), tuple(buckets)) for value in spec.trigger_data]
    return EventLevelConfig(source_type, expiry, reports, tuple(trigger_specs), matching)


@lru_cache(maxsize=4096)
def _config_or_reason(source_type: str, expiry: int, max_reports: int | None, matching: str, specs: tuple | None,
                      epsilon: float | None) -> EventLevelConfig | str:
    try:
        config = _build_config(source_type, expiry, max_reports, matching, specs)
        if epsilon is not None:
            check_configuration(config, epsilon)
    except ConfigurationError as error:
        return error.reason
    return config


def config_or_reason(row: EventLevelSource, epsilon: float | None = None) -> EventLevelConfig | str:
    """The row's configuration, or the reason (a ``ConfigurationError`` reason) it is refused; with ``epsilon``
    also refused when ``check_configuration`` refuses it at that epsilon. Cached per configuration."""
    return _config_or_reason(row.source_type, row.expiry_seconds, row.max_event_level_reports,
                             row.trigger_data_matching or MODULUS, row.trigger_specs, epsilon)


def source_config(row: EventLevelSource) -> EventLevelConfig:
    """The row's configuration; a ``ConfigurationError`` when it is invalid."""
    config = config_or_reason(row)
    if isinstance(config, str):  # building it again raises the ConfigurationError with the detail
        return _build_config(row.source_type, row.expiry_seconds, row.max_event_level_reports,
                             row.trigger_data_matching or MODULUS, row.trigger_specs)
    return config


def event_source(name: str, row: EventLevelSource) -> EventSource:
    """The client's source ``name`` for the source row ``row`` (its configuration checked, ``source_config``)."""
    return EventSource(name, row.destination, row.event_time_micros, source_config(row), row.filter_data, row.priority,
                       row.reporting_origin)


class SourceCheck:
    """Job-level validation of an event-level source (``ReadEvents``' ``check``): the reason its configuration is
    refused at ``epsilon`` (None: noise off, only the configuration itself is judged), or None; triggers pass."""

    def __init__(self, epsilon: float | None) -> None:
        self.epsilon = epsilon

    def __call__(self, row) -> str | None:
        if type(row) is not EventLevelSource:
            return None
        config = config_or_reason(row, self.epsilon)
        return config if isinstance(config, str) else None


class _WholeRow:
    """A row as the last key of ``event_order``: compared by its ``repr``, which is made only for two events of a
    device with the same time, kind and id (a sort compares a key's items in turn, and stops at the first that
    differs), where making it for every event cost about 3 % of a streaming firing (measured)."""

    __slots__ = ("row",)
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, row) -> None:
        self.row = row

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _WholeRow) and repr(self.row) == repr(other.row)

    def __lt__(self, other: _WholeRow) -> bool:
        return repr(self.row) < repr(other.row)


def event_order(row) -> tuple:
    """A device's replay order: event time, sources before triggers at the same time, the id, then the whole row
    (so even identical keys order the same way in every run)."""
    if type(row) is EventLevelSource:
        return (row.event_time_micros, _SOURCE, row.source_id, _WholeRow(row))
    return (row.event_time_micros, _TRIGGER, row.trigger_id, _WholeRow(row))


def _keyed_choice(config: EventLevelConfig, epsilon: float, source: RandomSource, key: tuple) -> Output | None:
    k = count_outputs(config)
    word = int(source.keyed_token((KEY, "truthful", *key))[:16], 16)  # a uniform 64-bit word for the key
    if word < truthful_threshold(k, epsilon):
        return None
    return unrank_output(config, source.keyed_child((KEY, "output", *key)).randbelow(k))


def choose_outputs(configs: Sequence[EventLevelConfig], codes: np.ndarray, epsilon: float, random_source: RandomSource,
                   keys: Callable[[], Sequence[tuple]]) -> dict[int, Output]:
    """Alg. 8's s* for many sources, the source at position i having the configuration ``configs[codes[i]]``:
    {position: output of O} for the sources that send a random output (the others are truthful). A seeded
    source draws each source's s* from its key (device id, source id, source time), ``keys()[i]``; a secure
    source draws every configuration's sources with one ``randomized_response_array`` call."""
    chosen: dict[int, Output] = {}
    if random_source.kind != "secure":  # keyed: a function of (seed, device, source id, source time)
        for position, (code, key) in enumerate(zip(codes.tolist(), keys(), strict=True)):
            output = _keyed_choice(configs[code], epsilon, random_source, key)
            if output is not None:
                chosen[position] = output
        return chosen
    for code, config in enumerate(configs):
        positions = np.flatnonzero(codes == code)
        if not positions.size:
            continue
        ranks = randomized_response_array(config, epsilon, random_source, positions.size)
        lanes = np.flatnonzero(ranks != TRUTHFUL)
        if lanes.size:
            outputs = unrank_outputs_array(config, ranks[lanes])
            for position, output in zip(positions[lanes].tolist(), outputs.tolist(), strict=True):
                chosen[position] = tuple(output)
    return chosen


def choose_randomized(sources: Sequence[tuple[str, EventLevelSource]], epsilon: float | None,
                      random_source: RandomSource) -> list[Output | None]:
    """Alg. 8's s* for each (device id, source row): None (truthful) or an output of O (see the module docstring
    and ``choose_outputs``). All None with noise off (``epsilon`` None)."""
    if epsilon is None:
        return [None] * len(sources)
    codes: dict[EventLevelConfig, int] = {}
    positions = np.fromiter((codes.setdefault(source_config(row), len(codes)) for _, row in sources), np.int64,
                            len(sources))
    chosen = choose_outputs(list(codes), positions, epsilon, random_source,
                            lambda: [(device_id, row.source_id, row.event_time_micros) for device_id, row in sources])
    return [chosen.get(position) for position in range(len(sources))]


class EventLevelDevice:
    """One device's ARA-Event-Client (Alg. 4, with Alg. 8 when ``epsilon`` is set) over rows.

    Feed it events in ``event_order`` with the s* of each source (``choose_randomized``), in one piece (batch)
    or several (streaming: each piece after the previous one in time), then ``advance_to`` a time or
    ``flush``; every call returns the ``EventLevelReport`` rows sent meanwhile, in the order they are sent.
    """

    def __init__(self, epsilon: float | None, random_source: RandomSource | None) -> None:
        self.client = EventLevelClient(epsilon, random_source)
        self.registered = 0  # sources registered on the device so far: the client's name for the next one
        self.sources: dict[str, EventLevelSource] = {}  # the client's source name -> the source row

    def feed(self, events: Iterable, randomized: Iterable[Output | None]) -> list[EventLevelReport]:
        """Register ``events`` (in ``event_order``, none before an earlier call's); ``randomized`` holds the s* of
        their sources, in order."""
        client = self.client
        choices = iter(randomized)
        for row in events:
            if type(row) is EventLevelSource:
                name = str(self.registered)
                self.registered += 1
                self.sources[name] = row
                client.register_source(event_source(name, row), next(choices))
            else:
                client.register_trigger(EventTrigger(row.trigger_id, row.destination, row.event_time_micros,
                                                     row.trigger_data, row.value, row.filters, row.reporting_origin))
        return self._sent()

    def advance_to(self, time_micros: int) -> list[EventLevelReport]:
        """Pass every window that ends at or before ``time_micros`` (no later event may come before it)."""
        self.client.advance_to(time_micros)
        return self._sent()

    def flush(self) -> list[EventLevelReport]:
        """Pass every remaining window (the end of the input)."""
        self.client.flush()
        return self._sent()

    def next_window_micros(self) -> int | None:
        """When the next window of a source ends (None: none left)."""
        return self.client.windows[0][0] if self.client.windows else None

    def forget_expired(self) -> None:
        """Drop the sources that expired (``EventLevelClient.forget_expired``)."""
        for registered in self.client.forget_expired():
            del self.sources[registered.source.source_id]

    def _sent(self) -> list[EventLevelReport]:
        reports = self.client.reports
        rows = []
        for report in reports:
            source = self.sources[report.source_id]
            rows.append(EventLevelReport(
                source.source_id, source.reporting_origin, source.destination, report.trigger_data,
                report.window_index, report.summary_bucket, report.report_time_micros, report.randomized_trigger_rate,
            ))
        reports.clear()  # the client keeps every report it sent otherwise
        return rows


def replay_device(events: Iterable[tuple[object, Output | None]], epsilon: float | None,
                  random_source: RandomSource) -> list[EventLevelReport]:
    """One device's whole history, (row, s*) pairs of its sources and (row, None) of its triggers in any order,
    replayed in ``event_order`` to the end of time: its reports, in the order they are sent."""
    ordered = sorted(events, key=lambda pair: event_order(pair[0]))
    device = EventLevelDevice(epsilon, random_source)
    reports = device.feed([row for row, _ in ordered],
                          [choice for row, choice in ordered if type(row) is EventLevelSource])
    return reports + device.flush()


def replay_devices(devices: dict[str, list], epsilon: float | None, random_source: RandomSource,
                   stats: dict | None = None) -> Iterator[EventLevelReport]:
    """Batch: every device's whole history (rows of sources and triggers, any order) replayed in one call, the
    s* of all their sources chosen at once; the reports device by device (sorted by id), in the order sent.
    ``stats``, when given, gets the counts ``sources`` and ``randomized_sources`` added."""
    order = sorted(devices)
    sources = [(device_id, row) for device_id in order for row in devices[device_id] if type(row) is EventLevelSource]
    chosen = choose_randomized(sources, epsilon, random_source)
    add_stats(stats, len(sources), sum(choice is not None for choice in chosen))
    choices = iter(chosen)
    for device_id in order:
        yield from replay_device(
            [(row, next(choices) if type(row) is EventLevelSource else None) for row in devices[device_id]],
            epsilon, random_source)


def add_stats(stats: dict | None, sources: int, randomized: int) -> None:
    """Adds to ``stats`` (when given) the counts ``sources`` and ``randomized_sources``."""
    if stats is not None:
        stats["sources"] = stats.get("sources", 0) + sources
        stats["randomized_sources"] = stats.get("randomized_sources", 0) + randomized
