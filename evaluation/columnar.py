"""The evaluation's replay computed column-wise: the reference's run record without a Python object per report.

``simulation.simulate`` replays every conversion of every device in Python
(Cookie Monster paper Appendix A Alg. 1); at the paper's scale (PATCG-like:
24M conversions, 1 % of them attributable) that is the whole cost. Yet most
conversions have no impression of their advertiser on their device inside
their window: their report is all zeros under every policy, and only
ARA-like makes them pay (the full epsilon on every epoch of the window, all
or nothing). ``simulate_columnar`` therefore computes, for one run point:

1. every conversion's window, as arrays (``resolve_request`` column-wise);
   refused requests produce no report, as in the reference;
2. the *candidates*: conversions whose device holds an impression of their
   advertiser at or before them and in their window's epochs (a superset of
   those with a relevant impression, Code Listing 1 step 1);
3. the candidates' reports by the reference code itself (``device.replay``)
   on their devices' impressions and candidate conversions. Under Cookie
   Monster the other conversions charge nothing (Thm. 4 case 1: no relevant
   event, zero loss), so the filters see exactly the charges of the full
   replay. IPA-like's and ARA-like's histograms do not depend on budget state:
   both are the attribution of every relevant event (ARA-like's when it pays);
4. ARA-like's payments per (device, querier) in integer units: groups whose
   windows never share an epoch pay report by report (a report pays when its
   charge fits the capacity); the others run through a loop in event order;
5. the batches of B in report order, their sums (``math.fsum`` of the nonzero
   histograms: zeros change no correctly rounded sum), epsilons, sensitivities
   and epochs, and the queries by ``queries.run_queries`` itself (the same
   noise, the same IPA-like central budget).

Bias detection (Appendix D) and accuracy targets are left to the reference
(``supports``). The tests hold the records of the two equal, field by field.
"""
from __future__ import annotations

import math
import multiprocessing
import os
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np

from evaluation.data import DEFAULT_WORKERS, Dataset
from evaluation.run_record import DeviceBudgets, RunRecord
from schemas.rows import AttributionRequest, IncompleteBatch
from schemas.time_units import MICROS_PER_DAY
from transforms.budgeting.mechanisms.device import DeviceState, MeasurementConfig, replay
from transforms.budgeting.mechanisms.policies import make_policy, scaled_loss_units
from transforms.budgeting.mechanisms.queries import CentralBudget, QueryBatch, batch_order, run_queries
from transforms.core.mechanisms.noise import RandomSource, SeededSource

NO_IMPRESSION = np.iinfo(np.int64).min
_NO_SOURCE = SeededSource(0)  # the replay of candidates names no report (``report_ids=False``): never drawn from


@dataclass
class ConversionTable:
    """A dataset's conversions as the runs need them (one entry per conversion, in device then replay order, as
    in ``Dataset``), derived once and shared by every run point."""

    dataset: Dataset
    requests: list[AttributionRequest]  # the distinct requests
    queriers: list[str]
    device: np.ndarray  # index of the converting device
    time: np.ndarray  # event time, microseconds
    request: np.ndarray  # index into requests
    querier: np.ndarray  # index into queriers
    last_impression: np.ndarray  # time of the device's latest impression of the advertiser at or before it
    query: np.ndarray  # index into query_keys: the (querier, query key) the report goes to
    query_keys: list[tuple[str, str]]
    report_order: np.ndarray  # every conversion by (query, then report order: time, device id, conversion id)


