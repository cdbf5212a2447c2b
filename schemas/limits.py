"""Limits the Attribution Reporting API puts on the values of the summary-report and event-level clients' events
(Ghazi et al. Sec. 2.1.2 and 2.2): the codecs validate against them and the mechanisms clamp to them."""
from __future__ import annotations

from schemas.time_units import SECONDS_PER_DAY

MIN_EXPIRY_SECONDS = SECONDS_PER_DAY  # a source's expiry is clamped to [1 day, 30 days]
MAX_EXPIRY_SECONDS = 30 * SECONDS_PER_DAY  # also the default
MAX_AGGREGATION_ENTRIES = 20  # aggregation keys, trigger data and values each hold at most 20 entries
MAX_AGGREGATABLE_VALUE = 65_536  # one value is at most the contribution budget L1 = 2^16
