"""When a report is sent (``transforms/core/mechanisms/report_delivery.py``): Chrome's timed retries (5 and 15
minutes, then none) and the navigation-based retry, on the interop cases' timelines and around them."""
from __future__ import annotations

import pytest

from transforms.core.mechanisms.report_delivery import (
    ALWAYS_ONLINE,
    Connectivity,
    retry_delay_micros,
    sent_at,
)

MS = 1_000  # microseconds per millisecond
DUE = 172_800_000 * MS  # the interop cases' report time: 2 days after their source


def test_chromes_failed_report_delays():
    assert [retry_delay_micros(failures) for failures in (1, 2, 3)] == [300_000_000 * 1, 900_000_000, None]


def test_an_online_device_sends_at_the_report_time():
    assert sent_at(DUE, ALWAYS_ONLINE) == DUE
    assert sent_at(DUE, Connectivity.of([(DUE - 1, False), (DUE, True)], [])) == DUE  # back online just in time


def test_basic_retry_a_report_failing_once_is_sent_five_minutes_later():
    connectivity = Connectivity.of([(172_799_000 * MS, False), (172_800_001 * MS, True)], [])
    assert sent_at(DUE, connectivity) == 173_100_000 * MS


def test_basic_disconnected_two_failed_retries_and_the_report_is_never_sent():
    connectivity = Connectivity.of([(2_000 * MS, False), (174_100_000 * MS, False)], [])
    assert sent_at(DUE, connectivity) is None
    back = Connectivity.of([(2_000 * MS, False), (DUE + 20 * 60_000 * MS, True)], [])  # online for the second retry
    assert sent_at(DUE, back) == DUE + 20 * 60_000 * MS


@pytest.mark.parametrize(("retry", "online_at", "navigation", "sent"), [
    (1, 172_800_001, 173_900_000, 174_200_000),  # navigation_retry_first_attempt
    (2, 173_100_001, 174_900_000, 175_200_000),  # navigation_retry_second_attempt
    (3, 174_000_001, 174_900_000, 175_200_000),  # navigation_retry_third_attempt
])
def test_the_navigation_retry_waits_for_a_navigation_and_comes_five_minutes_after_it(retry, online_at, navigation, sent):
    connectivity = Connectivity.of([(172_799_000 * MS, False), (online_at * MS, True)], [navigation * MS])
    assert sent_at(DUE, connectivity, navigation_retry=retry) == sent * MS
    no_navigation = Connectivity.of([(172_799_000 * MS, False), (online_at * MS, True)], [])
    assert sent_at(DUE, no_navigation, navigation_retry=retry) is None  # it waits for one that never comes


def test_a_navigation_before_the_failure_does_not_count_and_the_retry_number_is_checked():
    connectivity = Connectivity.of([(1 * MS, False), (DUE + 1, True)], [DUE - 1])
    assert sent_at(DUE, connectivity, navigation_retry=1) is None
    with pytest.raises(ValueError, match="first, second or third"):
        sent_at(DUE, connectivity, navigation_retry=4)
