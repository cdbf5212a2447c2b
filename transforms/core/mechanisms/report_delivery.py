"""When a browser actually sends an Attribution Reporting report: its delivery, given the device's network
connectivity and navigations (Chrome's ``AttributionManagerImpl``: ``GetFailedReportDelay`` and the
navigation-based retry of ``kAttributionReportNavigationBasedRetry``; the interop suite's ``connection`` and
``navigation`` inputs).

A report is first tried at its report time. A try while the device is offline fails; after the k-th failure the
report is tried again:

* timed: 5 minutes after a first failure, 15 minutes after a second (5 x 3^(k - 1) minutes), no third timed try;
* or, for the one retry that ``navigation_retry`` names (first, second or third), at the first navigation after
  the failure, 5 minutes after it (what the interop cases ``navigation_retry_*_attempt`` show for each of the
  three: the retry waits for a navigation and then takes the first retry's delay; with the navigation retry as the
  third, a report gets three retries);
* a report whose tries are all spent, or that waits for a navigation that never comes, is never sent.

A report's body keeps its scheduled report time; only the time it is sent moves. Verbose debug reports are sent
once, at once, and are not retried. Beam-free.
"""
from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass

MICROS_PER_MINUTE = 60 * 1_000_000
FIRST_RETRY_DELAY_MICROS = 5 * MICROS_PER_MINUTE  # Chrome's kInitialReportDelay
RETRY_DELAY_FACTOR = 3  # Chrome's kDelayFactor
TIMED_RETRIES = 2  # Chrome's kMaxFailedSendAttempts
NAVIGATION_RETRIES = {"first_retry": 1, "second_retry": 2, "third_retry": 3}  # kNavigationRetryAttemptOptions


@dataclass(frozen=True)
class Connectivity:
    """A device's network connectivity and navigations over time: from ``change_times[i]`` on the device is online
    when ``online_from[i]`` (online before the first change); ``navigations`` the times navigations committed. All
    in time order."""

    change_times: tuple[int, ...] = ()
    online_from: tuple[bool, ...] = ()
    navigations: tuple[int, ...] = ()

    @classmethod
    def of(cls, changes: Iterable[tuple[int, bool]], navigations: Iterable[int]) -> Connectivity:
        """From (time, online) changes and navigation times, in any order."""
        ordered = sorted(changes, key=lambda change: change[0])
        return cls(tuple(time for time, _ in ordered), tuple(online for _, online in ordered),
                   tuple(sorted(navigations)))

    def online(self, time_micros: int) -> bool:
        """Whether the device is online at ``time_micros`` (the last change at or before it decides)."""
        index = bisect.bisect_right(self.change_times, time_micros)
        return True if index == 0 else self.online_from[index - 1]

    def next_navigation(self, after_micros: int) -> int | None:
        """The first navigation strictly after ``after_micros``, or None."""
        index = bisect.bisect_right(self.navigations, after_micros)
        return self.navigations[index] if index < len(self.navigations) else None


ALWAYS_ONLINE = Connectivity()


def retry_delay_micros(failures: int) -> int | None:
    """Chrome's ``GetFailedReportDelay``: how long after its ``failures``-th failed try a report is tried again,
    or None when it is not."""
    if not 1 <= failures <= TIMED_RETRIES:
        return None
    return FIRST_RETRY_DELAY_MICROS * RETRY_DELAY_FACTOR ** (failures - 1)


def sent_at(report_time_micros: int, connectivity: Connectivity, navigation_retry: int | None = None) -> int | None:
    """When a report due at ``report_time_micros`` is sent, or None if it never is (module docstring);
    ``navigation_retry``: which retry (1, 2 or 3) waits for a navigation, or None."""
    if navigation_retry is not None and navigation_retry not in NAVIGATION_RETRIES.values():
        raise ValueError(f"the navigation retry is the first, second or third, got {navigation_retry}")
    time, failures = report_time_micros, 0
    while not connectivity.online(time):
        failures += 1
        if failures == navigation_retry:
            navigation = connectivity.next_navigation(time)
            if navigation is None:
                return None
            time = navigation + FIRST_RETRY_DELAY_MICROS
            continue
        delay = retry_delay_micros(failures)
        if delay is None:
            return None
        time += delay
    return time
