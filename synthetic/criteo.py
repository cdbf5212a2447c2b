"""The Criteo-like dataset and Criteo++ (Cookie Monster paper Sec. 8.1, 8.4): ``python -m pipelines.generate criteo-like``.

Seed 003 Sec. 8.4 evaluates on a 90-day sample of Criteo's logs: 292
advertisers of very different sizes (1 to 2.6M impressions, 0 to 478k
conversions each), 12M impressions, 1.3M conversions and 10M users. The paper's
artifact treats every click as an impression and every sale as a conversion at
the click's time plus the sale delay, with value the purchase count capped at
5; a query is an (advertiser, ``product-category-3``) pair, batches of 350
reports, an expected average value of 2. Criteo++ adds ``X`` synthetic
impressions per conversion inside its attribution window. This module writes
a dataset with those features at ``--scale`` times the paper's size, in the
formats of the ``microbenchmark`` generator (``pipelines/generate.py``):
``DIR/impressions-SSSSS-of-NNNNN.<ext>``, ``DIR/conversions-SSSSS-of-NNNNN.<ext>``
and ``DIR/generation.json`` (parameters, model constants, stats).

The model
---------
Times are UTC microseconds in the 90 days ``[start, start + 90 d)``, ``start``
2024-01-01T00:00:00Z by default; ``s`` is ``--scale``.

* **Advertisers.** ``A = 292`` advertisers ``advertiser-NNN.example`` (also the
  queriers). Their impression shares come from weights ``w_a ~ lognormal(0, 2.2)``:
  the advertiser of the largest weight gets exactly ``2.6M / 12M = 21.67 %``
  of the impressions (the paper's largest advertiser), the others share the
  remaining 78.33 % in proportion to their weights, capped at the same 21.67 %
  (an advertiser over the cap is set to it and its excess is spread over the
  uncapped ones in proportion to their weights, until none is over; rarely
  needed). Advertiser ``a`` has ``I_a = max(1, round(12,000,000 * s * share_a))``
  impressions (a few to 2.6M at full scale, as in the paper).
* **Conversion rates.** 10 % of the advertisers (each independently) have no
  sales, ``r_a = 0``; the others draw ``r_a ~ Beta(1.2, 10)`` (mean 0.107, about
  1.3 / 12). Then all rates are multiplied by one factor so that the expected
  number of conversions is exactly ``1.3M * s`` given the ``I_a`` (the share of
  the advertisers' impressions is so uneven that otherwise the total would swing
  by tens of percent with the seed; rates are capped at 1). The factor
  (``rate_calibration`` in the stats) was between 0.6 and 1.9, median 1.2, over
  seeds 0 to 19.
* **Product categories.** Advertiser ``a`` has ``K_a = 1 + Poisson((I_a /
  7,000)^1.75)`` categories ``category-0`` ... ``category-{K_a - 1}`` (the
  artifact's ``product-category-3``); each impression's category is drawn with
  weights ``1 / k^0.7``, ``k = 1 .. K_a``. The catalogue grows faster than the
  traffic (about 31,600 categories for the largest advertiser at full scale, 166
  at ``s = 0.05``, 1.6 on average at 5,000 impressions), so a small advertiser's
  sales fill a few batches of 350 while a large one's spread over many pairs,
  most under 350, as in the paper (109 advertisers with a query, 898 queries, a
  quarter of the sales in full batches). ``I_a`` is the generated count, so the
  catalogue shrinks with ``--scale`` and small scales keep queries (see
  Queries).
* **Devices.** Every device has an activity weight ``W``, ``P(W = k)``
  proportional to ``1 / k^2.5`` for ``k = 1 .. 5,000`` (a discrete power law
  truncated at 5,000; mean ``m = 1.926``, 74.5 % of the devices have weight 1).
  Advertiser ``a`` has an *audience* of ``max(1, round(I_a / rho))`` devices of
  i.i.d. weights (a multinomial count per weight, drawn from their own random
  stream), ``rho = CRITEO_POPULATION_RHO = 0.082907``; the population is the
  audiences in advertiser order, heaviest devices first within each, ids
  ``device-NNN`` zero padded to the digits of the population size ``N_pop``
  (about ``12M * s / rho``: 144.7M at full scale, of which 10M ever click). An
  impression's device comes from its advertiser's audience with probability
  ``CRITEO_AUDIENCE_SHARE = 0.75`` (retargeting: a device clicks mostly one
  advertiser's ads), else from the whole population, in proportion to the
  weights either way. A device of weight ``k`` in ``a``'s audience then expects
  ``0.75 * I_a k / S_a + 0.25 * I k / S = rho k / m`` impressions (``S_a`` and
  ``S`` the audience's and the population's total weights, ``E[S_a] = m I_a /
  rho``), at most about ``rho * 5,000 / m = 215``, three quarters of them with
  its advertiser; so the expected share of the population that clicks is
  ``g(rho) = sum_k P(W = k) (1 - exp(-rho k / m))``, and ``rho``
  (``criteo_population_rho``) solves ``g(rho) / rho = 10 / 12``: ``10M * s``
  distinct devices, 1.2 impressions each, as in the paper (``users`` in the
  stats counts them; they averaged within 0.7 % of it over seeds at scales 0.002
  to 1). The activity is heavy-tailed: most clicking devices click once, and the
  top 1 % of them hold about 8 % of the impressions (``top_1pct_device_share``;
  the most one can hold given 1.2 impressions per device is 17.5 %); the most
  active device has about 200 impressions at ``s = 0.05``
  (``max_device_impressions``, seed 0: 200) and 226 at full scale, and about
  0.24 % of the clicking devices have 10 or more (seed 0: 1,223 at 0.05, 24,371
  at 1). A conversion stays on its click's device, so heavy clickers also buy
  more, mostly from the same advertiser: about 3.2 % of the conversions come
  less than 30 days after another one of the same device and advertiser
  (``repeat_conversion_share``), the reports whose windows an ARA-like budget
  (every epoch of the window pays the full epsilon, per device, epoch and
  querier) cannot pay twice, while Cookie Monster pays only the epochs that hold
  the report's relevant impressions. In ``python -m pipelines.evaluate criteo``
  (s = 0.05, seed 0) ARA-like loses about 3 % of the reports and its mean RMSRE
  is 0.042 at 1-day epochs against 0.023 for Cookie Monster and IPA-like (0.043,
  0.026, 0.023 at 7 days; Cookie Monster paper Fig. 6 and its artifact, 1-day epochs:
  0.0325, 0.0198, 0.0209).
* **Impressions (clicks).** Each impression is at a uniform microsecond of the
  90 days, on ``publisher.example``, of its advertiser and category (product
  ``category-K``, no campaign, no filter key).
* **Conversions (sales).** Each impression converts with probability ``r_a``,
  at the click's time plus a delay ``~ Exponential(mean 3 days)`` truncated to
  less than 30 days (inverse CDF of the truncated law); a conversion after the
  90 days is dropped (about 3.3 %). Same device, advertiser and category; value
  the purchase count ``min(5, 1 + Poisson(0.35))`` (mean 1.35; the artifact caps
  purchase counts at 5). Its request: querier = advertiser, no campaigns, so
  that the product ``category-K`` selects the relevant impressions (the request's
  ``product_id`` equals the impressions'), query key ``category=category-K``,
  window 30 days, last touch, dimension 1, L1, report and query global
  sensitivity 5, and ``requested_epsilon = Delta ln(1/beta) / (alpha B c~)``
  with ``Delta = 5``, ``B = 350``, ``c~ = 2``, ``alpha = 0.05``, ``beta = 0.01``:
  0.657881 (Cookie Monster paper Sec. 8.1's formula with the artifact's Criteo values).
* **Queries.** Batches of ``B = 350`` reports per (advertiser, category):
  ``floor(conversions / 350)`` queries for each pair; an advertiser "has a
  query" when one of its pairs has at least 350 conversions (the paper: 109
  advertisers, 898 queries). Seed 0 gives 961 queries over 106 advertisers at
  full scale and 82 over 25 at ``s = 0.05``. Over seeds 0 to 19 (counted from
  the advertisers and the category model without writing files): 913 queries on
  average at full scale, 495 to 1,586 with the largest advertisers' rates, over
  75 to 134 advertisers (mean 104), 25 % of the sales in full batches; 45 to 110
  queries (mean 75) over 6 to 36 advertisers at 0.05.
* **Augmentation (Criteo++).** With ``--augment X``, every conversion at ``t``
  gets ``X`` extra impressions of its device, advertiser and category at
  uniform microseconds of ``[max(start, t - 30 days), t)``, ids ``aug-N``. They
  come from their own random streams, so the rest of the dataset (every
  ``imp-N`` impression and every conversion) is the same for every ``X``.

Files and memory
----------------
Advertisers are generated in order, each in chunks of at most
``CRITEO_CHUNK_IMPRESSIONS`` impressions, each chunk from its own random
streams (``files.stream`` keyed by advertiser and chunk: one for the impressions
and their sales, one for the augmentation). A chunk's impressions are written
as soon as they are generated, in time order, ids ``imp-N`` in file order,
followed by its augmented impressions; impression files are ranges of chunks
of about a million base impressions each. Conversions (about a tenth of the
impressions) are kept as numpy columns (about 30 bytes each, 40 MB at full
scale), sorted by time at the end (stable: ties keep generation order) and
written in files of about a million, ids ``conv-N`` in time order. The
population is a few arrays over its non-empty (audience, weight) cells (about
45,000 at full scale), nothing per device; the device of every base impression
is kept (4 bytes each, 48 MB at full scale) and sorted at the end to count the
distinct devices and the activity tail. The same seed gives the same files byte
for byte (Avro sync marker from the seed).
"""
from __future__ import annotations

