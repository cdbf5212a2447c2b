"""Limits of the Attribution Reporting and Private Aggregation APIs: on the values of the summary-report and
event-level clients' events (Ghazi et al. Sec. 2.1.2 and 2.2), which the codecs validate against and the mechanisms
clamp to, and on one aggregatable report, which the Aggregation Service job enforces (``schemas.aggregatable``;
docs/aggregation.md, "Limits").

Sources: the Attribution Reporting explainer, AGGREGATE.md ("Attribution trigger registration": aggregatable values
in [1, 2^16]; "Contribution bounding and budgeting": L1 = 65536 per source and "a limit of 20 contributions per
aggregatable report"; "Encrypted payload": key ids of up to 128 characters); the Private Aggregation API
specification ("Implementation-defined values": a maximum number of report contributions per context type) and
explainer ("Limiting the number of contributions per report": 20 for Shared Storage, 100 for Protected Audience;
examples with L1 = 2^16), and Chrome's Shared Storage ``maxContributions`` (blink-dev "Intent to Ship: Private
Aggregation API: per-context contribution limits for Shared Storage callers", 2025: 1 to 1000, reports padded
to it).
"""
from __future__ import annotations

from schemas.time_units import SECONDS_PER_DAY

MIN_EXPIRY_SECONDS = SECONDS_PER_DAY  # a source's expiry is clamped to [1 day, 30 days]
MAX_EXPIRY_SECONDS = 30 * SECONDS_PER_DAY  # also the default
MAX_AGGREGATION_ENTRIES = 20  # aggregation keys, trigger data and values each hold at most 20 entries
CONTRIBUTION_BUDGET = 65_536  # L1 = 2^16: the sum of the values one source (ARA) or report may contribute
MAX_AGGREGATABLE_VALUE = CONTRIBUTION_BUDGET  # one value is at most the contribution budget

# A source's event-level configuration (Ghazi et al. Sec. 2.2; the Attribution Reporting specification): what the
# event-level client checks and the registration-header parser enforces.
MAX_TRIGGER_DATA = 32  # "trigSpec ... is a list of at most 32 elements"
MAX_REPORT_WINDOWS = 5  # "at most five reporting windows"
MAX_EVENT_LEVEL_REPORTS = 20
MAX_EVENT_LEVEL_EPSILON = 14.0
DEFAULT_MAX_REPORTS = {"navigation": 3, "event": 1}  # by source type
DEFAULT_TRIGGER_DATA_CARDINALITY = {"navigation": 8, "event": 2}

# One aggregatable report, as the Aggregation Service job reads it.
MAX_REPORT_CONTRIBUTIONS = 20  # non-null contributions: ARA's limit, Private Aggregation's Shared Storage default
MAX_PAYLOAD_ENTRIES = 1_000  # entries of a payload, null (padding) ones included: the largest maxContributions
# bytes of a payload, encrypted or not: the largest canonical payload of MAX_PAYLOAD_ENTRIES entries (48 bytes each
# with 8-byte filtering ids, plus a 29-byte frame) and HPKE's 48 bytes (encapsulated key and tag), with room to spare
MAX_PAYLOAD_BYTES = 65_536
MAX_KEY_ID_CHARS = 128  # a public key's id
# shared_info, several times what a browser writes (two origins, a UUID, two timestamps, a version, the api)
MAX_SHARED_INFO_CHARS = 4_096
# the most the values of any payload can sum to (MAX_PAYLOAD_ENTRIES entries of 4-byte values): a bound that bounds nothing
UNBOUNDED_VALUE_SUM = MAX_PAYLOAD_ENTRIES * (2**32 - 1)
DEFAULT_FILTERING_ID_MAX_BYTES = 1  # Attribution Reporting's aggregatable_filtering_id_max_bytes: ids below 256
MAX_FILTERING_ID_MAX_BYTES = 8  # an Aggregation Service filtering id is at most 8 bytes
DEFAULT_MAX_EVENT_STATES = 3  # Attribution Reporting's attribution scopes: a source's max_event_states by default
MAX_SCOPES_PER_SOURCE = 20
MAX_SCOPE_CHARS = 50
MAX_NAMED_BUDGETS = 25  # Attribution Reporting's named budgets of a source, and the characters of a name
MAX_NAMED_BUDGET_CHARS = 25
