"""Big Bird's batched scheduling on the Attribution API backend, pdslib's ``batch_pds.rs`` scenarios reproduced as
facts (``schedule_one_batch``, ``utilization_example``, ``order_fairness``): the global budget released over the
scheduling intervals, conversions waiting for it, the batch phase allocating what the impression-site quotas held
back and doing so fairly across impression sites, reports released when their attempts are over, null reports for
the rest. Deterministic: no false-failure probability to state."""
from __future__ import annotations

from tests.transforms.attribution_api.browser import Browser, conversion_options
from transforms.attribution_api.mechanisms.batch_scheduling import BatchScheduler
from transforms.core.mechanisms.batch_scheduling import Released


def _options(epsilon: float, impression_site: str) -> dict[str, object]:
    """pdslib's requests: value 1 of 1 (the value deduction is epsilon), one impression site named, 5 buckets."""
    return conversion_options(value=1, maxValue=1, epsilon=epsilon, histogramSize=5, impressionSites=[impression_site])


def _answered(reports: list[Released[list[int]]]) -> set[int]:
    """The requests whose report is not null: the value in the impressions' bucket."""
    return {report.request_id for report in reports if report.result == [1, 0, 0, 0, 0]}


def test_a_conversion_waits_for_the_next_release_of_the_global_budget():
    """``schedule_one_batch``: global 5 released over 2 intervals, source quota 4; three conversions of 1.1, 1.2 and
    1.3, the last with two attempts. The first two fit the first half of the global budget and are released at
    once; the third waits for the second release and comes out, not null, one interval later."""
    browser = Browser(per_site=10_000_000, global_budget=5_000_000, quota=4_000_000,
                      conversion_site_quota_per_epoch=10_000_000)
    browser.at(1).save("blog.example")
    scheduler = BatchScheduler(browser.backend, releases=2)
    browser.at(2)
    ids = [scheduler.measure_conversion("shoes.example", None, _options(epsilon, "blog.example"), attempts)
           for epsilon, attempts in ((1.1, 1), (1.2, 1), (1.3, 2))]
    first = scheduler.schedule_batch()
    assert [report.request_id for report in first] == ids[:2] and _answered(first) == set(ids[:2])
    second = scheduler.schedule_batch()
    assert [report.request_id for report in second] == ids[2:] and _answered(second) == set(ids[2:])


def _utilization(browser: Browser) -> list[tuple[str, dict[str, object]]]:
    """``utilization_example``: news' impression for nine shoe sites converting at 0.91 to 0.99, blog's for one hat
    site at 0.96 (per-querier 1, global 10, trigger quota 1, source quota 5)."""
    browser.at(1).save("news.example")
    browser.at(2).save("blog.example")
    browser.at(3)
    return [(f"shoes-{index}.example", _options(round(0.9 + 0.01 * index, 2), "news.example"))
            for index in range(1, 10)] + [("hats-1.example", _options(0.96, "blog.example"))]


def _utilization_browser() -> Browser:
    return Browser(per_site=1_000_000, global_budget=10_000_000, quota=5_000_000,
                   conversion_site_quota_per_epoch=1_000_000)


def test_the_batch_phase_allocates_what_the_impression_site_quota_held_back():
    """The paper's motivating example: answered at once, news' quota of 5 refuses the shoe sites past 4.65, so four
    of the ten reports are null though the global budget has room; batched (one release), the online phase leaves
    the same four waiting, and the batch phase, quotas off, allocates them: all ten reports, none null."""
    immediate = _utilization_browser()
    conversions = _utilization(immediate)
    answered = [immediate.backend.measure_conversion(site, None, options) != [0] * 5 for site, options in conversions]
    assert answered == [True] * 5 + [False] * 4 + [True]
    batched = _utilization_browser()
    scheduler = BatchScheduler(batched.backend, releases=1)
    ids = [scheduler.measure_conversion(site, None, options, 1) for site, options in _utilization(batched)]
    reports = scheduler.schedule_batch()
    assert sorted(report.request_id for report in reports) == ids and _answered(reports) == set(ids)


def test_the_batch_phase_shares_the_global_budget_fairly_across_impression_sites():
    """``order_fairness``: ten shoe sites on news' impression and ten hat sites on blog's, each converting at about
    0.99 (shoes-3 the smallest) with two attempts, news' conversions first; per-querier 1, global 10 over two
    releases, quotas 1. The first interval allocates five: shoes 1, 2, 3 and hats 1, 2, balanced across the two
    impression sites rather than news taking all; nothing is released yet and fifteen wait. The second interval
    answers everyone: twenty reports, ten of them not null (five more fit the second release)."""
    browser = Browser(per_site=1_000_000, global_budget=10_000_000, quota=1_000_000,
                      conversion_site_quota_per_epoch=1_000_000)
    browser.at(1).save("news.example")
    browser.at(2).save("blog.example")
    scheduler = BatchScheduler(browser.backend, releases=2)
    browser.at(3)
    shoes = [scheduler.measure_conversion(f"shoes-{index}.example", None, _options(
        0.99 if index == 3 else round(0.99 + 0.0001 * index, 4), "news.example"), 2) for index in range(1, 11)]
    hats = [scheduler.measure_conversion(f"hats-{index}.example", None, _options(
        round(0.99 + 0.0001 * index, 4), "blog.example"), 2) for index in range(1, 11)]
    assert scheduler.schedule_batch() == []
    assert len(scheduler.schedule.waiting) == 15
    held = scheduler.schedule.delayed[1]  # the reports allocated so far, released at the end of the second interval
    assert {report.request_id for report in held} == set(shoes[:3] + hats[:2]) == _answered(held)
    reports = scheduler.schedule_batch()
    assert sorted(report.request_id for report in reports) == shoes + hats and len(_answered(reports)) == 10