import argparse
import functools
import math
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from schemas.formats import load_avro_schema
from schemas.option_values import Integer, Real
from schemas.time_units import MAX_EVENT_TIME_MICROS, MICROS_PER_DAY, iso_micros
from synthetic import files as datafiles

DATASET = "criteo-like"

# Model constants (Cookie Monster paper Sec. 8.4 and the paper's artifact; recorded in generation.json).
CRITEO_ADVERTISERS = 292
CRITEO_IMPRESSIONS = 12_000_000  # at scale 1
CRITEO_CONVERSIONS = 1_300_000  # expected at scale 1 (rates calibrated to it)
CRITEO_USERS = 10_000_000  # expected distinct devices at scale 1
CRITEO_DAYS = 90
CRITEO_SHARE_SIGMA = 2.2  # advertiser weights ~ lognormal(0, 2.2)
CRITEO_LARGEST_SHARE = 2.6 / 12.0  # the largest advertiser's share of the impressions
CRITEO_NO_SALES_FRACTION = 0.10  # advertisers with conversion rate 0
CRITEO_RATE_BETA = (1.2, 10.0)  # other advertisers' rates ~ Beta(1.2, 10) before calibration
CRITEO_CATEGORY_IMPRESSIONS = 7_000  # categories per advertiser = 1 + Poisson((I_a / 7,000)^1.75) ...
CRITEO_CATEGORY_GROWTH = 1.75  # ... (I_a: the advertiser's impressions at the generated scale)
CRITEO_CATEGORY_EXPONENT = 0.7  # category k (1-based) drawn with weight 1 / k^0.7
CRITEO_DEVICE_EXPONENT = 2.5  # device activity weight W: P(W = k) proportional to 1 / k^2.5 ...
CRITEO_DEVICE_MAX_WEIGHT = 5_000  # ... for k = 1 .. 5,000
CRITEO_AUDIENCE_SHARE = 0.75  # an impression's device is from its advertiser's audience with this probability
CRITEO_POPULATION_RHO = 0.082907  # impressions per population member (criteo_population_rho(), 6 decimals)
CRITEO_DELAY_MEAN_DAYS = 3.0  # sale delay ~ Exponential(mean 3 days) ...
CRITEO_DELAY_MAX_DAYS = 30  # ... truncated to < 30 days
CRITEO_EXTRA_PURCHASES = 0.35  # value = min(5, 1 + Poisson(0.35))
CRITEO_VALUE_CAP = 5.0  # Delta
CRITEO_EXPECTED_VALUE = 2.0  # c~ of the artifact's accuracy target
CRITEO_BATCH_SIZE = 350
CRITEO_ALPHA, CRITEO_BETA = 0.05, 0.01
CRITEO_EPSILON = CRITEO_VALUE_CAP * math.log(1 / CRITEO_BETA) / (
    CRITEO_ALPHA * CRITEO_BATCH_SIZE * CRITEO_EXPECTED_VALUE)  # 0.657881
