"""The column-wise replay gives the reference's run record exactly (issue 21's equality tests).

``evaluation.columnar.simulate_columnar`` must give, field by field, what
``record_of(simulation.simulate(...))`` gives: the same full batches (sums,
epsilons, epochs, completion order), the same query results (same noise),
the same budget counts in exact units. Checked on the generated datasets of
every experiment (tiny sizes) and on random datasets that use every request
feature: several advertisers and queriers, campaigns or products, filter
keys, the four attribution logics, L1 and L2, dimensions 1 to 3, explicit
epochs, refused requests, a small capacity (so ARA-like refuses and Cookie
Monster drops epochs), conversions at the same time as impressions.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from evaluation import columnar
from evaluation.columnar import conversion_table, merged_windows, simulate_columnar
from evaluation.data import Dataset, dataset_of_events, load_dataset, sidecar_columns
from evaluation.run_record import RunRecord, record_of
from schemas.codecs import CONVERSION
from schemas.rows import AttributionRequest, Conversion, Impression
from schemas.time_units import MICROS_PER_DAY
from synthetic.criteo import generate_criteo
from synthetic.microbenchmark import generate_microbenchmark
from synthetic.patcg import generate_patcg
from transforms.budgeting.mechanisms.bias import BiasDetection
from transforms.budgeting.mechanisms.device import MeasurementConfig
from transforms.budgeting.mechanisms.simulation import devices_in_order, simulate
from transforms.core.mechanisms.noise import SeededSource
from transforms.core.mechanisms.time_steps import EpochClock

POLICIES = ("ipa_like", "ara_like", "cookie_monster")


def assert_same(fast: RunRecord, reference: RunRecord) -> None:
    assert fast.batches == reference.batches
    assert fast.results == reference.results
    assert sorted(fast.incomplete) == sorted(reference.incomplete)
    assert fast.batch_charged_units == reference.batch_charged_units
    for name in ("reports", "reports_paying", "reports_with_dropped_epochs", "dropped_epochs",
                 "first_requested_epsilon"):
        assert getattr(fast, name) == getattr(reference, name), name
    ours, theirs = fast.budgets, reference.budgets
    for name in ("rows", "epochs", "units_counts", "touched", "central_units"):
        assert getattr(ours, name) == getattr(theirs, name), name
    assert {q: sorted(units.tolist()) for q, units in ours.pair_units.items()} == \
        {q: sorted(units.tolist()) for q, units in theirs.pair_units.items()}


def check_equal(dataset: Dataset, batch_size: int, epoch_days: tuple, capacity: Fraction = Fraction(1),
                origin: int = 0, seed: int = 0) -> None:
    table = conversion_table(dataset)
    devices = dataset.devices
    histograms: dict = {}
    for days in epoch_days:
        for policy in POLICIES:
            config = MeasurementConfig(policy=policy, clock=EpochClock(days * MICROS_PER_DAY, origin),
                                       capacity_epsilon=capacity)
            reference = record_of(simulate(devices, config, SeededSource(seed), batch_size), policy)
            fast = simulate_columnar(table, config, SeededSource(seed), batch_size, histograms)
            assert_same(fast, reference)


def _dataset(path) -> Dataset:
    return load_dataset("test", str(path / "impressions-*"), str(path / "conversions-*"), progress=False)


def test_equal_on_the_patcg_like_dataset(tmp_path):
    stats = generate_patcg(tmp_path, scale=0.0002, seed=3, progress=False)
    check_equal(_dataset(tmp_path), stats.batch_size, (1, 7, 60))


def test_equal_on_the_criteo_like_dataset(tmp_path):
    generate_criteo(tmp_path, scale=0.002, augment=3, seed=5, progress=False)
    check_equal(_dataset(tmp_path), 40, (1, 7, 30))


def test_equal_on_the_microbenchmark(tmp_path):
    generate_microbenchmark(tmp_path, knob1=0.5, knob2=0.5, batch_size=40, products=2, seed=2, progress=False)
    check_equal(_dataset(tmp_path), 40, (7, 60))


def _random_events(rng: np.random.Generator, n_devices: int) -> list:
    """Devices with impressions and conversions drawn over 40 days, with requests using every feature."""
    advertisers = ["a.example", "b.example"]
    queriers = ["a.example", "q.example"]
    campaigns = ["c0", "c1", "c2"]
    products = ["p0", "p1"]
    keys = ["k0", "k1"]
    events = []
    day = MICROS_PER_DAY
    for d in range(n_devices):
        device = f"device-{d:03d}"
        times = rng.integers(0, 40 * day, size=rng.integers(0, 8)) // day * day  # whole days: ties with conversions
        for i, t in enumerate(times.tolist()):
            events.append(Impression(device, t, f"imp-{d}-{i}", "pub.example", str(rng.choice(advertisers)),
                                     str(rng.choice(campaigns)), str(rng.choice(products)),
                                     tuple(sorted(set(rng.choice(keys, size=rng.integers(0, 3)).tolist())))))
        for i, t in enumerate((rng.integers(0, 40 * day, size=rng.integers(0, 5)) // (day // 2) * (day // 2)).tolist()):
            logic = str(rng.choice(["last_touch", "first_touch", "equal_credit", "last_n"]))
            dimension = int(rng.integers(1, 4))
            by_campaign = rng.random() < 0.6
            explicit = rng.random() < 0.15
            window = None if rng.random() < 0.3 else int(rng.choice([1, 3, 7, 14, 30, 120]))
            first_epoch = last_epoch = None
            if explicit:
                window = None
                last_epoch = int(t // (7 * day)) - int(rng.integers(-1, 3))
                first_epoch = last_epoch - int(rng.integers(0, 20))
            epsilon = None if rng.random() < 0.05 else float(rng.choice([0.25, 0.5, 0.7, 1.5]))
            request = AttributionRequest(
                window_days=window, first_epoch=first_epoch, last_epoch=last_epoch,
                campaign_ids=tuple(campaigns[:dimension]) if by_campaign else (),
                product_id=str(rng.choice(products)),
                filter_keys=tuple(rng.choice(keys, size=rng.integers(0, 2)).tolist()),
                logic=logic, last_n=int(rng.integers(1, 3)), dimension=dimension if by_campaign else 1,
                requested_epsilon=epsilon, report_global_sensitivity=float(rng.choice([5.0, 10.0])),
                query_global_sensitivity=10.0, norm=str(rng.choice(["L1", "L2"])),
                query_key=str(rng.choice(["x", "y"])))
            events.append(Conversion(device, t, f"conv-{rng.integers(0, 10**6):06d}-{d}-{i}",
                                     str(rng.choice(advertisers)), str(rng.choice(queriers)),
                                     float(rng.choice([1.0, 2.5, 7.0, 12.0])), str(rng.choice(products)), request))
    return events


@pytest.mark.parametrize("seed", range(6))
def test_equal_on_random_datasets_using_every_request_feature(seed):
    rng = np.random.default_rng(seed)
    events = _random_events(rng, 60)
    dataset = dataset_of_events("random", events)
    assert dataset.devices == devices_in_order(events)  # the columns give back the events, in replay order
    capacity = Fraction(1) if seed % 2 else Fraction(3, 2)
    check_equal(dataset, int(rng.integers(2, 6)), (1, 7, 30), capacity=capacity, origin=int(seed) * 3600 * 10**6,
                seed=seed)
    # the data reach the paths that matter: refused requests, ARA-like reports that cannot pay
    table = conversion_table(dataset)
    ara = simulate_columnar(table, MeasurementConfig(policy="ara_like", capacity_epsilon=capacity), SeededSource(0), 3)
    assert 0 < ara.reports < table.time.size and ara.reports_with_dropped_epochs > 0


def test_bias_detection_is_left_to_the_reference():
    config = MeasurementConfig(policy="cookie_monster", bias=BiasDetection(Fraction(1), "epochs", 0.05, True))
    with pytest.raises(ValueError, match="reference"):
        simulate_columnar(conversion_table(dataset_of_events("none", [])), config, SeededSource(0), 10)


def test_merged_windows_and_shared_epochs():
    group = np.array([0, 0, 0, 1, 1, 2])
    first = np.array([0, 5, 3, 0, 1, 4])
    last = np.array([2, 6, 5, 0, 2, 4])
    (g, f, l_), shared = merged_windows(group, first, last)
    # disjoint (not necessarily apart) intervals: what the device-epoch counts need
    assert list(zip(g.tolist(), f.tolist(), l_.tolist(), strict=True)) == [
        (0, 0, 2), (0, 3, 6), (1, 0, 0), (1, 1, 2), (2, 4, 4)]
    assert shared.tolist() == [False, True, True, False, False, False]  # [5, 6] and [3, 5] share epoch 5


@pytest.mark.parametrize("generate", [
    lambda path, **files: generate_patcg(path, scale=0.0002, seed=1, progress=False, **files),
    lambda path, **files: generate_criteo(path, scale=0.002, augment=2, seed=1, progress=False, **files),
    lambda path, **files: generate_microbenchmark(path, knob1=0.5, knob2=0.5, batch_size=30, products=2, seed=1,
                                                  progress=False, **files),
], ids=["patcg", "criteo", "microbenchmark"])
def test_column_sidecars_give_what_reading_the_files_gives(tmp_path, generate):
    generate(tmp_path / "with", sidecars=True)
    generate(tmp_path / "alone", sidecars=True, event_files=False)
    generate(tmp_path / "without")
    read = _dataset(tmp_path / "without")
    assert sorted(p.name for p in (tmp_path / "with" / "columns").iterdir()) == \
        sorted(f"{p.name}.npz" for p in (tmp_path / "with").glob("*.avro"))
    assert not list((tmp_path / "alone").glob("*.avro"))
    for variant in ("with", "alone"):
        loaded = _dataset(tmp_path / variant)
        assert loaded.devices == read.devices
        assert loaded.population == read.population
        assert (loaded.read, loaded.impressions, loaded.conversions) == \
            (read.read, read.impressions, read.conversions)


def test_a_sidecar_is_ignored_once_its_file_changed(tmp_path):
    generate_patcg(tmp_path, scale=0.0002, seed=1, progress=False, sidecars=True)
    conversions = next(tmp_path.glob("conversions-*.avro"))
    assert sidecar_columns(str(conversions), CONVERSION) is not None
    data = conversions.read_bytes()
    conversions.write_bytes(data[: len(data) // 2])  # a truncated file: its last records are unreadable
    assert sidecar_columns(str(conversions), CONVERSION) is None
    dataset = _dataset(tmp_path)
    assert dataset.dead_letters == {"malformed_avro": 1}


def test_the_replay_in_two_processes_gives_the_same_records(monkeypatch):
    monkeypatch.setattr(columnar, "PARALLEL_FROM", 1)
    monkeypatch.setattr(columnar, "REPLAY_WORKERS", 2)
    dataset = dataset_of_events("random", _random_events(np.random.default_rng(11), 80))
    check_equal(dataset, 3, (7,), capacity=Fraction(1))
