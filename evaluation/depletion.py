"""Big Bird's depletion attack on the W3C Attribution API, replayed column-wise (SENSITIVE: evaluation only).

Big Bird (Tholoniat et al., "Beyond Per-Querier Budgets", arXiv 2506.05290, Sec. 7 "Evaluation", and its
artifact github.com/columbia/bigbird) measures benign queriers' error when Sybil sites try to drain a device's
global budget. This module replays that workload against the budgets of ``transforms.attribution_api``'s
``Backend`` (one browser per device): every ``saveImpression`` and ``measureConversion`` the browsers would see,
the per-site budget of every (epoch, conversion site), the global budget of every epoch, the impression-site
quota of every (epoch, impression site) and Big Bird's conversion-site quota of every (epoch, conversion site),
in integer micro-epsilon, each epoch's checks all passing before any deduction; and Big Bird's per-user-action cap
on the conversion sites that draw from an epoch (Sec. 4, Alg. 2), the artifact's "domain cap".

The benign workload is the Criteo-like dataset (``synthetic/criteo.py``) as the Cookie Monster ``criteo``
experiment queries it: advertisers are the conversion sites (and the queriers), a product category is a match
value, every impression names its advertiser as its only conversion site; a conversion asks for the last touch
over 30 days with ``value`` its purchase count, ``maxValue`` 5 and epsilon 1 (``BENIGN_EPSILON``). The API deducts
``2 value / (2 maxValue / epsilon) = value epsilon / maxValue`` per epoch, so a conversion of the largest value
deducts the whole per-site budget of 1; the noise scale ``2 maxValue / epsilon = 10`` gives a batch of 350 reports
(mean value 1.35) an RMSRE of ``sqrt(2) 10 / 472 = 0.030``, within the experiment's 5 % accuracy target. (The
Cookie Monster query's epsilon, 0.658 for a noise scale 5 / 0.658 = 7.6, would make the API charge a value-5
report 1.32, more than a per-site budget can pay.) The synthetic model has one publisher; the impression sites
are drawn here (``assign_publishers``): each impression's publisher from a truncated Zipf law over ``PUBLISHERS``
sites, independently of everything else.

The attack is the artifact's random attacker (its Attack B): it hijacks the ``hijacked`` most popular impression
sites (publishers, by impressions) and conversion sites (advertisers, by conversions), or those from popularity rank
``first_rank`` on (the artifact's Fig. 6c); each visit of a device to one of them (a benign impression or
conversion there) comes with a round of ``redirections`` Sybil pages, just before or just after the genuine action
(a fair coin). The attacker holds ``sybils`` sites; a round visits
``redirections`` of them in random order, and on each saves an impression (every Sybil a conversion site of it)
and converts, asking the per-site budget's epsilon for a value at its maximum, naming ``named`` Sybil impression
sites drawn among those the round did not visit (all of them when there are no more). Such a conversion matches
the Sybil impressions of earlier rounds of the last 30 days and drains their epochs' global budgets. The artifact
draws the named sites of a round's conversions without replacement while it can; here each conversion draws its
own.

The fresh-Sybil attacker (``Attack.fresh``) is the same attack made to defeat the quotas: by Big Bird's resilience
theorem (its case (i), as the artifact's README states it), quotas without the per-user-action cap bound the drain
only by the number of Sybil sites times a quota, and this attacker brings a new site for every conversion. It
hijacks the same visits and draws the same coins, but each redirection visits a Sybil site of its own: the j-th
redirection of a device's k-th round is Sybil site ``k redirections + j``, which saves an impression (naming no
conversion site, so that any may read it, with a match value no benign conversion asks for) and converts, naming the
impression sites of the j-th redirections of the device's earlier rounds (in its first round there are none: it does
not convert). No two conversions of a device share a conversion site or an impression site, so the quotas never
refuse them: they drain what the per-site budgets of fresh sites allow.

Big Bird's per-user-action cap (``Budgets.conversion_site_cap``) is the artifact's: at most that many conversion
sites of one user action draw from each epoch (pdslib's ``try_record_site`` on the report's conversion site; PR #309's
"conversion site count cap"); a user action is an attack round (a hijacked visit and its redirections, the
artifact's "sister site" action) or one benign event. The impression-site count cap of PR #309, which the artifact
does not implement, is not replayed: every Sybil page saves its impression. The attacker keeps its 20 redirections
under the cap (the artifact gives it ``cap + 2``): the cap lets at most that many of a round's conversions draw from
each epoch, whichever they are.

Every browser's epoch start (``api.bs``: a random hour of the epoch before the first use) is drawn once, before
the data begins, so the attack does not move it. Only the devices that converted are replayed: no other device
holds a budget that a benign report needs.

The replay is exact and column-wise (``run``): the matches of every conversion do not depend on budgets, so
they are resolved as arrays first (``build``); what remains is, per device and in call order, every (conversion,
epoch) deduction with its checks, and devices are independent, so the k-th deduction of every device is checked
and applied at once (step k). ``tests/evaluation/test_bigbird.py`` holds the result equal to the ``Backend``
itself, call by call, on a small dataset. Randomness is seeded numpy (simulation mode).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from evaluation.data import Dataset
from schemas.time_units import MICROS_PER_DAY, MICROS_PER_SECOND
from synthetic.criteo import CRITEO_VALUE_CAP
from transforms.attribution_api.mechanisms.backend import MICRO, SECONDS_PER_HOUR

EPOCH_DAYS = 7  # privacyBudgetEpochDays, the Cookie Monster criteo experiment's default epoch
LOOKBACK_DAYS = 30  # every conversion's lookbackDays and every impression's lifetimeDays (the request's window)
MAX_VALUE = int(CRITEO_VALUE_CAP)  # benign maxValue: a purchase count is at most 5
BENIGN_EPSILON = Fraction(1)  # every benign conversion's epsilon (module docstring)
PUBLISHERS = 500  # impression sites drawn for the Criteo-like impressions ...
PUBLISHER_EXPONENT = 1.0  # ... publisher k (1-based) with weight 1 / k
UNLIMITED = 2**62  # the capacity of a filter that is off (never refuses: deductions stay far below it)
STREAMS = {"publishers": 1, "epoch_starts": 2, "attack": 3}  # seeded numpy streams, one per role

# What refuses a deduction: the four filters in api.bs's order of checks ("deduct privacy and safety budgets"), then
# Big Bird's per-user-action cap, checked before them (PR #309's "check conversion site allowance")
REFUSALS = ("per_site", "global", "impression_quota", "conversion_quota", "conversion_site_cap")


def _rng(seed: int, role: str) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(STREAMS[role],)))


@dataclass(frozen=True)
class Budgets:
    """One budget setting in micro-epsilon; None turns a filter off (Big Bird Sec. 4: per-site budget, global
    budget, impression-site and conversion-site quotas), and Big Bird's per-user-action cap: how many conversion sites
    of one user action may draw from an epoch (Alg. 2; None: no cap)."""

    per_site: int
    global_budget: int | None
    impression_quota: int | None
    conversion_quota: int | None
    conversion_site_cap: int | None = None

    def capacities(self) -> tuple[int, int, int, int]:
        """(per-site, global, impression-site quota, conversion-site quota), ``UNLIMITED`` for those off."""
        return (self.per_site, *(UNLIMITED if c is None else c
                                 for c in (self.global_budget, self.impression_quota, self.conversion_quota)))


@dataclass(frozen=True)
class Attack:
    """The attacker (Big Bird artifact's Attack B, random): Sybil sites (at most 64: a set of them is a uint64),
    redirections per hijacked visit, how many impression and conversion sites it hijacks and from which popularity
    rank, the share of its Sybils each conversion names, the epsilon its conversions ask (the per-site budget: the
    most one Sybil site can pay) and the chance that the genuine action comes before the round. With ``fresh``, the
    fresh-Sybil attacker (module docstring): a Sybil site of its own per redirection, ``sybils`` and
    ``named_share`` unused."""

    sybils: int = 25
    redirections: int = 20
    hijacked: int = 10
    first_rank: int = 1  # the popularity rank (1: the most popular) of the first site it hijacks
    named_share: float = 0.35
    epsilon: Fraction = Fraction(1)
    genuine_first: float = 0.5
    fresh: bool = False

    def __post_init__(self) -> None:
        if self.redirections <= 0 or not (self.fresh or self.redirections < self.sybils <= 64):
            raise ValueError(f"need 0 < redirections < sybils <= 64 (or fresh Sybils), got {self.redirections} and "
                             f"{self.sybils}")

    @property
    def named(self) -> int:
        """Impression sites each conversion of the random attacker names: the artifact's share of the Sybils (at
        least one), at most those a round leaves unvisited."""
        return min(max(1, round(self.sybils * self.named_share)), self.sybils - self.redirections)

    @property
    def deduction(self) -> int:
        """What each of its conversions deducts per epoch: value = maxValue = 1, so 2 value / (2 maxValue /
        epsilon) = epsilon, rounded up to micro-epsilon."""
        return math.ceil(self.epsilon * MICRO)


def benign_deduction(value: int) -> int:
    """The per-site and global deduction of a benign conversion of ``value``: its lookback spans several epochs,
    so both are ``2 value / noise scale``, noise scale ``2 maxValue / epsilon``, rounded up (``Backend``)."""
    return math.ceil(Fraction(2 * value) / (Fraction(2 * MAX_VALUE) / BENIGN_EPSILON) * MICRO)


def assign_publishers(impressions: int, seed: int) -> np.ndarray:
    """Each impression's publisher index (a truncated Zipf law over ``PUBLISHERS``, independent draws)."""
    weights = np.arange(1, PUBLISHERS + 1, dtype=float) ** -PUBLISHER_EXPONENT
    return _rng(seed, "publishers").choice(PUBLISHERS, size=impressions, p=weights / weights.sum())