CRITEO_WINDOW_DAYS = 30
CRITEO_AUGMENT_WINDOW_DAYS = 30  # augmented impressions in [t - 30 d, t)
CRITEO_MAX_AUGMENT = 100
CRITEO_LOGIC = "last_touch"
CRITEO_PUBLISHER = "publisher.example"
# --api-fields (the W3C Attribution API's fields): impressions spread over publishers, saved by their advertiser's
# ad tech, measurable by the advertiser only (docs/attribution-api.md)
CRITEO_API_PUBLISHERS = 50
CRITEO_API_INTERMEDIARIES = 8


def criteo_api_publisher(index: int) -> str:
    """The publisher of impression ``index`` under ``--api-fields``: round robin over the publishers."""
    return f"publisher-{index % CRITEO_API_PUBLISHERS:02d}.example"


def criteo_api_intermediary(advertiser: int) -> str:
    """The ad tech that saves advertiser ``advertiser``'s impressions under ``--api-fields``."""
    return f"adtech-{advertiser % CRITEO_API_INTERMEDIARIES}.example"
CRITEO_START = "2024-01-01T00:00:00Z"
CRITEO_CHUNK_IMPRESSIONS = 250_000  # impressions generated at once (a chunk of one advertiser)
CRITEO_RECORDS_PER_SHARD = 1_000_000  # about this many (base) records per file


@dataclass(frozen=True)
class CriteoStats:
    """What ``generate_criteo`` wrote (Cookie Monster paper Sec. 8.4): ``impressions`` clicks (plus ``augmented_impressions``
    synthetic ones, ``augment`` per conversion) of ``advertisers`` advertisers by ``users`` distinct devices out of
    ``population``, ``conversions`` sales; ``queries`` batches of ``batch_size`` reports over
    ``query_pairs`` (advertiser, category) pairs of ``advertisers_with_a_query`` advertisers, each report
    requesting ``epsilon``. The devices' activity tail: ``max_device_impressions`` (the most active device's
    impressions), ``top_1pct_device_share`` (the share of the impressions of the ``ceil(users / 100)`` most active
    devices), ``devices_with_10_impressions`` (devices with at least 10) and ``repeat_conversion_share`` (the
    share of the conversions less than 30 days after another of the same device and advertiser)."""

    advertisers: int
    population: int
    users: int
    impressions: int
    augmented_impressions: int
    augment: int
    conversions: int
    batch_size: int
    epsilon: float
    queries: int
    query_pairs: int
    advertisers_with_a_query: int
    advertisers_with_conversions: int
    impressions_per_user: float
    conversion_rate: float
    mean_value: float
    max_value: float
    largest_advertiser: str
    largest_advertiser_impression_share: float
    largest_advertiser_conversions: int
    max_advertiser_conversions: int
    min_advertiser_impressions: int
    max_advertiser_impressions: int
    rate_calibration: float
    max_device_impressions: int
    top_1pct_device_share: float
    devices_with_10_impressions: int
    repeat_conversion_share: float
    impression_files: list[str] = field(default_factory=list)
    conversion_files: list[str] = field(default_factory=list)


def criteo_weight_law(exponent: float = CRITEO_DEVICE_EXPONENT,
                      max_weight: int = CRITEO_DEVICE_MAX_WEIGHT) -> tuple[np.ndarray, np.ndarray]:
    """The device activity weights ``k = 1 .. max_weight`` and their probabilities ``p_k`` proportional to
    ``1 / k^exponent`` (a discrete power law truncated at ``max_weight``)."""
    weights = np.arange(1, max_weight + 1, dtype=np.int64)
    probabilities = weights.astype(float) ** -exponent
    return weights, probabilities / probabilities.sum()


