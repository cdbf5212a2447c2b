"""A client's report in the Aggregation Service's wire format (``schemas.aggregatable``): the ``shared_info`` JSON a
browser writes and the ``AggregatableReport`` Avro record with its CBOR payload, in clear text or HPKE-encrypted.
The clients (``mechanisms/``) decide what a report holds; this module only encodes it."""
from __future__ import annotations

from schemas.aggregatable import encode_payload, encrypt_payload, report_record, shared_info_json
from transforms.summary_reports.mechanisms.contributions import PAD_TO, REPORT_VERSION, ClientReport

_NULL_PAYLOAD = encode_payload([], pad_to=PAD_TO)  # the clear-text payload of every null report (CBOR is slow)


def shared_info_of(report: ClientReport) -> str:
    """The report's ``shared_info`` JSON, as a browser writes it (no ``source_registration_time``: ARA's
    default is to exclude it)."""
    return shared_info_json(
        api=report.api, report_id=report.report_id, reporting_origin=report.reporting_origin,
        scheduled_report_time=report.scheduled_report_time, version=REPORT_VERSION,
        attribution_destination=report.attribution_destination,
    )


def report_record_of(report: ClientReport, public_key: tuple[str, bytes] | None = None) -> dict:
    """The ``AggregatableReport`` Avro record of ``report``: a CBOR payload of 20 contributions (filtering id 0
    unless a contribution gives one), in clear text, or HPKE-encrypted to ``public_key`` = (key id, raw X25519
    key)."""
    info = shared_info_of(report)
    contributions, id_bytes = report.contributions, report.filtering_id_bytes
    if not contributions and id_bytes == 1:
        payload = _NULL_PAYLOAD
    else:
        triples = [(c[0], c[1], c[2] if len(c) == 3 else 0) for c in contributions]
        payload = encode_payload(triples, pad_to=PAD_TO, filtering_id_bytes=id_bytes)
    if public_key is None:
        return report_record(info, payload)
    key_id, key = public_key
    return report_record(info, encrypt_payload(payload, info, key), key_id)