def _by_count(items: np.ndarray) -> np.ndarray:
    """The distinct values of ``items``, most frequent first (ties: smaller value first)."""
    values, counts = np.unique(items, return_counts=True)
    return values[np.lexsort((values, -counts))]


def _dense_ranks(*arrays: np.ndarray) -> list[np.ndarray]:
    """Each array's values as ranks among all their distinct values (order kept)."""
    _, inverse = np.unique(np.concatenate(arrays), return_inverse=True)
    bounds = np.cumsum([0, *(a.size for a in arrays)])
    return [inverse[lo:hi].astype(np.int64) for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]


def _first_at_or_after(device: np.ndarray, time: np.ndarray, q_device: np.ndarray, q_time: np.ndarray) -> np.ndarray:
    """For each query, the index of the first row (rows sorted by device then time) of its device at or after its
    time (possibly the next device's first row or the end)."""
    rows, queries = _dense_ranks(time, q_time)
    width = max(int(max(rows.max(initial=0), queries.max(initial=0))) + 1, 1)
    return np.searchsorted(device * width + rows, q_device * width + queries, side="left")


def _expand(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The pairs (i, j) for j in [lo[i], hi[i]): their i and j as arrays."""
    counts = np.maximum(hi - lo, 0)
    owner = np.repeat(np.arange(lo.size), counts)
    ends = np.cumsum(counts)
    return owner, np.arange(int(ends[-1]) if ends.size else 0) - np.repeat(ends - counts, counts) + lo[owner]


def _bits(masks: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """The set bits (below ``width``) of each uint64 mask, mask after mask and ascending within one: how many each
    mask has, and the bits' positions (int8)."""
    counts = np.zeros(masks.size, dtype=np.int64)
    for bit in range(width):
        counts += ((masks >> np.uint64(bit)) & np.uint64(1)).astype(np.int64)
    starts = np.cumsum(counts) - counts
    bits = np.empty(int(counts.sum()), dtype=np.int8)
    seen = np.zeros(masks.size, dtype=np.int64)
    for bit in range(width):
        has = np.flatnonzero((masks >> np.uint64(bit)) & np.uint64(1))
        bits[starts[has] + seen[has]] = bit
        seen[has] += 1
    return counts, bits


def _dense(keys: np.ndarray) -> tuple[np.ndarray, int]:
    """Each key's index among the distinct keys (sorted), and how many there are."""
    distinct = np.unique(keys)
    return np.searchsorted(distinct, keys).astype(np.int32), distinct.size


@dataclass
class Events:
    """Every API call of the replayed browsers as columns, in call order within each device (SENSITIVE).

    Sites are numbers: conversion sites are the advertisers ``0 .. advertisers-1`` then the Sybils, impression
    sites the publishers ``0 .. PUBLISHERS-1`` then the Sybils. ``*_slot`` orders a device's calls: 3 g + 1 for
    its g-th genuine event (impressions before conversions at one time), 3 g and 3 g + 2 for an attack round just
    before and just after it; a round's redirections come in order, each an impression then a conversion. The fresh
    attacker's Sybil sites are numbered by device (``Attack.fresh``), so ``round_sybils`` and ``round_named`` are
    empty.
    ``epoch_offset`` is each device's epoch start fraction times the epoch length (whole seconds), drawn before
    ``origin`` (micros), the browsers' first use."""

    origin: int
    epoch_offset: np.ndarray
    advertiser_names: list[str]  # conversion site i < advertisers
    categories: list[str]  # match value i
    imp_device: np.ndarray
    imp_time: np.ndarray
    imp_slot: np.ndarray
    imp_site: np.ndarray  # publisher
    imp_advertiser: np.ndarray  # its only conversion site
    imp_match: np.ndarray  # category
    conv_device: np.ndarray
    conv_time: np.ndarray
    conv_slot: np.ndarray
    conv_site: np.ndarray  # advertiser
    conv_match: np.ndarray
    conv_value: np.ndarray
    conv_order: np.ndarray  # report order (time, device id, conversion id) of each conversion
    conv_query: np.ndarray  # the conversion's (advertiser, category) query, an index into ``queries``
    queries: list[tuple[int, int]]
    attack: Attack | None
    round_device: np.ndarray  # one attack round per hijacked visit, sorted by device and slot
    round_time: np.ndarray
    round_slot: np.ndarray
    round_sybils: np.ndarray  # (rounds, redirections) int8: the Sybils visited, in order
    round_named: np.ndarray  # (rounds, redirections) uint64: the Sybil impression sites each conversion names

    @property
    def advertisers(self) -> int:
        return len(self.advertiser_names)

    def round_rank(self) -> np.ndarray:
        """Each attack round's rank among its device's rounds (0: the first)."""
        return np.arange(self.round_device.size) - np.searchsorted(self.round_device, self.round_device, side="left")

    def sybil_sites(self) -> int:
        """How many Sybil sites the replay numbers (after the advertisers and after the publishers): the random
        attacker's, or the fresh attacker's for the device with the most rounds."""
        if self.attack is None:
            return 0
        if not self.attack.fresh:
            return self.attack.sybils
        return int(self.round_rank().max(initial=-1) + 1) * self.attack.redirections

    def epoch_start(self) -> np.ndarray:
        """Each device's epoch start time (micros): the hour before ``origin - epoch_offset`` (``api.bs``)."""
        hour = SECONDS_PER_HOUR * MICROS_PER_SECOND
        return (self.origin - self.epoch_offset * MICROS_PER_SECOND) // hour * hour

    def epoch_of(self, device: np.ndarray, time: np.ndarray) -> np.ndarray:
        return (time - self.epoch_start()[device]) // (EPOCH_DAYS * MICROS_PER_DAY)


def events_of(dataset: Dataset, origin: int, seed: int, attack: Attack | None) -> Events:
    """The benign calls of ``dataset`` (its devices, impressions with publishers from ``assign_publishers``,
    conversions) and, with ``attack``, the attack rounds; epoch starts drawn before ``origin``."""
    advertisers = sorted({kind[0] for kind in dataset.conversion_kinds} | {kind[1] for kind in dataset.impression_kinds})
    products = sorted({kind[2] for kind in dataset.conversion_kinds} | {kind[3] for kind in dataset.impression_kinds})
    adv_index, product_index = {a: i for i, a in enumerate(advertisers)}, {p: i for i, p in enumerate(products)}
    conv_adv = np.array([adv_index[k[0]] for k in dataset.conversion_kinds], dtype=np.int64)[dataset.conversion_kind]
    conv_cat = np.array([product_index[k[2] or ""] for k in dataset.conversion_kinds],
                        dtype=np.int64)[dataset.conversion_kind]
    imp_adv = np.array([adv_index[k[1]] for k in dataset.impression_kinds], dtype=np.int64)[dataset.impression_kind]
    imp_cat = np.array([product_index[k[3] or ""] for k in dataset.impression_kinds],
                       dtype=np.int64)[dataset.impression_kind]
    imp_pub = assign_publishers(dataset.impression_time.size, seed)
    devices = dataset.device_ids.size
    offsets = _rng(seed, "epoch_starts").integers(0, EPOCH_DAYS * MICROS_PER_DAY // MICROS_PER_SECOND, size=devices)

    # genuine events of each device in time order, impressions first at one time (the artifact's merge)
    n_imp = dataset.impression_time.size
    device = np.concatenate([dataset.impression_device, dataset.conversion_device])
    time = np.concatenate([dataset.impression_time, dataset.conversion_time])
    is_conv = np.r_[np.zeros(n_imp, dtype=np.int8), np.ones(dataset.conversion_time.size, dtype=np.int8)]
    order = np.lexsort((np.concatenate([dataset.impression_id, dataset.conversion_id]), is_conv, time, device))
    rank = np.empty(order.size, dtype=np.int64)
    firsts = np.searchsorted(device[order], device[order], side="left")
    rank[order] = np.arange(order.size) - firsts
    slot = 3 * rank + 1

    queries, conv_query = np.unique(conv_adv * len(products) + conv_cat, return_inverse=True)
    report = np.lexsort((dataset.conversion_id, dataset.device_ids[dataset.conversion_device], dataset.conversion_time))
    conv_order = np.empty(report.size, dtype=np.int64)
    conv_order[report] = np.arange(report.size)
    events = Events(
        origin=origin, epoch_offset=offsets, advertiser_names=advertisers, categories=products,
        imp_device=dataset.impression_device, imp_time=dataset.impression_time, imp_slot=slot[:n_imp],
        imp_site=imp_pub, imp_advertiser=imp_adv, imp_match=imp_cat,
        conv_device=dataset.conversion_device, conv_time=dataset.conversion_time, conv_slot=slot[n_imp:],
        conv_site=conv_adv, conv_match=conv_cat, conv_value=dataset.conversion_value.astype(np.int64),
        conv_order=conv_order, conv_query=conv_query.reshape(-1),
        queries=[(int(q) // len(products), int(q) % len(products)) for q in queries],
        attack=attack, round_device=np.zeros(0, dtype=np.int64), round_time=np.zeros(0, dtype=np.int64),
        round_slot=np.zeros(0, dtype=np.int64), round_sybils=np.zeros((0, 1), dtype=np.int8),
        round_named=np.zeros((0, 1), dtype=np.uint64))
    if attack is not None:
        _add_rounds(events, attack, seed)
    return events


def _add_rounds(events: Events, attack: Attack, seed: int) -> None:
    """The attack rounds: one per visit to a hijacked site, with the random attacker its Sybils and named sites
    drawn (``Attack``); the fresh attacker's rounds are the random attacker's, drawn from the same stream."""
    rng = _rng(seed, "attack")
    ranks = slice(attack.first_rank - 1, attack.first_rank - 1 + attack.hijacked)
    top_pubs = _by_count(events.imp_site)[ranks]
    top_advs = _by_count(events.conv_site)[ranks]
    imp_visit = np.isin(events.imp_site, top_pubs)
    conv_visit = np.isin(events.conv_site, top_advs)
    device = np.concatenate([events.imp_device[imp_visit], events.conv_device[conv_visit]])
    time = np.concatenate([events.imp_time[imp_visit], events.conv_time[conv_visit]])
    genuine = np.concatenate([events.imp_slot[imp_visit], events.conv_slot[conv_visit]])
    order = np.lexsort((genuine, device))
    device, time, genuine = device[order], time[order], genuine[order]
    after = rng.random(device.size) < attack.genuine_first  # the genuine action first: the round just after it
    events.round_device, events.round_time = device, time
    events.round_slot = genuine - 1 + 2 * after
    if attack.fresh:
        return
    events.round_sybils = np.argsort(rng.random((device.size, attack.sybils)), axis=1)[:, :attack.redirections].astype(
        np.int8)
    visited = np.bitwise_or.reduce(np.left_shift(np.uint64(1), events.round_sybils.astype(np.uint64)), axis=1)
    if attack.named == attack.sybils - attack.redirections:  # every unvisited Sybil
        everyone = np.uint64((1 << attack.sybils) - 1)
        named = np.repeat((everyone & ~visited)[:, None], attack.redirections, axis=1)
    else:
        keys = rng.random((device.size, attack.redirections, attack.sybils))
        taken = (visited[:, None] >> np.arange(attack.sybils, dtype=np.uint64)) & np.uint64(1)
        keys[np.broadcast_to(taken[:, None, :].astype(bool), keys.shape)] = np.inf
        chosen = np.argpartition(keys, attack.named - 1, axis=2)[:, :, :attack.named]
        named = np.bitwise_or.reduce(np.left_shift(np.uint64(1), chosen.astype(np.uint64)), axis=2)
    events.round_named = named


@dataclass
class Deductions:
    """Every (conversion, epoch) deduction a replay checks, in step order (the k-th of every device at step k),
    with what it deducts and the filters it checks (indices into per-run state arrays), SENSITIVE."""

    steps: np.ndarray  # step boundaries into the deductions
    amount: np.ndarray
    site: np.ndarray  # (epoch, conversion site): per-site budget and conversion-site quota
    global_key: np.ndarray  # epoch
    quota_steps: np.ndarray  # step boundaries into the quota entries
    quota: np.ndarray  # (epoch, impression site) of each quota entry
    quota_owner: np.ndarray  # its deduction, relative to the step's first
    conversion: np.ndarray  # its measureConversion call: benign conversion i, or benign + round * redirections + j
    action: np.ndarray  # (user action, epoch): benign event or attack round (Big Bird's per-user-action cap)
    benign: int  # the benign conversions
    sites: int  # the filters of each kind (state entries of a replay)
    globals: int
    quotas: int
    actions: int


def _benign(events: Events) -> tuple[np.ndarray, ...]:
    """The benign (conversion, epoch) deductions: (conversion, epoch, site key parts) and their quota entries.
    An impression matches a conversion of its device, advertiser and category when it came before it and at most
    ``LOOKBACK_DAYS`` earlier (lifetime and lookback alike)."""
    _, group = np.unique(np.stack([np.r_[events.imp_device, events.conv_device],
                                        np.r_[events.imp_advertiser, events.conv_site],
                                        np.r_[events.imp_match, events.conv_match]]), axis=1, return_inverse=True)
    group = group.reshape(-1)
    n_imp = events.imp_time.size
    imp_group, conv_group = group[:n_imp], group[n_imp:]
    order = np.lexsort((events.imp_slot, imp_group))
    width = int(max(events.imp_slot.max(initial=0), events.conv_slot.max(initial=0))) + 2
    keys = imp_group[order] * width + events.imp_slot[order]
    # the earliest slot within the lookback: the first genuine event of the device at or after t - 30 days
    genuine_device = np.r_[events.imp_device, events.conv_device]
    genuine_time = np.r_[events.imp_time, events.conv_time]
    genuine_slot = np.r_[events.imp_slot, events.conv_slot]
    by_time = np.lexsort((genuine_slot, genuine_device))
    first = _first_at_or_after(genuine_device[by_time], genuine_time[by_time], events.conv_device,
                               events.conv_time - LOOKBACK_DAYS * MICROS_PER_DAY)
    first_slot = np.r_[genuine_slot[by_time], 0][first]
    same_device = np.r_[genuine_device[by_time], -1][first] == events.conv_device
    first_slot = np.where(same_device, first_slot, events.conv_slot)
    lo = np.searchsorted(keys, conv_group * width + first_slot, side="left")
    hi = np.searchsorted(keys, conv_group * width + events.conv_slot, side="left")
    conv, position = _expand(lo, hi)
    imp = order[position]
    epoch = events.epoch_of(events.imp_device[imp], events.imp_time[imp])
    triples = np.unique(np.stack([conv, epoch, events.imp_site[imp]]), axis=1)
    pairs, owner = np.unique(triples[:2], axis=1, return_inverse=True)
    return pairs[0], pairs[1], triples[2], owner.reshape(-1)


def _attacker(events: Events) -> tuple[np.ndarray, ...]:
    """The attacker's (conversion, epoch) deductions: round, redirection, epoch, the conversion's Sybil site, and
    its impression-site quota entries (how many each deduction has, then their Sybil sites, deduction after
    deduction). A conversion matches the Sybil impressions of the earlier rounds of its device within
    ``LOOKBACK_DAYS`` at the sites it names (a round's own are never named): the random attacker's named Sybils, or
    the fresh attacker's j-th sites of the earlier rounds (module docstring)."""
    attack = events.attack
    assert attack is not None
    first = _first_at_or_after(events.round_device, events.round_time, events.round_device,
                               events.round_time - LOOKBACK_DAYS * MICROS_PER_DAY)
    later, earlier = _expand(first, np.arange(events.round_device.size))
    epoch = events.epoch_of(events.round_device[earlier], events.round_time[earlier])
    cells, cell = np.unique(np.stack([later, epoch]), axis=1, return_inverse=True)
    cell = cell.reshape(-1)
    # each (round, epoch) with Sybil impressions, crossed with the round's conversions
    redirections = attack.redirections
    redirection = np.tile(np.arange(redirections), cells.shape[1])
    rounds = np.repeat(cells[0], redirections)
    epochs = np.repeat(cells[1], redirections)
    if attack.fresh:
        # every conversion matches: one quota entry per earlier round of the cell (the pairs are in cell order:
        # by round, then by earlier round, whose epochs do not decrease)
        rank = events.round_rank()
        per_cell = np.bincount(cell, minlength=cells.shape[1])
        starts = np.repeat(np.cumsum(per_cell) - per_cell, redirections)
        owner, pair = _expand(starts, starts + np.repeat(per_cell, redirections))
        return (rounds, redirection, epochs, rank[rounds] * redirections + redirection,
                np.repeat(per_cell, redirections), rank[earlier[pair]] * redirections + redirection[owner])
    visited = np.bitwise_or.reduce(np.left_shift(np.uint64(1), events.round_sybils.astype(np.uint64)), axis=1)
    present = np.zeros(cells.shape[1], dtype=np.uint64)
    np.bitwise_or.at(present, cell, visited[earlier])
    matched = events.round_named[rounds, redirection] & np.repeat(present, redirections)
    keep = matched != 0
    rounds, redirection = rounds[keep], redirection[keep]
    counts, bits = _bits(matched[keep], attack.sybils)
    return rounds, redirection, epochs[keep], events.round_sybils[rounds, redirection].astype(np.int64), counts, bits


def build(events: Events) -> Deductions:
    """Every deduction the replay of ``events`` checks, in step order, with its filters' keys. The impression-site
    quota entries (several per deduction) are laid out without sorting them: at the paper's scale there are about
    a hundred million."""
    sybils = events.sybil_sites()
    conv_sites, imp_sites = events.advertisers + sybils, PUBLISHERS + sybils
    site_type = np.min_scalar_type(imp_sites)  # an impression site's number: the quota entries are many
    b_conv, b_epoch, b_quota_site, b_owner = _benign(events)
    benign = events.conv_time.size
    parts = {
        "device": [events.conv_device[b_conv]], "slot": [events.conv_slot[b_conv]],
        "redirection": [np.zeros(b_conv.size, np.int64)], "epoch": [b_epoch], "site": [events.conv_site[b_conv]],
        "conversion": [b_conv], "action": [b_conv],
        "amount": [np.array([benign_deduction(v) for v in range(MAX_VALUE + 1)])[events.conv_value[b_conv]]],
    }
    entry_counts, entry_sites = [np.bincount(b_owner, minlength=b_conv.size)], [b_quota_site.astype(site_type)]
    if events.attack is not None and events.round_device.size:
        rounds, redirection, epoch, sybil, counts, entry_sybils = _attacker(events)
        parts["device"].append(events.round_device[rounds])
        parts["slot"].append(events.round_slot[rounds])
        parts["redirection"].append(redirection)
        parts["epoch"].append(epoch)
        parts["site"].append(events.advertisers + sybil)
        parts["conversion"].append(benign + rounds * events.attack.redirections + redirection)
        parts["action"].append(benign + rounds)
        parts["amount"].append(np.full(rounds.size, events.attack.deduction))
        entry_counts.append(counts)
        entry_sites.append(entry_sybils.astype(site_type) + PUBLISHERS)
    cols = {name: np.concatenate(arrays).astype(np.int64) for name, arrays in parts.items()}
    counts, sites = np.concatenate(entry_counts), np.concatenate(entry_sites)  # entries by deduction, in order
    del parts, entry_counts, entry_sites

    # call order within each device, then the rank of each deduction in its device: its step
    order = np.lexsort((cols["epoch"], cols["redirection"], cols["slot"], cols["device"]))
    device = cols["device"][order]
    step = np.arange(order.size) - np.searchsorted(device, device, side="left")
    by_step = order[np.lexsort((device, step))]
    step.sort()
    steps = np.searchsorted(step, np.arange(int(step[-1] if step.size else -1) + 2), side="left")
    within = (np.arange(order.size) - steps[step]).astype(np.int32)  # a deduction's place in its step
    del order, device, step

    epochs = int(cols["epoch"].max(initial=0)) + 1
    cell = (cols["device"] * epochs + cols["epoch"])[by_step]
    site, sites_count = _dense(cell * conv_sites + cols["site"][by_step])
    global_key, globals_count = _dense(cell)
    action, actions_count = _dense((cols["action"] * epochs + cols["epoch"])[by_step])
    # each deduction's quota entries, deduction after deduction in step order
    step_counts = counts[by_step]
    ends = np.cumsum(step_counts)
    entry = np.arange(int(ends[-1]) if ends.size else 0) - np.repeat(ends - step_counts - (np.cumsum(counts) - counts)[
        by_step], step_counts)
    quota, quotas_count = _dense(np.repeat(cell, step_counts) * imp_sites + sites[entry])
    del entry, sites
    return Deductions(
        steps=steps, amount=cols["amount"][by_step], site=site, global_key=global_key,
        quota_steps=np.r_[0, ends][steps], quota=quota, quota_owner=np.repeat(within, step_counts),
        conversion=cols["conversion"][by_step], action=action, benign=benign, sites=sites_count,
        globals=globals_count, quotas=quotas_count, actions=actions_count)


def run(deductions: Deductions, budgets: Budgets) -> np.ndarray:
    """Replays every deduction under ``budgets``: at step k the k-th deduction of every device, Big Bird's
    per-user-action cap (PR #309's "check conversion site allowance"), its checks (per-site budget, global budget,
    every matched impression site's quota, conversion-site quota), then all of its deductions or none (``api.bs``
    "deduct privacy and safety budgets"). Keys of one step belong to distinct devices, so none repeats. The cap
    counts the deductions a (user action, epoch) made: each conversion of an action has a conversion site of its
    own (one per redirection, one per benign action), so that count is its admitted sites (``UserActionContext``).
    Returns each deduction's refusal: 0 when deducted, else 1 + the index in ``REFUSALS`` of what refused it, the
    cap first, then the filters in ``api.bs``'s order of checks (SENSITIVE)."""
    per_site, global_budget, quota, conversion_quota = budgets.capacities()
    d = deductions
    admissions_left = np.full(d.actions, UNLIMITED if budgets.conversion_site_cap is None else
                              budgets.conversion_site_cap, dtype=np.int64)
    site_left = np.full(d.sites, per_site, dtype=np.int64)
    conv_left = np.full(d.sites, conversion_quota, dtype=np.int64)
    global_left = np.full(d.globals, global_budget, dtype=np.int64)
    quota_left = np.full(d.quotas, quota, dtype=np.int64)
    refusal = np.zeros(d.amount.size, dtype=np.int8)
    for k in range(d.steps.size - 1):
        lo, hi, q_lo, q_hi = d.steps[k], d.steps[k + 1], d.quota_steps[k], d.quota_steps[k + 1]
        amount, site, glob, action = d.amount[lo:hi], d.site[lo:hi], d.global_key[lo:hi], d.action[lo:hi]
        quota_key, owner = d.quota[q_lo:q_hi], d.quota_owner[q_lo:q_hi]
        short = quota_left[quota_key] < amount[owner]
        quota_short = np.bincount(owner[short], minlength=hi - lo) > 0
        code = np.select([admissions_left[action] <= 0, site_left[site] < amount, global_left[glob] < amount,
                          quota_short, conv_left[site] < amount], [5, 1, 2, 3, 4], 0).astype(np.int8)
        ok = code == 0
        admissions_left[action[ok]] -= 1
        site_left[site[ok]] -= amount[ok]
        conv_left[site[ok]] -= amount[ok]
        global_left[glob[ok]] -= amount[ok]
        paid = ok[owner]
        quota_left[quota_key[paid]] -= amount[owner[paid]]
        refusal[lo:hi] = code
    return refusal


def paid(deductions: Deductions, refusal: np.ndarray, calls: int) -> np.ndarray:
    """Whether each measureConversion call (``Deductions.conversion``) had some epoch deducted: its histogram then
    holds its value (one bucket, last touch), else it is all zeros."""
    out = np.zeros(calls, dtype=bool)
    out[deductions.conversion[refusal == 0]] = True
    return out


def attributable(deductions: Deductions) -> np.ndarray:
    """Whether each benign conversion matched some impression (its report's value without any budget)."""
    out = np.zeros(deductions.benign, dtype=bool)
    out[deductions.conversion[deductions.conversion < deductions.benign]] = True
    return out


def query_sums(events: Events, values: np.ndarray, batch_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(query index, batch index, sum) of every full batch: each (advertiser, category) query's reports in report
    order, cut into batches of ``batch_size`` (the Cookie Monster criteo experiment's queries)."""
    order = np.lexsort((events.conv_order, events.conv_query))
    query = events.conv_query[order]
    position = np.arange(order.size) - np.searchsorted(query, query, side="left")
    full = position < (np.bincount(query, minlength=len(events.queries))[query] // batch_size) * batch_size
    batch_key = query[full] * (order.size + 1) + position[full] // batch_size
    keys, inverse = np.unique(batch_key, return_inverse=True)
    sums = np.bincount(inverse.reshape(-1), weights=values[order][full].astype(float), minlength=keys.size)
    return keys // (order.size + 1), keys % (order.size + 1), sums


def noise_scale() -> float:
    """The Laplace scale of every benign query: 2 maxValue / epsilon."""
    return float(Fraction(2 * MAX_VALUE) / BENIGN_EPSILON)


def rmsre(truth: np.ndarray, biased: np.ndarray, scale: float) -> np.ndarray:
    """Analytic RMSRE of each query, sqrt((biased - truth)^2 + 2 b^2) / truth (``evaluation.metrics``' formula
    for one coordinate); NaN where the truth is 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(truth > 0, np.sqrt((biased - truth) ** 2 + 2 * scale**2) / truth, np.nan)