def conversion_table(dataset: Dataset) -> ConversionTable:
    """The conversion columns of ``dataset`` with their requests, queriers and latest prior impressions."""
    kinds = dataset.conversion_kinds  # (advertiser, querier, product, request)
    requests = list(dict.fromkeys(kind[3] for kind in kinds))
    queriers = list(dict.fromkeys(kind[1] for kind in kinds))
    advertisers = list(dict.fromkeys([kind[0] for kind in kinds] +
                                     [kind[1] for kind in dataset.impression_kinds]))
    request_of = np.array([requests.index(kind[3]) for kind in kinds] or [0], dtype=np.int64)
    querier_of = np.array([queriers.index(kind[1]) for kind in kinds] or [0], dtype=np.int64)
    advertiser_of = np.array([advertisers.index(kind[0]) for kind in kinds] or [0], dtype=np.int64)
    imp_advertiser_of = np.array([advertisers.index(kind[1]) for kind in dataset.impression_kinds] or [0],
                                 dtype=np.int64)
    kind = dataset.conversion_kind
    query_keys = list(dict.fromkeys((kind[1], kind[3].query_key) for kind in kinds))
    query_of = np.array([query_keys.index((kind[1], kind[3].query_key)) for kind in kinds] or [0], dtype=np.int64)
    query = query_of[kind]
    n = len(advertisers)
    return ConversionTable(
        dataset=dataset, requests=requests, queriers=queriers, device=dataset.conversion_device,
        time=dataset.conversion_time, request=request_of[kind], querier=querier_of[kind],
        last_impression=_last_impression(dataset.conversion_device * n + advertiser_of[kind], dataset.conversion_time,
                                         dataset.impression_device * n + imp_advertiser_of[dataset.impression_kind],
                                         dataset.impression_time),
        query=query, query_keys=query_keys,
        report_order=np.lexsort((dataset.conversion_id, dataset.conversion_device, dataset.conversion_time, query)),
    )


def _last_impression(conv_code: np.ndarray, conv_time: np.ndarray, imp_code: np.ndarray,
                     imp_time: np.ndarray) -> np.ndarray:
    """Per conversion, the time of the latest impression with the same (device, advertiser) code at or before
    it (impressions come first at equal times, as in the replay order), or ``NO_IMPRESSION``."""
    code = np.concatenate([imp_code, conv_code])
    when = np.concatenate([imp_time, conv_time])
    is_conversion = np.concatenate([np.zeros(imp_code.size, bool), np.ones(conv_code.size, bool)])
    order = np.lexsort((is_conversion, when, code))
    latest = np.where(is_conversion[order], -1, np.arange(order.size))
    np.maximum.accumulate(latest, out=latest)
    found = np.full(conv_code.size, NO_IMPRESSION, dtype=np.int64)
    at = np.flatnonzero(is_conversion[order])
    prior = latest[at]
    same = (prior >= 0) & (code[order][np.maximum(prior, 0)] == code[order][at])
    found[order[at[same]] - imp_code.size] = when[order][prior[same]]
    return found


def supports(config: MeasurementConfig) -> bool:
    """Whether ``simulate_columnar`` computes runs of ``config`` (not bias detection, not accuracy targets)."""
    return config.bias is None and config.accuracy is None


@dataclass(frozen=True)
class Windows:
    """The servable conversions (indices into the table, in table order) and their windows' epochs."""

    served: np.ndarray
    first: np.ndarray
    last: np.ndarray


