"""Big Bird's one deduction for several intermediaries (Tholoniat et al., "Beyond Per-Querier Budgets", Sec. 4: each
report charges its beneficiary's per-site budget; pdslib ``cross_report.rs``, ``measure_conversion`` and
``AttributionObject::get_report``), an option beside the W3C Attribution API (``api.bs`` has one caller per
``measureConversion``).

A conversion whose report several intermediaries (ad-techs) want is attributed once: ``measure_shared_conversion``
matches the impressions that allow every intermediary as a conversion caller and charges each epoch's global budget,
conversion-site quota and impression-site quotas once, as ``measureConversion`` does (the per-site budget left out).
Each intermediary then asks ``SharedConversion.report`` for its histogram buckets, which charges only that
intermediary's per-site budget, in each epoch the attribution read: the L1 norm of its buckets over the noise scale
when the lookback lies in one epoch, twice the value over it otherwise. An epoch its budget refuses drops out of its
report alone (the value stays where the attribution put it: nothing moves to an earlier impression). A bucket is
reported once: a request naming a bucket already reported gets all zeros and charges nothing. Beam-free.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from transforms.attribution_api.mechanisms.backend import Backend, ConversionRequest
from transforms.core.mechanisms.global_filters import SITE, FilterId


@dataclass
class SharedConversion:
    """pdslib's ``AttributionObject``: a conversion attributed once, whose buckets each beneficiary reports."""

    backend: Backend
    request: ConversionRequest
    single_epoch: bool
    beneficiaries: frozenset[str]
    epochs: tuple[int, ...]  # the epochs whose global budget and quotas paid
    shares: dict[int, list[tuple[int, int]]]  # epoch -> (bucket, value) of each impression credited there
    reported: set[int] = field(default_factory=set)  # the buckets already reported

    def report(self, beneficiary: str, buckets: Iterable[int]) -> list[int]:
        """pdslib's ``get_report``: ``beneficiary``'s histogram over ``buckets`` (the others zero), its per-site
        budget charged in each epoch; all zeros, nothing charged, when a bucket was reported before."""
        if beneficiary not in self.beneficiaries:
            raise ValueError(f"{beneficiary} is not one of the conversion's intermediaries")
        wanted = set(buckets)
        histogram = [0] * self.request.histogram_size
        if wanted & self.reported:
            return histogram
        self.reported |= wanted
        kept = {epoch: [(bucket, value) for bucket, value in self.shares.get(epoch, []) if bucket in wanted]
                for epoch in self.epochs}
        l1_norm = sum(value for pairs in kept.values() for _, value in pairs)
        deduction, _ = self.backend._deductions(self.request, self.single_epoch, l1_norm)
        for epoch, pairs in kept.items():
            if self.backend._deduct({FilterId(SITE, epoch, beneficiary): deduction}):
                for bucket, value in pairs:
                    histogram[bucket] += value
        return histogram


def measure_shared_conversion(backend: Backend, site: str, intermediaries: Iterable[str],
                              options: Mapping[str, object]) -> SharedConversion:
    """pdslib's ``measure_conversion``: ``measureConversion``'s validation and matching (every intermediary must be
    among an impression's conversion callers when it names any), each epoch's global budget and quotas charged
    once; nothing is attributed when the API is disabled."""
    beneficiaries = frozenset(intermediaries)
    if not beneficiaries:
        raise ValueError("a shared conversion names at least one intermediary")
    backend._check_site(site)
    for intermediary in beneficiaries:
        backend._check_site(intermediary)
    conversion = backend._conversion(site, beneficiaries, options)
    request = conversion.request
    if not backend.enabled:
        return SharedConversion(backend, request, False, beneficiaries, (), {})
    paid = backend._epochs_within_budget(conversion, charge_site=False)
    shares: dict[int, list[tuple[int, int]]] = {}
    matched = [impression for impressions in paid.values() for impression in impressions]
    if matched:
        for impression, share in backend._shares(matched, request):
            if impression.histogram_index < request.histogram_size:
                epoch = backend.current_epoch(impression.timestamp)
                shares.setdefault(epoch, []).append((impression.histogram_index, share))
    _, single_epoch = backend._window(conversion.now, request)
    return SharedConversion(backend, request, single_epoch, beneficiaries, tuple(paid), shares)
