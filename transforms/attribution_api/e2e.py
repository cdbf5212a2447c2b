"""The W3C Attribution API's end-to-end cases (``impl/e2e-tests/*.json`` in github.com/w3c/attribution, the schema
``impl/e2e.schema.json``), run against this project's backend as the reference's runner (``impl/src/e2e.test.ts``)
runs them against ``backend.ts``: events in order at their ``seconds``, each ``measureConversion``'s histogram
compared with its ``expected`` and each expected error with the error thrown."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from fractions import Fraction

from transforms.attribution_api.mechanisms.backend import ApiLimits, AttributionError, Backend, Delegate
from transforms.attribution_api.sites import registrable_domain


@dataclass(frozen=True)
class EventOutcome:
    """One event: whether it did what the case expects, and what happened."""

    seconds: int
    event: str
    passed: bool
    detail: str


def _camel(name: str) -> str:
    """``per_site_privacy_budget`` as the configuration spells it: ``perSitePrivacyBudget``."""
    first, *rest = name.split("_")
    return first + "".join(word.capitalize() for word in rest)


def limits_of(config: Mapping) -> ApiLimits:
    """The implementation-defined values of a case's configuration (CONFIG.json: each field of ``ApiLimits`` in
    camel case; one it does not name keeps its default)."""
    return ApiLimits(**{field.name: config[_camel(field.name)] for field in fields(ApiLimits)
                        if _camel(field.name) in config})


def _expected_name(expected: object) -> str | None:
    """The error name a case expects (``RangeError``, or a DOMException's name), None for a histogram."""
    if isinstance(expected, str):
        return expected
    if isinstance(expected, Mapping):
        return str(expected["name"])
    return None


def run_case(case: Mapping, default_config: Mapping) -> list[EventOutcome]:
    """Every event's outcome; the case passes when all pass."""
    config = case.get("config", default_config)
    clock = {"now": Fraction(0)}
    backend = Backend(limits_of(config), Delegate(
        now=lambda: clock["now"],
        epoch_start_fraction=lambda: Fraction(str(config["epochStart"])),
        credit_fraction=lambda: Fraction(str(config["fairlyAllocateCreditFraction"])),
        site_of=registrable_domain,
    ))
    outcomes = []
    for event in case["events"]:
        seconds, kind = event["seconds"], event["event"]
        if Fraction(seconds) <= clock["now"]:
            raise ValueError(f"events must have strictly increasing seconds fields (at {seconds})")
        clock["now"] = Fraction(seconds)
        expected = event.get("expected", event.get("expectedError"))
        result: list[int] | None = None
        try:
            if kind == "saveImpression":
                backend.save_impression(event["site"], event.get("intermediarySite"), event["options"])
            elif kind == "measureConversion":
                result = backend.measure_conversion(event["site"], event.get("intermediarySite"), event["options"])
            elif kind == "clearImpressionsForSite":
                backend.clear_impressions_for_site(event["site"])
            elif kind == "clearBrowsingHistoryForAttribution":
                backend.clear_state(event["sites"], event["forgetVisits"])
            elif kind in ("enableAPI", "disableAPI"):
                backend.enabled = kind == "enableAPI"
            else:
                raise ValueError(f"unknown event {kind!r} at {seconds}")
        except AttributionError as error:
            wanted = _expected_name(expected)
            outcomes.append(EventOutcome(seconds, kind, wanted == error.name,
                                         f"threw {error.name} ({error})" + ("" if wanted else ", expected none")))
            continue
        wanted = _expected_name(expected)
        if wanted is not None:
            outcomes.append(EventOutcome(seconds, kind, False, f"expected {wanted}, threw nothing"))
        elif kind == "measureConversion":
            outcomes.append(EventOutcome(seconds, kind, result == expected, f"histogram {result}, expected {expected}"))
        else:
            outcomes.append(EventOutcome(seconds, kind, True, "ok"))
    return outcomes
