"""Sample per-key state of every streaming stage, taken half-way through a real replay, and the rest of the replay.

Each sample is built by the mechanisms themselves on seeded data (so it is the same at every run): ``before()``
is the state after the first half of a key's events (with events still buffered where the stage buffers), and
``after(state)`` replays the second half from that state and returns its outputs. A state that survives its
record restores exactly when ``after`` gives the same outputs from the restored state as from the original.

``python -m tests.support.state_samples`` writes the records of the current layout to ``tests/fixtures/state/
v<STATE_VERSION>/`` (commit them when the layout gets a new version; earlier versions' files stay, so that every
later version is tested against them).
"""
from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from schemas.rows import DeviceEpochBudget, EventLevelSource, Impression
from schemas.time_units import MICROS_PER_DAY
from tests.support.event_level_events import random_events as random_event_level
from tests.support.measurement_data import random_population
from tests.support.summary_events import random_ara, random_paa
from transforms.budgeting.mechanisms.device import DeviceState, MeasurementConfig, Scheduling, replay, sort_events
from transforms.budgeting.mechanisms.policies import make_policy
from transforms.budgeting.state import QueriesRecord, device_codec, queries_codec
from transforms.core.device_state import DeviceRecord
from transforms.core.mechanisms.noise import SeededSource, TruncatedLaplace
from transforms.core.state import STATE_VERSION, StateCodec
from transforms.event_level.mechanisms.devices import EventLevelDevice, choose_randomized, event_order
from transforms.event_level.state import device_record_codec_for
from transforms.kanon.mechanisms.above_threshold import AboveThreshold, AboveThresholdWithPeriodicRestart
from transforms.kanon.mechanisms.group_replay import GroupVerdicts, KAnonParameters
from transforms.kanon.state import group_state_codec
from transforms.summary_reports.mechanisms.ara_client import AraSummaryClient
from transforms.summary_reports.mechanisms.contributions import ContributionLimits
from transforms.summary_reports.mechanisms.paa_client import PaaSummaryClient, ReachCounting
from transforms.summary_reports.state import client_record_codec

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "state"
SEED = 11


@dataclass(frozen=True)
class StateSample:
    codec: StateCodec
    before: Callable[[], Any]
    after: Callable[[Any], list]