def resolve_windows(table: ConversionTable, config: MeasurementConfig) -> Windows:
    """``device.resolve_request`` column-wise: the conversions whose request is served, with their windows."""
    clock = config.clock
    explicit = np.array([r.first_epoch is not None for r in table.requests], dtype=bool)
    days = np.array([config.default_window_days if r.window_days is None else r.window_days
                     for r in table.requests], dtype=np.int64)
    first_given = np.array([r.first_epoch or 0 for r in table.requests], dtype=np.int64)
    last_given = np.array([r.last_epoch or 0 for r in table.requests], dtype=np.int64)
    no_epsilon = np.array([r.requested_epsilon is None for r in table.requests], dtype=bool)
    request, time = table.request, table.time
    epoch_now = (time - clock.origin_micros) // clock.length_micros
    is_explicit = explicit[request]
    first = np.where(is_explicit, first_given[request],
                     (time - days[request] * MICROS_PER_DAY - clock.origin_micros) // clock.length_micros)
    last = np.where(is_explicit, last_given[request], epoch_now)
    oldest = (time - config.max_window_micros - clock.origin_micros) // clock.length_micros
    refused = np.where(is_explicit, (last > epoch_now) | (first < oldest), days[request] > config.max_window_days)
    served = np.flatnonzero(~(refused | no_epsilon[request]))
    return Windows(served, first[served], last[served])


@dataclass(frozen=True)
class Replayed:
    """The reference replay of the candidates: per candidate (in table order) its histogram, the units it
    charged and its dropped epochs, and every nonzero filter as (device, querier, epoch, units)."""

    candidates: np.ndarray
    histograms: list[tuple]
    charged: np.ndarray
    dropped: np.ndarray
    consumed: list[tuple[int, int, int, int]]


REPLAY_WORKERS = min(os.cpu_count() or 1, DEFAULT_WORKERS)  # processes replaying devices at once
PARALLEL_FROM = 20_000  # candidates: below this, one process (forking costs more than it saves)
_JOB: tuple | None = None  # the replay the forked workers share (set before they fork, read-only)


def _replay(table: ConversionTable, candidates: np.ndarray, config: MeasurementConfig, policy_name: str) -> tuple:
    """The reference replay of ``candidates`` (ascending): per candidate its histogram, charge and dropped
    epochs, and the nonzero filters."""
    policy = make_policy(policy_name)
    querier_index = {q: i for i, q in enumerate(table.queriers)}
    histograms: list[tuple] = []
    charged: list[int] = []
    dropped: list[int] = []
    consumed: list[tuple[int, int, int, int]] = []
    for device, device_id, events in table.dataset.device_events(candidates):
        state = DeviceState(config.new_filters())
        for report in replay(device_id, events, state, config, policy, _NO_SOURCE, report_ids=False):
            histograms.append(report.histogram)
            charged.append(report.charged_units)
            dropped.append(report.dropped_epochs)
        consumed += [(device, querier_index[q], epoch, units) for (q, epoch), units in state.filters.items() if units]
    assert len(histograms) == candidates.size
    return histograms, charged, dropped, consumed


def _replay_shard(bounds: tuple[int, int]) -> tuple:
    assert _JOB is not None
    table, candidates, config, policy_name = _JOB
    return _replay(table, candidates[bounds[0]:bounds[1]], config, policy_name)


def replay_candidates(table: ConversionTable, windows: Windows, config: MeasurementConfig,
                      policy_name: str) -> Replayed:
    """Step 3 of the module docstring: ``device.replay`` on each candidate's device, its impressions and its
    candidate conversions (the others are left out: they change no filter and get an all-zero report). Devices
    are independent: ``REPLAY_WORKERS`` forked processes replay contiguous shards of them."""
    global _JOB
    clock = config.clock
    window_start = clock.origin_micros + windows.first * clock.length_micros
    candidates = windows.served[table.last_impression[windows.served] >= window_start]
    if REPLAY_WORKERS < 2 or candidates.size < PARALLEL_FROM:
        parts = [_replay(table, candidates, config, policy_name)]
    else:
        devices = table.device[candidates]
        cuts = [0] + [int(np.searchsorted(devices, devices[candidates.size * k // REPLAY_WORKERS]))
                      for k in range(1, REPLAY_WORKERS)] + [candidates.size]
        _JOB = (table, candidates, config, policy_name)
        try:
            with ProcessPoolExecutor(REPLAY_WORKERS, mp_context=multiprocessing.get_context("fork")) as pool:
                parts = list(pool.map(_replay_shard, zip(cuts[:-1], cuts[1:], strict=True)))
        finally:
            _JOB = None
    return Replayed(candidates, [h for part in parts for h in part[0]],
                    np.array([c for part in parts for c in part[1]], dtype=np.int64),
                    np.array([d for part in parts for d in part[2]], dtype=np.int64),
                    [entry for part in parts for entry in part[3]])


def _groups(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Starts and stops of the runs of equal values in sorted ``keys``."""
    if not keys.size:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    return starts, np.r_[starts[1:], keys.size]


def merged_windows(group: np.ndarray, first: np.ndarray, last: np.ndarray):
    """The union of the windows ``[first, last]`` of each group as disjoint intervals (group, first, last), and
    per window whether it shares an epoch with another window of its group."""
    order = np.lexsort((first, group))
    g, f, l_ = group[order], first[order], last[order]
    low = int(f.min()) if f.size else 0
    stride = int(l_.max()) - low + 2 if f.size else 1
    offset = g * stride - low  # once offset, windows of different groups can never meet
    reach = np.maximum.accumulate(l_ + offset)
    overlaps_before = f + offset <= np.r_[np.iinfo(np.int64).min, reach[:-1]]
    new = ~overlaps_before
    starts = np.flatnonzero(new)
    ends = np.r_[starts[1:], f.size] - 1
    merged = (g[starts], f[starts], reach[ends] - offset[starts])
    run_of = np.cumsum(new) - 1  # the windows of one run of merged windows share epochs pairwise along the run
    run_shared = np.bincount(run_of, weights=overlaps_before, minlength=starts.size) > 0
    shared = np.zeros(f.size, dtype=bool)
    shared[order] = run_shared[run_of]
    return merged, shared


def touched_counts(queriers: np.ndarray, first: np.ndarray, last: np.ndarray, n_queriers: int) -> np.ndarray:
    """How many of the disjoint-per-group intervals cover each (querier, epoch), as an array indexed
    [querier, epoch - first.min()]."""
    low = int(first.min())
    width = int(last.max()) - low + 2
    starts = np.bincount(queriers * width + (first - low), minlength=n_queriers * width)
    stops = np.bincount(queriers * width + (last - low + 1), minlength=n_queriers * width)
    return np.cumsum((starts - stops).reshape(n_queriers, width), axis=1)[:, :-1]


def _ara_payments(table: ConversionTable, windows: Windows, group: np.ndarray, shared: np.ndarray,
                  config: MeasurementConfig):
    """Step 4: whether each served conversion's ARA-like report paid (all its epochs could take the full
    requested epsilon), and the nonzero filters as a count per consumed amount and a total per group."""
    requests = table.requests
    full_of = np.array([scaled_loss_units(r.requested_epsilon, r.query_global_sensitivity,
                                          r.query_global_sensitivity) if r.requested_epsilon is not None else 0
                        for r in requests], dtype=np.int64)
    full = full_of[table.request[windows.served]]
    capacity = config.capacity_units
    paid = (full <= capacity) & ~shared
    epochs = windows.last - windows.first + 1
    counts: Counter = Counter()  # a lone paid window: each of its epochs consumed exactly its charge
    for value, keys in zip(*_sum_by(full[paid], epochs[paid]), strict=True):
        counts[value] += keys
    group_units = {}
    alone = np.flatnonzero(paid)
    for g, units in zip(*_sum_by(group[alone], full[alone] * epochs[alone]), strict=True):
        group_units[g] = units
    looped = np.flatnonzero(shared)  # table order within a group is event order
    looped = looped[np.argsort(group[looped], kind="stable")]
    g_l, f_l, l_l, u_l = (group[looped].tolist(), windows.first[looped].tolist(), windows.last[looped].tolist(),
                          full[looped].tolist())
    current, spent = None, {}
    for i, (g, f, last, units) in enumerate(zip(g_l, f_l, l_l, u_l, strict=True)):
        if g != current:
            _close(current, spent, counts, group_units)
            current, spent = g, {}
        if all(spent.get(e, 0) + units <= capacity for e in range(f, last + 1)):
            for e in range(f, last + 1):
                spent[e] = spent.get(e, 0) + units
            paid[looped[i]] = True
    _close(current, spent, counts, group_units)
    return paid, full * epochs * paid, counts, group_units


def _close(group, spent: dict, counts: Counter, group_units: dict) -> None:
    for units in spent.values():
        if units:
            counts[units] += 1
    total = sum(spent.values())
    if group is not None and total:
        group_units[group] = group_units.get(group, 0) + total


def _sum_by(keys: np.ndarray, values: np.ndarray) -> tuple[list, list]:
    """Exact integer sums of ``values`` per distinct key."""
    if not keys.size:
        return [], []
    order = np.argsort(keys, kind="stable")
    starts, _ = _groups(keys[order])
    return keys[order][starts].tolist(), np.add.reduceat(values[order], starts).tolist()


def simulate_columnar(table: ConversionTable, config: MeasurementConfig, source: RandomSource, batch_size: int,
                      histogram_cache: dict | None = None) -> RunRecord:
    """The ``RunRecord`` that ``record_of(simulate(devices, config, source, batch_size))`` gives, column-wise.

    ``histogram_cache`` (shared by the run points on one table) keeps the unbudgeted replay of each epoch clock:
    ARA-like's histograms are IPA-like's."""
    if not supports(config):
        raise ValueError("the column-wise replay does not do bias detection or accuracy targets; use the reference")
    windows = resolve_windows(table, config)
    served = windows.served
    n_queriers = len(table.queriers)
    group = table.device[served] * n_queriers + table.querier[served]  # (device, querier)
    merged, shared = merged_windows(group, windows.first, windows.last)

    # Step 3: the candidates' reports
    policy = config.policy
    replay_policy = "cookie_monster" if policy == "cookie_monster" else "ipa_like"
    cache = histogram_cache if histogram_cache is not None and replay_policy == "ipa_like" else {}
    key = (config.clock, config.default_window_days, config.max_window_days)
    if key not in cache:
        cache[key] = replay_candidates(table, windows, config, replay_policy)
    replayed: Replayed = cache[key]
    slot = np.full(table.time.size, -1, dtype=np.int64)
    slot[replayed.candidates] = np.arange(replayed.candidates.size)
    slot = slot[served]  # per served conversion: its candidate slot, or -1

    # Step 4 and the device budgets
    central = None
    if policy == "ara_like":
        paid, charged, counts, group_units = _ara_payments(table, windows, group, shared, config)
        epochs = windows.last - windows.first + 1
        dropped = np.where(paid, 0, epochs)
        histogram_ok = paid
    else:
        charged = np.zeros(served.size, dtype=np.int64)
        dropped = np.zeros(served.size, dtype=np.int64)
        has = slot >= 0
        charged[has] = replayed.charged[slot[has]]
        dropped[has] = replayed.dropped[slot[has]]
        counts = Counter(units for *_, units in replayed.consumed)
        group_units = {}
        for d, q, _, units in replayed.consumed:
            g = d * n_queriers + q
            group_units[g] = group_units.get(g, 0) + units
        histogram_ok = np.ones(served.size, dtype=bool)
    m_group, m_first, m_last = merged
    touched: dict[tuple[str, int], int] = {}
    if m_group.size:
        low = int(m_first.min())
        covered = touched_counts(m_group % n_queriers, m_first, m_last, n_queriers)
        for q, e in zip(*np.nonzero(covered), strict=True):
            touched[(table.queriers[int(q)], int(e) + low)] = int(covered[q, e])
    pair_units: dict[str, list] = {}
    for g, units in group_units.items():
        pair_units.setdefault(table.queriers[g % n_queriers], []).append(units)
    rows = int(np.sum(m_last - m_first + 1))

    # Step 5: batches of B in report order, per (querier, query key)
    batches, incomplete, batch_charged = _batches(table, windows, slot, replayed, histogram_ok, charged, batch_size)
    if policy == "ipa_like":
        budget = CentralBudget(config.capacity_units)
        results = list(run_queries(batches, budget, source))
        central = {key: units for key, units in budget.filters.items() if units}
    else:
        results = list(run_queries(batches, None, source))
    budgets = DeviceBudgets(
        rows=rows,
        epochs=(int(m_first.min()), int(m_last.max())) if rows else None,
        units_counts=dict(counts),
        pair_units={q: np.array(units, dtype=np.int64) for q, units in pair_units.items()},
        touched=touched,
        central_units=central,
    )
    requests = table.requests
    return RunRecord(
        batches=batches, results=results, incomplete=incomplete, batch_charged_units=batch_charged,
        reports=int(served.size), reports_paying=int(np.count_nonzero(charged)),
        reports_with_dropped_epochs=int(np.count_nonzero(dropped)), dropped_epochs=int(dropped.sum()),
        first_requested_epsilon=float(requests[int(table.request[served[0]])].requested_epsilon) if served.size else 0.0,
        budgets=budgets,
    )


def _batches(table: ConversionTable, windows: Windows, slot: np.ndarray, replayed: Replayed,
             histogram_ok: np.ndarray, charged: np.ndarray, batch_size: int):
    """The full batches (in batch order), the incomplete ones and each batch's charged units (step 5)."""
    served = windows.served
    requests = table.requests
    names = table.query_keys
    query = table.query[served]
    position = np.full(table.time.size, -1, dtype=np.int64)  # index into served, or -1
    position[served] = np.arange(served.size)
    order = position[table.report_order]
    order = order[order >= 0]  # the served conversions in report order
    starts, stops = _groups(query[order])
    epsilon_of = np.array([r.requested_epsilon for r in requests], dtype=float)
    sensitivity_of = np.array([r.query_global_sensitivity for r in requests], dtype=float)
    dimension_of = np.array([r.dimension for r in requests], dtype=np.int64)
    batches: list[QueryBatch] = []
    incomplete: list[IncompleteBatch] = []
    charged_of: dict[tuple[str, str, int], int] = {}
    for start, stop in zip(starts.tolist(), stops.tolist(), strict=True):
        querier, query_key = names[int(query[order[start]])]
        full = (stop - start) // batch_size
        for index in range(full):
            chunk = order[start + index * batch_size:start + (index + 1) * batch_size]
            request = table.request[served[chunk]]
            slots = slot[chunk]
            ok = histogram_ok[chunk]
            chosen = slots[(slots >= 0) & ok].tolist()
            dimension = int(dimension_of[request].max())
            hists = [replayed.histograms[s] for s in chosen]
            sums = tuple(math.fsum(h[i] for h in hists if i < len(h)) for i in range(dimension))
            last = int(served[chunk[-1]])
            completed = (int(table.time[last]), table.dataset.device_id(int(table.device[last])),
                         table.dataset.conversion_id[last].decode("utf-8"))
            first, final = windows.first[chunk], windows.last[chunk]
            low = int(first.min())
            cover = np.zeros(int(final.max()) - low + 2, dtype=np.int64)
            np.add.at(cover, first - low, 1)
            np.add.at(cover, final - low + 1, -1)
            epochs = tuple((np.flatnonzero(np.cumsum(cover)[:-1] > 0) + low).tolist())
            batch = QueryBatch(querier, query_key, index, completed, batch_size, sums,
                               float(epsilon_of[request].min()), float(sensitivity_of[request].max()), epochs, 0.0)
            batches.append(batch)
            charged_of[(querier, query_key, index)] = sum(charged[chunk].tolist())
        if (stop - start) % batch_size:
            incomplete.append(IncompleteBatch(querier, query_key, (stop - start) % batch_size))
    return sorted(batches, key=batch_order), incomplete, charged_of
