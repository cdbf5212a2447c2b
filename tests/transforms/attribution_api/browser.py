"""A browser for the Attribution API tests: one ``Backend`` whose clock and current user action the test moves, the
e2e suite's limits with the budgets a test chooses, and conversions with the options most tests share."""
from __future__ import annotations

from fractions import Fraction

from transforms.attribution_api.mechanisms.backend import ApiLimits, Backend, Delegate
from transforms.attribution_api.sites import registrable_domain
from transforms.core.mechanisms.global_filters import FilterId

SERVICE = "https://agg-service.example"


def conversion_options(**options: object) -> dict[str, object]:
    """``measureConversion``'s options: value 4 of maxValue 4 at epsilon 1 (deductions of 1 epsilon), a histogram
    of 3 buckets, a lookback of 1 day; ``options`` override them."""
    return {"aggregationService": SERVICE, "histogramSize": 3, "value": 4, "maxValue": 4, "epsilon": 1,
            "lookbackDays": 1, **options}


class Browser:
    """A backend with budgets in micro-epsilon (``big_bird``: the ``ApiLimits`` of Big Bird's options)."""

    def __init__(self, per_site: int = 1_000_000, global_budget: int = 8_000_000, quota: int = 4_000_000,
                 **big_bird: int | None) -> None:
        self.now = Fraction(0)
        self.user_action = 0
        limits = ApiLimits({SERVICE: "dap-18-histogram"}, 7, per_site, global_budget, quota, 3, 3, 3, 3, 10, 10, 30, 5,
                           **big_bird)
        self.backend = Backend(limits, Delegate(lambda: self.now, lambda: Fraction(1, 2), lambda: Fraction(1, 2),
                                                registrable_domain, lambda: self.user_action))

    def at(self, seconds: int) -> Browser:
        self.now = Fraction(seconds)
        return self

    def save(self, site: str, **options: object) -> None:
        self.backend.save_impression(site, None, {"histogramIndex": 0, **options})

    def convert(self, site: str, intermediary: str | None = None, **options: object) -> list[int]:
        return self.backend.measure_conversion(site, intermediary, conversion_options(**options))

    def left(self, kind: str) -> dict[tuple[int, str], int | None]:
        """What each used filter of ``kind`` has left, by (epoch, site) (site "" for the global budget)."""
        return {(filter_id.epoch, filter_id.site): self.backend.filters.remaining(filter_id)
                for filter_id, _ in self.backend.filters.items() if filter_id.kind == kind}

    def budgets(self) -> dict[FilterId, int | None]:
        """What every used filter has left."""
        return {filter_id: self.backend.filters.remaining(filter_id) for filter_id, _ in self.backend.filters.items()}