@functools.cache
def criteo_population_rho(exponent: float = CRITEO_DEVICE_EXPONENT, max_weight: int = CRITEO_DEVICE_MAX_WEIGHT,
                          ratio: float = CRITEO_USERS / CRITEO_IMPRESSIONS) -> float:
    """The impressions per population member ``rho`` at which ``N`` impressions drawn from ``N / rho`` devices
    in proportion to their weights (``criteo_weight_law``) reach ``ratio * N`` distinct devices in expectation
    (Cookie Monster paper Sec. 8.4: 10M users for 12M impressions). In the limit of a large population a device of weight
    ``k`` gets ``Poisson(rho k / m)`` impressions, ``m = E[W]``, so the expected distinct share of the population
    is ``g(rho) = sum_k p_k (1 - exp(-rho k / m))``, and ``g(rho) / rho`` falls from 1 as ``rho`` grows:
    bisection for ``g(rho) / rho = ratio``."""
    weights, probabilities = criteo_weight_law(exponent, max_weight)
    mean = float(np.sum(probabilities * weights))

    def distinct_per_draw(rho: float) -> float:
        return float(np.sum(probabilities * -np.expm1(-rho * weights / mean))) / rho

    lo, hi = 1e-9, 100.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if distinct_per_draw(mid) > ratio:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def criteo_shares(weights: np.ndarray, largest: float = CRITEO_LARGEST_SHARE) -> np.ndarray:
    """Advertiser impression shares from positive weights (Cookie Monster paper Sec. 8.4's heavy tail): the largest weight
    gets ``largest``; the others split ``1 - largest`` in proportion to their weights, capped at ``largest``
    (water-filling: capped shares are fixed and the excess is spread over the rest in proportion)."""
    shares = np.zeros(weights.size)
    top = int(np.argmax(weights))
    shares[top] = largest if weights.size > 1 else 1.0
    rest = np.ones(weights.size, dtype=bool)
    rest[top] = False
    capped = np.zeros(weights.size, dtype=bool)
    while rest.any():
        free = rest & ~capped
        budget = 1.0 - shares[top] - largest * np.count_nonzero(capped)
        shares[free] = budget * weights[free] / weights[free].sum()
        over = free & (shares > largest)
        if not over.any():
            break
        capped |= over
        shares[capped] = largest
    return shares


def criteo_keep_probability() -> float:
    """The probability that a sale falls inside the 90 days: ``1 - E[delay] / 90 days`` (a click is uniform in
    the 90 days and the delay is under 30 days), with the truncated exponential's mean
    ``mu - L e^(-L/mu) / (1 - e^(-L/mu))``, ``mu = 3``, ``L = 30``."""
    mu, cap = CRITEO_DELAY_MEAN_DAYS, float(CRITEO_DELAY_MAX_DAYS)
    mean = mu - cap * math.exp(-cap / mu) / (1.0 - math.exp(-cap / mu))
    return 1.0 - mean / CRITEO_DAYS


@dataclass(frozen=True)
class Advertisers:
    """The per-advertiser state of the model (Cookie Monster paper Sec. 8.4): impressions, calibrated conversion rates,
    category weights (row ``a`` has ``categories[a]`` leading non-zero entries)."""

    impressions: np.ndarray
    rates: np.ndarray
    categories: np.ndarray
    category_weights: list
    calibration: float


def criteo_advertisers(rng: np.random.Generator, scale: float) -> Advertisers:
    """Draw the advertisers of the model of the module docstring (Cookie Monster paper Sec. 8.4) at ``scale``."""
    weights = rng.lognormal(0.0, CRITEO_SHARE_SIGMA, size=CRITEO_ADVERTISERS)
    shares = criteo_shares(weights)
    impressions = np.maximum(1, np.rint(CRITEO_IMPRESSIONS * scale * shares)).astype(np.int64)
    no_sales = rng.random(CRITEO_ADVERTISERS) < CRITEO_NO_SALES_FRACTION
    rates = np.where(no_sales, 0.0, rng.beta(*CRITEO_RATE_BETA, size=CRITEO_ADVERTISERS))
    expected = float(np.sum(impressions * rates)) * criteo_keep_probability()
    calibration = CRITEO_CONVERSIONS * scale / expected if expected > 0 else 0.0
    rates = np.minimum(1.0, rates * calibration)
    categories = 1 + rng.poisson((impressions / CRITEO_CATEGORY_IMPRESSIONS) ** CRITEO_CATEGORY_GROWTH)
    category_weights = []
    for k in categories.tolist():
        w = np.arange(1, k + 1, dtype=float) ** -CRITEO_CATEGORY_EXPONENT
        category_weights.append(w / w.sum())
    return Advertisers(impressions, rates, categories, category_weights, calibration)


@dataclass(frozen=True)
class Population:
    """The devices of the model (module docstring, "Devices"; Cookie Monster paper Sec. 8.4) as cells of devices of equal
    activity weight: cell ``c`` holds the devices ``first[c], first[c] + 1, ...`` of weight ``weight[c]``, which
    own the weight units from ``start[c]`` on, ``weight[c]`` consecutive units each (so a uniform unit picks a
    device in proportion to its weight). Advertiser ``a``'s audience owns the units ``[audience[a], audience[a +
    1])``; ``audience[-1]`` is the total weight. Memory: a few arrays of the non-empty cells (about 45,000 at
    full scale), nothing per device."""

    size: int
    weight: np.ndarray
    first: np.ndarray
    start: np.ndarray
    audience: np.ndarray

    def draw(self, rng: np.random.Generator, advertiser: int, n: int) -> np.ndarray:
        """The devices of ``n`` impressions of ``advertiser``: each from the advertiser's audience with probability
        ``CRITEO_AUDIENCE_SHARE``, else from the whole population; in proportion to the devices' weights."""
        own = rng.random(n) < CRITEO_AUDIENCE_SHARE
        units = np.where(own, rng.integers(self.audience[advertiser], self.audience[advertiser + 1], size=n),
                         rng.integers(0, self.audience[-1], size=n))
        return self.device_of(units)

    def device_of(self, units: np.ndarray) -> np.ndarray:
        """The device that owns each weight unit (``0 <= units < audience[-1]``)."""
        cell = np.searchsorted(self.start, units, side="right") - 1
        return self.first[cell] + (units - self.start[cell]) // self.weight[cell]


