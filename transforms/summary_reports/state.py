"""The streaming summary-report clients' per-device state as explicit records (``transforms.core.state``).

Privacy: what must survive a restart is each privacy unit's contribution budget, L_0 and L_1 spent (Ghazi et al.
Alg. 2 and 3): a reset budget would let a source (ARA) or a (device, reporting origin, 10-minute window) (PAA)
contribute again, beyond the bound the Aggregation Service's guarantee assumes.
"""
from __future__ import annotations

from schemas.proto import events_pb2, state_pb2
from schemas.row_messages import EncodedRows, length_delimited, message_of, row_of
from schemas.rows import AraSource
from transforms.core.device_state import device_record_codec, filled
from transforms.core.state import StateCodec
from transforms.summary_reports.mechanisms.ara_client import AraDevice, AraSummaryClient, RegisteredSource
from transforms.summary_reports.mechanisms.contributions import ContributionBudget, SummaryClient
from transforms.summary_reports.mechanisms.paa_client import PaaDevice, PaaSummaryClient


def _budget_to(budget: ContributionBudget, message: state_pb2.ContributionBudgetState) -> None:
    message.contributions, message.total = budget.count, budget.total


def _budget_from(message: state_pb2.ContributionBudgetState) -> ContributionBudget:
    budget = ContributionBudget()
    budget.count, budget.total = message.contributions, message.total
    return budget


_ARA_SOURCES = state_pb2.AraDeviceState.DESCRIPTOR.fields_by_name["sources"].number
_ENTRY_SOURCE, _ENTRY_BUDGET = (state_pb2.RegisteredAraSourceState.DESCRIPTOR.fields_by_name[name].number
                                for name in ("source", "budget"))


def _source_field(row: AraSource, _version: None) -> bytes:
    """A registered source's row as the ``source`` field of its entry."""
    return length_delimited(_ENTRY_SOURCE, message_of(row, events_pb2.AraSource()).SerializeToString())


def _ara_entry(registered: RegisteredSource, budget: tuple[int, int], encoded: EncodedRows) -> bytes:
    """A registered source's entry (a ``sources`` field of the device's state) with its ``budget`` (L_0, L_1)."""
    count, total = budget
    spent = state_pb2.ContributionBudgetState(contributions=count, total=total).SerializeToString()
    source = encoded.kept(registered.source, None, _source_field)
    return length_delimited(_ARA_SOURCES, source + length_delimited(_ENTRY_BUDGET, spent))


def _ara_bytes(device: AraDevice, encoded: EncodedRows) -> bytes:
    """The device's ``AraDeviceState``, put together from the bytes kept for each registered source: a device is
    encoded at every firing that replays it, where at most a few of its sources registered, expired or spent
    budget, so its cost follows what changed, not every source it holds (a device of 50 sources that registers
    two: 68 to 109 us against 235 to 310 for a message filled with them all; one of 15 that registers four gains
    nothing measurable, benchmarks/README.md, session 13). An entry is kept while its source's budget stays; its
    source row's bytes for as long as the source is registered."""
    entries = []
    for registered in device.sources:
        budget = registered.budget
        entries.append(encoded.kept(registered, (budget.count, budget.total),
                                    lambda part, spent: _ara_entry(part, spent, encoded)))
    return b"".join(entries)


def _ara_from(message: state_pb2.AraDeviceState) -> AraDevice:
    device = AraDevice()
    for entry in message.sources:
        registered = RegisteredSource(row_of(AraSource, entry.source))  # its expiry follows from the source
        registered.budget = _budget_from(entry.budget)
        device.sources.append(registered)
    return device


def _paa_to(device: PaaDevice, message: state_pb2.PaaDeviceState, encoded: EncodedRows) -> None:
    """A PAA device's state holds no rows (``encoded`` unused)."""
    for origin, storage in device.storage.items():
        if not (isinstance(storage, frozenset) and all(type(item) is str for item in storage)):
            raise TypeError(f"the PAA state record holds reach counting's storage (campaigns seen), not {storage!r}")
        message.storage.add(reporting_origin=origin, campaigns_seen=sorted(storage))
    for (origin, window), budget in device.budgets.items():
        _budget_to(budget, message.budgets.add(reporting_origin=origin, window=window).budget)


def _paa_from(message: state_pb2.PaaDeviceState) -> PaaDevice:
    device = PaaDevice()
    for entry in message.storage:
        device.storage[entry.reporting_origin] = frozenset(entry.campaigns_seen)
    for window in message.budgets:
        device.budgets[(window.reporting_origin, window.window)] = _budget_from(window.budget)
    return device


def client_record_codec(client: SummaryClient) -> StateCodec:
    """The codec of a device's record (``DeviceRecordState``) for ``client``'s state."""
    if isinstance(client, AraSummaryClient):
        return device_record_codec("ara_device", _ara_bytes, _ara_from)
    if isinstance(client, PaaSummaryClient):
        return device_record_codec("paa_device", filled(state_pb2.PaaDeviceState, _paa_to), _paa_from)
    raise TypeError(f"no state record for the client {type(client).__name__}")