def _halves(items: list) -> tuple[list, list]:
    return items[: len(items) // 2], items[len(items) // 2:]


# k-anonymity: one group, w = 4, k = 5, with noise drawn (a latched instance and a running one).
KANON = KAnonParameters(AboveThresholdWithPeriodicRestart(AboveThreshold(
    k=5, window_steps=4, threshold_noise=TruncatedLaplace(2.0, 0.1), step_noise=TruncatedLaplace(2.0, 0.1),
)), emit="all")
KANON_STEPS = [(step, {f"u{(step * 7 + i) % 13}" for i in range(step % 9)}) for step in range(0, 23, 1)]


def _kanon_before() -> GroupVerdicts:
    replay = GroupVerdicts("https://dsp.example/ig/1", KANON, SeededSource(SEED))
    list(replay.run(KANON_STEPS[:11], through=10))
    return replay


def _kanon_after(replay: GroupVerdicts) -> list:
    return list(replay.run(KANON_STEPS[11:]))


# The summary-report clients: one device, its first half replayed, the second half buffered behind the cut.
ARA = AraSummaryClient(ContributionLimits(l0=3, l1=50_000))
PAA = PaaSummaryClient(ReachCounting(30_000))


def _client_before(client, rows: list) -> Callable[[], DeviceRecord]:
    def before() -> DeviceRecord:
        events = sorted(rows, key=client.order)
        first, rest = _halves(events)
        record = DeviceRecord(client.new_state())
        device_id = first[0].device_id
        list(client.replay(device_id, first, record.state, SeededSource(SEED)))
        record.cut = first[-1].event_time_micros + 1
        record.items = [(event.event_time_micros, event) for event in rest]
        return record
    return before


def _client_after(client) -> Callable[[DeviceRecord], list]:
    def after(record: DeviceRecord) -> list:
        events = sorted(record.advance(2**62, []), key=client.order)
        return list(client.replay(events[0].device_id, events, record.state, SeededSource(SEED + 1)))
    return after


def _one_device(rows: list) -> list:
    device = max(sorted({row.device_id for row in rows}), key=lambda d: sum(row.device_id == d for row in rows))
    return [row for row in rows if row.device_id == device]


ARA_ROWS = _one_device(random_ara(seed=5, devices=4))
PAA_ROWS = _one_device(random_paa(seed=3, devices=4))


# Event-level reports: one device with randomized response on (epsilon 1).
EVENT_LEVEL_ROWS = sorted(_one_device(random_event_level(seed=4, devices=3, per_device=16)), key=event_order)


def _event_level_before() -> DeviceRecord:
    first, rest = _halves(EVENT_LEVEL_ROWS)
    device = EventLevelDevice(1.0, SeededSource(SEED))
    sources = [(row.device_id, row) for row in first if type(row) is EventLevelSource]
    device.feed(first, choose_randomized(sources, 1.0, SeededSource(SEED)))
    device.advance_to(first[-1].event_time_micros)
    record = DeviceRecord(device)
    record.cut = first[-1].event_time_micros + 1
    record.items = [(row.event_time_micros, row) for row in rest]
    return record


def _event_level_after(record: DeviceRecord) -> list:
    events = sorted(record.advance(2**62, []), key=event_order)
    sources = [(row.device_id, row) for row in events if type(row) is EventLevelSource]
    device = record.state
    return device.feed(events, choose_randomized(sources, 1.0, SeededSource(SEED + 1))) + device.flush()


# On-device budgeting: one device's impressions and conversions under Cookie Monster.
IMPRESSIONS, CONVERSIONS = random_population(seed=1, devices=8, days=40)
BUDGET_CONFIG = MeasurementConfig()
BUDGET_ROWS = sort_events(_one_device([*IMPRESSIONS, *CONVERSIONS]))


# The same device under the W3C Attribution API's budgets with Big Bird's quotas, tight enough to refuse epochs,
# every other impression saved by an intermediary that lets only the advertiser measure it.
API_CONFIG = MeasurementConfig(policy="big_bird", global_epsilon=Fraction(3, 5), impression_quota_epsilon=Fraction(2, 5),
                               conversion_quota_epsilon=Fraction(1, 2))
# ... and with Big Bird's batched scheduling (daily batches, 3 attempts, the global budget released in 4 slices).
SCHEDULED_CONFIG = dataclasses.replace(API_CONFIG, scheduling=Scheduling(MICROS_PER_DAY, attempts=3, releases=4))
API_ROWS = [row._replace(intermediary_site="adtech.example", conversion_callers=(row.advertiser_site,))
            if type(row) is Impression and index % 2 else row for index, row in enumerate(BUDGET_ROWS)]


def _budget_before(config: MeasurementConfig, rows: list) -> Callable[[], DeviceRecord]:
    def before() -> DeviceRecord:
        first, rest = _halves(rows)
        record = DeviceRecord(DeviceState(config.new_filters()))
        record.cut = first[-1].event_time_micros + 1
        list(replay(first[0].device_id, first, record.state, config, make_policy(config.policy), SeededSource(SEED),
                    until_micros=record.cut))
        record.items = [(row.event_time_micros, row) for row in rest]
        return record

    return before


def _budget_after(config: MeasurementConfig) -> Callable[[DeviceRecord], list]:
    def after(record: DeviceRecord) -> list:
        events = sort_events(record.advance(2**62, []))
        reports = list(replay(events[0].device_id, events, record.state, config, make_policy(config.policy),
                              SeededSource(SEED + 1)))
        return [*reports, sorted(record.state.filters.consumed.items()), sorted(record.state.occupied)]

    return after


# The querier's side: reports of one (querier, query key) cut into batches of 3; one querier's waiting batches.
def _reports() -> list:
    events = sort_events([*IMPRESSIONS, *CONVERSIONS])
    reports = []
    for device_id in sorted({row.device_id for row in events}):
        device = DeviceState(BUDGET_CONFIG.new_filters())
        reports += replay(device_id, [row for row in events if row.device_id == device_id], device, BUDGET_CONFIG,
                          make_policy(BUDGET_CONFIG.policy), SeededSource(SEED))
    return reports


REPORTS = _reports()
QUERIER, QUERY_KEY = REPORTS[0].querier_site, REPORTS[0].query_key


def _queries_before() -> QueriesRecord:
    record = QueriesRecord(3)
    record.cutter(QUERIER, QUERY_KEY).add(REPORTS[:4])
    record.central = {(QUERIER, 2900): 10**11, (QUERIER, 2901): 0}
    record.rows = [DeviceEpochBudget(QUERIER, "device-1", 2900, 0.25, 1.0)]
    return record


def _queries_after(record: QueriesRecord) -> list:
    cutter = record.cutter(QUERIER, QUERY_KEY)
    return [*cutter.add(REPORTS[4:8]), cutter.incomplete(), sorted(record.central.items()), record.rows]


SAMPLES: dict[str, StateSample] = {
    "kanon_group": StateSample(group_state_codec(KANON, SeededSource(SEED)), _kanon_before, _kanon_after),
    "ara_device": StateSample(client_record_codec(ARA), _client_before(ARA, ARA_ROWS), _client_after(ARA)),
    "paa_device": StateSample(client_record_codec(PAA), _client_before(PAA, PAA_ROWS), _client_after(PAA)),
    "event_level_device": StateSample(device_record_codec_for(1.0, SeededSource(SEED)), _event_level_before,
                                      _event_level_after),
    "budget_device": StateSample(device_codec(BUDGET_CONFIG), _budget_before(BUDGET_CONFIG, BUDGET_ROWS),
                                 _budget_after(BUDGET_CONFIG)),
    "budget_device_big_bird": StateSample(device_codec(API_CONFIG), _budget_before(API_CONFIG, API_ROWS),
                                          _budget_after(API_CONFIG)),
    "budget_device_scheduled": StateSample(device_codec(SCHEDULED_CONFIG), _budget_before(SCHEDULED_CONFIG, API_ROWS),
                                           _budget_after(SCHEDULED_CONFIG)),
    "measurement_queries": StateSample(queries_codec(3), _queries_before, _queries_after),
}


def write_fixtures(directory: Path = FIXTURES / f"v{STATE_VERSION}") -> list[Path]:
    """Write every sample's record of the current layout; returns the paths."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, sample in SAMPLES.items():
        path = directory / f"{name}.binpb"
        path.write_bytes(sample.codec.encode(sample.before()))
        paths.append(path)
    return paths


if __name__ == "__main__":
    for written in write_fixtures():
        print(written)
    sys.exit(0)