def criteo_population(rng: np.random.Generator, impressions: np.ndarray) -> Population:
    """Draw the devices of the model (module docstring, "Devices"): advertiser ``a``'s audience of
    ``max(1, round(impressions[a] / rho))`` devices, each of a weight from ``criteo_weight_law`` (a multinomial
    count of devices per weight, heaviest first), the audiences in advertiser order."""
    weights, probabilities = criteo_weight_law()
    weights, probabilities = weights[::-1], probabilities[::-1]
    cell_weight, cell_count, cells_per_audience = [], [], []
    for n in np.maximum(1, np.rint(impressions / CRITEO_POPULATION_RHO)).astype(np.int64).tolist():
        counts = rng.multinomial(n, probabilities)
        present = counts > 0
        cell_weight.append(weights[present])
        cell_count.append(counts[present])
        cells_per_audience.append(int(np.count_nonzero(present)))
    weight, count = np.concatenate(cell_weight), np.concatenate(cell_count)
    start = np.concatenate([[0], np.cumsum(weight * count)])
    first = np.concatenate([[0], np.cumsum(count)[:-1]])
    audience = start[np.concatenate([[0], np.cumsum(cells_per_audience)])]
    return Population(int(count.sum()), weight, first, start[:-1], audience)


def criteo_request(category: int) -> dict:
    """The attribution request of a sale of ``category-<category>`` (Avro form; Cookie Monster paper Sec. 8.1's scenario with
    the artifact's Criteo parameters): no campaign, so the product selects the impressions."""
    return datafiles.last_touch_request(CRITEO_WINDOW_DAYS, [], f"category-{category}", CRITEO_EPSILON, CRITEO_VALUE_CAP,
                              f"category=category-{category}")


def _truncated_exponential_micros(rng: np.random.Generator, n: int) -> np.ndarray:
    """Sale delays: Exponential(mean 3 days) conditioned on < 30 days (inverse CDF), in whole microseconds."""
    mu, cap = CRITEO_DELAY_MEAN_DAYS, float(CRITEO_DELAY_MAX_DAYS)
    days = -mu * np.log1p(-rng.random(n) * -np.expm1(-cap / mu))
    return np.minimum(np.floor(days * MICROS_PER_DAY).astype(np.int64), CRITEO_DELAY_MAX_DAYS * MICROS_PER_DAY - 1)


