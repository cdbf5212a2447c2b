"""What the two summary-report clients share (Ghazi et al. Sec. 2.1.2-2.1.3): budgets, reports and their randomness.

ARA-SR-Client (Alg. 2, ``ara_client.py``) and PAA-SR-Client (Alg. 3, ``paa_client.py``) both send, for every event
they handle, exactly one aggregatable report (r, k, v) or a null report (r, ⊥, ⊥), after checking two budgets
of a privacy unit (an ARA source; a PAA (device, reporting origin, 10-minute window)):

* the sparsity budget Lambda_0 on L_0, the number of non-zero contributions, and
* the contribution budget Lambda_1 on L_1, the sum of the contributed values.

A report is sent only if both stay within their budgets, "L_0 + 1 <= Lambda_0 and L_1 + v <= Lambda_1"
(``ContributionBudget.charge``); otherwise the event gets a null report and nothing is charged. A report here
may carry several contributions (ARA: one per source key the trigger has a value for); each counts in L_0,
so L_0 bounds the number of keys a privacy unit can touch, which is what the Aggregation Service's
key-discovery threshold tau = L1 (1 + ln(L0 / delta) / eps) assumes. With one contribution per report, as in
the paper, L_0 is the number of reports.

Reports have a fixed shape: the payload always holds ``PAD_TO`` = 20 contributions, padded with null ones
(bucket 0, value 0), so neither its size nor anything in ``shared_info`` depends on attribution or budgets.
The report id r is a fresh random UUID, and the report is scheduled after a random delay of 10 minutes to an
hour, as browsers do. Both come from a ``RandomSource``: secure by default; with a ``SeededSource`` they are a
function of (seed, device, event), so batch and streaming runs send identical reports.

The ``SummaryClient`` protocol is what the Beam wiring (``transforms/summary_reports/clients.py``) replays per device.
No Beam import here.
"""
from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from schemas.time_units import MICROS_PER_SECOND
from transforms.core.mechanisms.noise import RandomSource
from transforms.summary_reports.mechanisms.aggregation import DEFAULT_L0, DEFAULT_L1

PAD_TO = 20  # contributions per payload, as Chrome pads them
REPORT_VERSION = "1.0"
MIN_DELAY_SECONDS = 10 * 60  # a report is scheduled 10 minutes to 1 hour after its event
MAX_DELAY_SECONDS = 60 * 60


@dataclass(frozen=True)
class ContributionLimits:
    """Lambda_0 (non-zero contributions) and Lambda_1 (sum of values) of one privacy unit (Alg. 2 and 3 Params).

    The defaults are the Aggregation Service's: L1 = 2^16 as the ARA and PAA specifications, and L0 = 20, so a
    privacy unit never touches more keys than the service's key-discovery threshold assumes."""

    l0: int = DEFAULT_L0
    l1: int = DEFAULT_L1

    def __post_init__(self) -> None:
        for name, value in (("l0", self.l0), ("l1", self.l1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")


class ContributionBudget:
    """The trackers L_0 and L_1 of one privacy unit, both 0 when it starts (Alg. 2 source registration; Alg. 3
    start of a time window)."""

    __slots__ = ("count", "total")

    def __init__(self) -> None:
        self.count = 0
        self.total = 0

    def fits(self, values: Sequence[int], limits: ContributionLimits) -> bool:
        """Whether the non-zero ``values`` of one report fit: L_0 + |values| <= Lambda_0 and L_1 + sum <= Lambda_1."""
        return self.count + len(values) <= limits.l0 and self.total + sum(values) <= limits.l1

    def charge(self, values: Sequence[int], limits: ContributionLimits) -> bool:
        """Charge the non-zero ``values`` of one report if they fit; otherwise charge nothing. Whether they were
        charged."""
        if not self.fits(values, limits):
            return False
        self.count, self.total = self.count + len(values), self.total + sum(values)
        return True


class ClientReport(NamedTuple):
    """One report a client sends: its ``shared_info`` fields and its contributions ((bucket, value) or (bucket,
    value, filtering id), ...), none for a null report, with filtering ids of ``filtering_id_bytes`` bytes. Nothing
    in it names the device; ``transforms.summary_reports.report_records`` writes it in the Aggregation Service's
    format."""

    api: str
    report_id: str
    reporting_origin: str
    attribution_destination: str | None
    scheduled_report_time: int  # seconds since the Unix epoch
    contributions: tuple
    filtering_id_bytes: int = 1



def keyed_below(source: RandomSource, key: tuple, n: int) -> int:
    """An integer in [0, n) drawn for ``key``: a 128-bit keyed token reduced mod n (its distance from uniform is
    below n / 2^128). Seeded: a function of (seed, key); secure: fresh."""
    return int(source.keyed_token(key), 16) % n


def report_id(source: RandomSource, key: tuple) -> str:
    """The random UUID r of the report of the event named by ``key``, drawn from ``source`` for ``key``."""
    return str(uuid.UUID(hex=source.keyed_token(("report", *key)), version=4))


def make_report(
    source: RandomSource, key: tuple, *, api: str, reporting_origin: str, destination: str | None,
    event_time_micros: int, contributions: Iterable[tuple[int, int]] = (),
) -> ClientReport:
    """The report of the event named by ``key`` (the client, the device and the event's id): a random UUID r and
    a delay uniform on [10 minutes, 1 hour] after the event, drawn from ``source`` for ``key``."""
    delay = MIN_DELAY_SECONDS + keyed_below(source, ("delay", *key), MAX_DELAY_SECONDS - MIN_DELAY_SECONDS + 1)
    return ClientReport(
        api, report_id(source, key), reporting_origin, destination, event_time_micros // MICROS_PER_SECOND + delay,
        tuple(contributions),
    )


class SummaryClient(Protocol):
    """A device-side client as the Beam wiring replays it, per device: in batch the whole history in one call,
    in streaming in successive pieces (each after the watermark passed it), over the same state. ``refused``
    counts the reports made null because their contributions did not fit the budget (SENSITIVE in aggregate: the
    operator's metrics only, docs/operations.md), since the caller last set it to 0."""

    refused: int

    def new_state(self) -> Any:
        """The state of a device that has seen nothing."""

    def order(self, event: Any) -> tuple:
        """The replay order of a device's events (event time first)."""

    def replay(self, device_id: str, events: Iterable[Any], state: Any, source: RandomSource) -> Iterator[ClientReport]:
        """Feed ``events`` (in ``order``, none before an earlier call's) to the device; one report per report event."""

    def forget_before(self, state: Any, time_micros: int) -> None:
        """Drop what no event at or after ``time_micros`` can use (expired sources, past windows)."""
