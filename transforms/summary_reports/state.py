"""The streaming summary-report clients' per-device state as explicit records (``transforms.core.state``).

Privacy: what must survive a restart is each privacy unit's contribution budget, L_0 and L_1 spent (Ghazi et al.
Alg. 2 and 3): a reset budget would let a source (ARA) or a (device, reporting origin, 10-minute window) (PAA)
contribute again, beyond the bound the Aggregation Service's guarantee assumes.
"""
from __future__ import annotations

from schemas.proto import state_pb2
from schemas.row_messages import EncodedRows, row_of
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


def _ara_to(device: AraDevice, message: state_pb2.AraDeviceState, encoded: EncodedRows) -> None:
    for registered in device.sources:
        entry = message.sources.add()
        encoded.into(registered.source, entry.source)
        _budget_to(registered.budget, entry.budget)


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
        return device_record_codec("ara_device", filled(state_pb2.AraDeviceState, _ara_to), _ara_from)
    if isinstance(client, PaaSummaryClient):
        return device_record_codec("paa_device", filled(state_pb2.PaaDeviceState, _paa_to), _paa_from)
    raise TypeError(f"no state record for the client {type(client).__name__}")