def generate_criteo(out_dir: str | os.PathLike, *, scale: float = 0.05, augment: int = 0, seed: int = 0,
                    fmt: str = "avro", start: str | int = CRITEO_START, progress: bool = True,
                    sidecars: bool = False, event_files: bool = True, api_fields: bool = False) -> CriteoStats:
    """Write the Criteo-like dataset of Cookie Monster paper Sec. 8.4 (model: the module docstring) at ``scale`` times the
    paper's size to ``out_dir``, with ``augment`` synthetic impressions per conversion (Criteo++, Sec. 8.4, Fig.
    6d); return what was written. ``start`` is an ISO 8601 date(-time) or epoch microseconds. With ``sidecars``
    (Avro only), every file also gets its column side-car (``files.ColumnSidecar``, for the evaluation); with
    ``event_files=False`` as well, only the side-cars are written. With ``api_fields``, impressions carry the W3C
    Attribution API's fields (``criteo_api_publisher``, ``criteo_api_intermediary``; the advertiser alone may
    measure them); nothing else changes, the random draws included. Raises
    ``ValueError`` for a bad option (the message names it)."""
    datafiles.check_format_and_scale(fmt, scale)
    augment = datafiles.check_integer("--augment", augment, 0, CRITEO_MAX_AUGMENT)
    if CRITEO_IMPRESSIONS * scale < CRITEO_ADVERTISERS:
        raise ValueError(f"--scale {scale} is too small: at least {CRITEO_ADVERTISERS / CRITEO_IMPRESSIONS:g} "
                         f"(one impression per advertiser)")
    if CRITEO_IMPRESSIONS * scale / CRITEO_POPULATION_RHO >= 2 ** 40:
        raise ValueError(f"--scale {scale} is too large")
    start_micros = datafiles.start_micros_of(start)
    end_micros = start_micros + CRITEO_DAYS * MICROS_PER_DAY
    if start_micros < 0 or end_micros > MAX_EVENT_TIME_MICROS:
        raise ValueError("the data's 90 days must lie between 1970-01-01 and 2100-01-01 (UTC)")
    augment_micros = CRITEO_AUGMENT_WINDOW_DAYS * MICROS_PER_DAY

    out = datafiles.prepare_output(out_dir)
    (adv_seq, imp_seq, aug_seq, _, device_seq), sync_marker = datafiles.seed_streams(seed, 5, marker=3)
    log = datafiles.Progress(DATASET, progress)
    adv = criteo_advertisers(np.random.Generator(np.random.PCG64(adv_seq)), scale)
    devices = criteo_population(np.random.Generator(np.random.PCG64(device_seq)), adv.impressions)
    population = devices.size
    names = [f"advertiser-{a:03d}.example" for a in range(CRITEO_ADVERTISERS)]
    total_impressions = int(adv.impressions.sum())

    # The work: (advertiser, chunk, first impression, impressions), in order; files are ranges of it.
    work = []
    offset = 0
    for a, n in enumerate(adv.impressions.tolist()):
        for j, lo in enumerate(range(0, n, CRITEO_CHUNK_IMPRESSIONS)):
            size = min(CRITEO_CHUNK_IMPRESSIONS, n - lo)
            work.append((a, j, offset, size))
            offset += size
    imp_shards = max(1, -(-total_impressions // CRITEO_RECORDS_PER_SHARD))
    log(f"{CRITEO_ADVERTISERS} advertisers, {total_impressions:,} impressions in {len(work)} chunks, "
        f"{population:,} devices; generating", force=True)

    device_width, imp_width = len(str(population)), len(str(total_impressions))
    impression_devices = np.empty(total_impressions, dtype=np.uint32 if population <= 2 ** 32 else np.int64)
    columns: dict[str, list] = {"time": [], "user": [], "advertiser": [], "category": [], "value": []}
    counts = {"impressions": 0, "augmented": 0, "conversions": 0}

    def generate_chunk(a: int, j: int, first: int, n: int) -> list:
        """Chunk ``j`` of advertiser ``a``: its impressions and augmented impressions encoded (returned), its
        conversions kept in ``columns``."""
        rng = datafiles.stream(imp_seq, a, j)
        times = np.sort(rng.integers(start_micros, end_micros, size=n, dtype=np.int64))
        users = devices.draw(rng, a, n)
        categories = rng.choice(adv.categories[a], size=n, p=adv.category_weights[a])
        clicked = np.flatnonzero(rng.random(n) < adv.rates[a])
        delays = _truncated_exponential_micros(rng, clicked.size)
        values = np.minimum(1 + rng.poisson(CRITEO_EXTRA_PURCHASES, size=clicked.size), int(CRITEO_VALUE_CAP))
        conv_time = times[clicked] + delays
        kept = conv_time < end_micros
        conv_time, conv_user, conv_category = conv_time[kept], users[clicked][kept], categories[clicked][kept]
        columns["time"].append(conv_time)
        columns["user"].append(conv_user)
        columns["advertiser"].append(np.full(conv_time.size, a, dtype=np.int16))
        columns["category"].append(conv_category.astype(np.int32))
        columns["value"].append(values[kept].astype(np.int8))
        impression_devices[first:first + n] = users

        advertiser = names[a]
        api = {"intermediary": criteo_api_intermediary(a), "callers": (advertiser,)} if api_fields else {}

        def publishers(start: int, count: int) -> str | list[str]:
            return [criteo_api_publisher(i) for i in range(start, start + count)] if api_fields else CRITEO_PUBLISHER

        records = datafiles.encode_impressions(
            fmt, [f"device-{u:0{device_width}d}" for u in users.tolist()], times.tolist(),
            [f"imp-{i:0{imp_width}d}" for i in range(first, first + n)], publisher=publishers(first, n),
            advertiser=advertiser, campaign="", product=[f"category-{k}" for k in categories.tolist()], **api)
        if augment and conv_time.size:
            aug = datafiles.stream(aug_seq, a, j)
            hi = np.repeat(conv_time, augment)
            lo = np.maximum(start_micros, hi - augment_micros)
            aug_times = aug.integers(lo, np.maximum(hi, lo + 1), dtype=np.int64)
            aug_users = np.repeat(conv_user, augment)
            aug_categories = np.repeat(conv_category, augment)
            first_aug = counts["augmented"]
            records += datafiles.encode_impressions(
                fmt, [f"device-{u:0{device_width}d}" for u in aug_users.tolist()], aug_times.tolist(),
                [f"aug-{i}" for i in range(first_aug, first_aug + aug_times.size)],
                publisher=publishers(first_aug, int(aug_times.size)), advertiser=advertiser, campaign="",
                product=[f"category-{k}" for k in aug_categories.tolist()], **api)
            counts["augmented"] += int(aug_times.size)
        counts["impressions"] += n
        counts["conversions"] += int(conv_time.size)
        log(f"{counts['impressions']:,} / {total_impressions:,} impressions "
            f"({100 * counts['impressions'] / total_impressions:.0f}%, advertiser {a + 1} / {CRITEO_ADVERTISERS}), "
            f"{counts['conversions']:,} conversions, {counts['augmented']:,} augmented impressions")
        return records

    def shard_chunks(s: int) -> Iterator[list]:
        for a, j, first, n in work:
            if first * imp_shards // total_impressions == s:
                yield generate_chunk(a, j, first, n)

    imp_schema = load_avro_schema("impression") if fmt == "avro" else None
    impression_paths = datafiles.shard_paths(out, "impressions", imp_shards, fmt)
    for s, path in enumerate(impression_paths):
        datafiles.write_file(path, fmt, imp_schema, sync_marker, shard_chunks(s), sidecars, event_files)

    # Conversions: sorted by time (stable: ties keep the generation order), ids in that order.
    conv = {name: np.concatenate(parts) for name, parts in columns.items()}
    columns.clear()
    order = np.argsort(conv["time"], kind="stable")
    conv = {name: values[order] for name, values in conv.items()}
    total_conversions = int(conv["time"].size)
    conv_shards = max(1, -(-total_conversions // CRITEO_RECORDS_PER_SHARD))
    conv_width = len(str(total_conversions))
    used = np.unique(conv["category"])  # the categories with a sale (one request each)
    encoder = datafiles.RequestEncoder([criteo_request(k) for k in used.tolist()])
    conv_schema = load_avro_schema("conversion") if fmt == "avro" else None
    conversion_paths = datafiles.shard_paths(out, "conversions", conv_shards, fmt)

    def conversion_chunks(lo: int, hi: int) -> Iterator[list]:
        for i in range(lo, hi, 100_000):
            j = min(hi, i + 100_000)
            categories = conv["category"][i:j]
            yield encoder.encode(
                fmt, [f"device-{u:0{device_width}d}" for u in conv["user"][i:j].tolist()], conv["time"][i:j].tolist(),
                [f"conv-{n:0{conv_width}d}" for n in range(i, j)], [names[a] for a in conv["advertiser"][i:j].tolist()],
                conv["value"][i:j].astype(np.float64).tolist(), [f"category-{k}" for k in categories.tolist()],
                np.searchsorted(used, categories).tolist())

    for s, path in enumerate(conversion_paths):
        datafiles.write_file(path, fmt, conv_schema, sync_marker, conversion_chunks(s * total_conversions // conv_shards,
                                                                          (s + 1) * total_conversions // conv_shards),
                             sidecars, event_files)
    log(f"{total_conversions:,} conversions written to {conv_shards} file(s)")

    # Stats.
    per_advertiser = np.bincount(conv["advertiser"], minlength=CRITEO_ADVERTISERS)
    stride = int(adv.categories.max())
    pairs, pair_counts = np.unique(conv["advertiser"].astype(np.int64) * stride + conv["category"], return_counts=True)
    queryable = pair_counts >= CRITEO_BATCH_SIZE
    advertisers_with_a_query = int(np.unique(pairs[queryable] // stride).size)
    largest = int(np.argmax(adv.impressions))
    tail = device_tail(impression_devices)
    users_seen = tail["users"]
    stats = CriteoStats(
        advertisers=CRITEO_ADVERTISERS, population=population, users=users_seen, impressions=total_impressions,
        augmented_impressions=counts["augmented"], augment=augment, conversions=total_conversions,
        batch_size=CRITEO_BATCH_SIZE, epsilon=CRITEO_EPSILON,
        queries=int(np.sum(pair_counts // CRITEO_BATCH_SIZE)), query_pairs=int(np.count_nonzero(queryable)),
        advertisers_with_a_query=advertisers_with_a_query,
        advertisers_with_conversions=int(np.count_nonzero(per_advertiser)),
        impressions_per_user=total_impressions / max(users_seen, 1),
        conversion_rate=total_conversions / total_impressions,
        mean_value=float(conv["value"].mean()) if total_conversions else 0.0,
        max_value=float(conv["value"].max()) if total_conversions else 0.0,
        largest_advertiser=names[largest],
        largest_advertiser_impression_share=float(adv.impressions[largest]) / total_impressions,
        largest_advertiser_conversions=int(per_advertiser[largest]),
        max_advertiser_conversions=int(per_advertiser.max()),
        min_advertiser_impressions=int(adv.impressions.min()), max_advertiser_impressions=int(adv.impressions.max()),
        rate_calibration=adv.calibration,
        max_device_impressions=tail["max_device_impressions"], top_1pct_device_share=tail["top_1pct_device_share"],
        devices_with_10_impressions=tail["devices_with_10_impressions"],
        repeat_conversion_share=repeat_conversion_share(conv["user"], conv["advertiser"], conv["time"]),
        impression_files=[str(path) for path in impression_paths],
        conversion_files=[str(path) for path in conversion_paths],
    )
    parameters = {"scale": scale, "augment": augment, "seed": seed, "format": fmt,
                  "start": iso_micros(start_micros), "start_micros": start_micros, "api_fields": api_fields}
    model = criteo_model()
    if api_fields:
        model |= {"publisher_site": f"publisher-NN.example, impression i's NN = i mod {CRITEO_API_PUBLISHERS}",
                  "intermediary_site": f"adtech-M.example, advertiser a's M = a mod {CRITEO_API_INTERMEDIARIES}",
                  "conversion_callers": ["the impression's advertiser"]}
    datafiles.write_generation_json(out, DATASET, parameters, model, stats)
    return stats


def device_tail(devices: np.ndarray) -> dict:
    """Distinct devices and the tail of their activity, from the device of every impression (sorted in place):
    ``users``, ``max_device_impressions``, ``top_1pct_device_share`` (the share of the impressions of the
    ``ceil(users / 100)`` most active devices) and ``devices_with_10_impressions`` (at least 10). Extra memory:
    a byte and two 32-bit integers per impression or device (the run starts are found a million at a time)."""
    n = devices.size
    if n == 0:
        return {"users": 0, "max_device_impressions": 0, "top_1pct_device_share": 0.0, "devices_with_10_impressions": 0}
    devices.sort()
    new = np.empty(n, dtype=bool)
    new[0] = True
    np.not_equal(devices[1:], devices[:-1], out=new[1:])
    index = np.uint32 if n < 2 ** 32 else np.int64
    step = 1 << 20
    starts = np.concatenate([np.flatnonzero(new[i:i + step]).astype(index) + index(i) for i in range(0, n, step)])
    del new
    counts = np.empty_like(starts)  # impressions of each distinct device
    np.subtract(starts[1:], starts[:-1], out=counts[:-1])
    counts[-1] = n - int(starts[-1])
    del starts
    many = int(np.count_nonzero(counts >= 10))
    top = -(-counts.size // 100)
    counts.partition(counts.size - top)
    heaviest = counts[counts.size - top:]
    return {"users": int(counts.size), "max_device_impressions": int(heaviest.max()),
            "top_1pct_device_share": int(heaviest.sum(dtype=np.int64)) / n, "devices_with_10_impressions": many}


def repeat_conversion_share(users: np.ndarray, advertisers: np.ndarray, times: np.ndarray) -> float:
    """The share of the conversions that come less than ``CRITEO_WINDOW_DAYS`` days after another conversion of
    the same device and advertiser (``times`` sorted): the reports whose attribution windows overlap an earlier
    one's on the same querier, which ARA-like's per-epoch budget cannot pay twice."""
    if users.size == 0:
        return 0.0
    order = np.lexsort((advertisers, users))  # stable: by device, advertiser, then time
    user, advertiser, moment = users[order], advertisers[order], times[order]
    repeat = (user[1:] == user[:-1]) & (advertiser[1:] == advertiser[:-1]) & (
        moment[1:] - moment[:-1] < CRITEO_WINDOW_DAYS * MICROS_PER_DAY)
    return int(np.count_nonzero(repeat)) / users.size


def criteo_model() -> dict:
    """The model constants (for ``generation.json``; Cookie Monster paper Sec. 8.1, 8.4)."""
    return {
        "advertisers": CRITEO_ADVERTISERS, "advertiser_site": "advertiser-NNN.example (also the querier)",
        "impressions_at_scale_1": CRITEO_IMPRESSIONS, "conversions_at_scale_1": CRITEO_CONVERSIONS,
        "users_at_scale_1": CRITEO_USERS, "days": CRITEO_DAYS,
        "advertiser_weights": f"lognormal(0, {CRITEO_SHARE_SIGMA})", "largest_share": CRITEO_LARGEST_SHARE,
        "share_rule": "largest weight gets largest_share; the others split the rest in proportion to their "
                      "weights, capped at largest_share (water-filling)",
        "advertiser_impressions": "max(1, round(impressions_at_scale_1 * scale * share))",
        "no_sales_fraction": CRITEO_NO_SALES_FRACTION, "rate": f"Beta{CRITEO_RATE_BETA}",
        "rate_calibration": "rates times one factor so that expected conversions = conversions_at_scale_1 * scale "
                            "(capped at 1)",
        "keep_probability": criteo_keep_probability(),
        "categories_per_advertiser": f"1 + Poisson((advertiser_impressions / {CRITEO_CATEGORY_IMPRESSIONS})"
                                     f"^{CRITEO_CATEGORY_GROWTH})",
        "category_weight": f"1 / k^{CRITEO_CATEGORY_EXPONENT}",
        "device_weight": f"P(W = k) proportional to 1 / k^{CRITEO_DEVICE_EXPONENT}, k = 1 .. {CRITEO_DEVICE_MAX_WEIGHT}",
        "audience": "max(1, round(advertiser_impressions / population_rho)) devices per advertiser, weights i.i.d.",
        "population_rho": CRITEO_POPULATION_RHO, "audience_share": CRITEO_AUDIENCE_SHARE,
        "device": "from the advertiser's audience with probability audience_share, else from all the audiences; "
                  "in proportion to the device weights",
        "delay": f"Exponential(mean {CRITEO_DELAY_MEAN_DAYS} days) truncated to < {CRITEO_DELAY_MAX_DAYS} days",
        "value": f"min({CRITEO_VALUE_CAP:g}, 1 + Poisson({CRITEO_EXTRA_PURCHASES}))",
        "publisher_site": CRITEO_PUBLISHER, "campaign_ids": [], "product": "category-K",
        "query_key": "category=category-K", "window_days": CRITEO_WINDOW_DAYS, "logic": CRITEO_LOGIC,
        "dimension": 1, "report_global_sensitivity": CRITEO_VALUE_CAP, "query_global_sensitivity": CRITEO_VALUE_CAP,
        "norm": "L1", "alpha": CRITEO_ALPHA, "beta": CRITEO_BETA, "batch_size": CRITEO_BATCH_SIZE,
        "expected_value": CRITEO_EXPECTED_VALUE,
        "epsilon": "sensitivity * ln(1 / beta) / (alpha * batch_size * expected_value)", "epsilon_value": CRITEO_EPSILON,
        "augment_window_days": CRITEO_AUGMENT_WINDOW_DAYS,
        "chunk_impressions": CRITEO_CHUNK_IMPRESSIONS, "records_per_file": CRITEO_RECORDS_PER_SHARD,
    }


# --------------------------------------------------------------------------- CLI (registered by pipelines.generate)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``python -m pipelines.generate criteo-like`` (Cookie Monster paper Sec. 8.4)."""
    datafiles.add_common_arguments(parser, CRITEO_START, f"start of the {CRITEO_DAYS} days, YYYY-MM-DD (00:00 UTC) or ISO 8601")
    parser.add_argument("--scale", type=Real(0, low_open=True), default=0.05,
                        help="fraction of the paper's size: about 12M * scale impressions, 1.3M * scale conversions "
                             "and 10M * scale users (default 0.05)")
    parser.add_argument("--augment", type=Integer(0, CRITEO_MAX_AUGMENT), default=0,
                        help=f"synthetic impressions per conversion in its {CRITEO_AUGMENT_WINDOW_DAYS}-day window "
                             f"(Criteo++; the paper uses 0, 3, 6, 9), 0 to {CRITEO_MAX_AUGMENT} (default 0)")
    parser.add_argument("--api-fields", action="store_true",
                        help=f"the W3C Attribution API's fields: impressions over {CRITEO_API_PUBLISHERS} publishers "
                             f"(round robin), saved by one of {CRITEO_API_INTERMEDIARIES} ad techs (the advertiser's), "
                             "measurable by their advertiser only (docs/attribution-api.md)")


def run_cli(args: argparse.Namespace) -> int:
    """Generate from parsed options and print the summary (``ValueError`` / ``OSError`` go to the caller)."""
    began = time.monotonic()
    stats = generate_criteo(args.output, scale=args.scale, augment=args.augment, seed=args.seed, fmt=args.format,
                            start=args.start, progress=not args.quiet, api_fields=args.api_fields)
    print(f"generate {DATASET}: wrote {stats.impressions:,} impressions (+{stats.augmented_impressions:,} augmented) "
          f"of {stats.advertisers} advertisers by {stats.users:,} devices ({stats.impressions_per_user:.2f} "
          f"impressions each) and {stats.conversions:,} conversions in {time.monotonic() - began:.1f} s")
    print(f"  largest advertiser: {stats.largest_advertiser_impression_share:.1%} of the impressions, "
          f"{stats.largest_advertiser_conversions:,} conversions; {stats.advertisers_with_conversions} advertisers "
          f"with conversions")
    print(f"  devices: the top 1 % hold {stats.top_1pct_device_share:.1%} of the impressions, the most active "
          f"{stats.max_device_impressions:,}; {stats.repeat_conversion_share:.1%} of the conversions follow another "
          f"of the same device and advertiser within {CRITEO_WINDOW_DAYS} days")
    print(f"  queries: {stats.queries:,} batches of {stats.batch_size} over {stats.query_pairs} (advertiser, category) "
          f"pairs of {stats.advertisers_with_a_query} advertisers, epsilon {stats.epsilon:.6g}")
    datafiles.print_outputs(stats, args.output)
    return 0
