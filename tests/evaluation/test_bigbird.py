"""Big Bird's depletion attack (``evaluation.depletion``, ``evaluation.bigbird``): the column-wise replay equals the
Attribution API ``Backend`` itself, call by call, and ``pm-beam evaluate big-bird`` shows the paper's shape.

Deterministic: fixed seeds and exact comparisons (integer micro-epsilon), no false-failure probability to state."""
from __future__ import annotations

import csv
import json
from fractions import Fraction

import numpy as np
import pytest

from evaluation import bigbird, depletion
from evaluation.data import load_dataset
from evaluation.runs import epoch_origin
from pipelines.evaluate import main
from schemas.time_units import MICROS_PER_DAY, MICROS_PER_SECOND
from synthetic.criteo import generate_criteo
from transforms.attribution_api.mechanisms.backend import ApiLimits, Backend, Delegate
from transforms.attribution_api.sites import registrable_domain

SERVICE = "https://aggregation.example"
MILLION = 1_000_000
SYBIL_MATCH = 2**32 - 1  # the fresh attacker's impressions' match value, which no benign conversion asks for


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    path = tmp_path_factory.mktemp("criteo")
    generate_criteo(path, scale=0.0005, seed=3, progress=False, sidecars=True, event_files=False)
    return load_dataset("criteo-like", str(path / "impressions-*"), str(path / "conversions-*"), progress=False)


def _limits(budgets: depletion.Budgets, sybils: int) -> ApiLimits:
    per_site, global_budget, quota, _ = budgets.capacities()
    return ApiLimits({SERVICE: "dap-18-histogram"}, depletion.EPOCH_DAYS, per_site, global_budget, quota,
                     max_conversion_sites_per_impression=max(sybils, 1),
                     max_conversion_callers_per_impression=1, max_impression_sites_for_conversion=max(sybils, 1),
                     max_impression_callers_for_conversion=1, max_credit_size=1, max_match_values=1,
                     max_lookback_days=depletion.LOOKBACK_DAYS, max_histogram_size=1,
                     conversion_site_quota_per_epoch=budgets.conversion_quota,
                     conversion_site_count_cap=budgets.conversion_site_cap)


def _names(events: depletion.Events) -> tuple[list[str], list[str]]:
    """Conversion sites and impression sites by number (advertisers or publishers, then Sybils)."""
    sybils = [f"sybil-{i}.example" for i in range(events.sybil_sites())]
    return events.advertiser_names + sybils, [f"publisher-{k}.example" for k in range(depletion.PUBLISHERS)] + sybils


def _replay_backend(events: depletion.Events, budgets: depletion.Budgets) -> np.ndarray:
    """Every device's calls on its own ``Backend`` (its public API only), in call order: whether each
    measureConversion call (benign conversions first, then the attacker's by round and redirection) returned its
    value rather than zeros. A user action (Big Bird's cap) is one benign event or one attack round."""
    attack = events.attack
    redirections = attack.redirections if attack else 0
    conv_names, imp_names = _names(events)
    limits = _limits(budgets, events.sybil_sites())
    rank = events.round_rank()
    period = depletion.EPOCH_DAYS * MICROS_PER_DAY // MICROS_PER_SECOND
    calls: dict[int, list] = {}
    for i in range(events.imp_time.size):
        calls.setdefault(int(events.imp_device[i]), []).append((int(events.imp_slot[i]), 0, "imp", i))
    for i in range(events.conv_time.size):
        calls.setdefault(int(events.conv_device[i]), []).append((int(events.conv_slot[i]), 0, "conv", i))
    for r in range(events.round_device.size):
        for j in range(redirections):
            calls[int(events.round_device[r])] += [(int(events.round_slot[r]), 2 * j, "sybil-imp", (r, j)),
                                                   (int(events.round_slot[r]), 2 * j + 1, "sybil-conv", (r, j))]
    paid = np.zeros(events.conv_time.size + events.round_device.size * redirections, dtype=bool)
    for device, device_calls in calls.items():
        clock: dict = {"now": Fraction(0), "action": None}
        backend = Backend(limits, Delegate(
            now=lambda clock=clock: clock["now"],
            epoch_start_fraction=lambda device=device: Fraction(int(events.epoch_offset[device]), period),
            credit_fraction=lambda: Fraction(1, 2), site_of=registrable_domain,
            user_action=lambda clock=clock: clock["action"]))
        backend.current_epoch(Fraction(events.origin, MICROS_PER_SECOND))  # the browser's first use
        for _, _, kind, i in sorted(device_calls, key=lambda call: call[:2]):
            clock["action"] = ("round", i[0]) if kind.startswith("sybil") else (kind, i)
            if kind == "imp":
                clock["now"] = Fraction(int(events.imp_time[i]), MICROS_PER_SECOND)
                backend.save_impression(imp_names[events.imp_site[i]], None, {
                    "histogramIndex": 0, "matchValue": int(events.imp_match[i]), "lifetimeDays": 30,
                    "conversionSites": [conv_names[events.imp_advertiser[i]]]})
            elif kind == "conv":
                clock["now"] = Fraction(int(events.conv_time[i]), MICROS_PER_SECOND)
                value = int(events.conv_value[i])
                histogram = backend.measure_conversion(conv_names[events.conv_site[i]], None, {
                    "aggregationService": SERVICE, "epsilon": 1, "histogramSize": 1, "lookbackDays": 30,
                    "value": value, "maxValue": depletion.MAX_VALUE, "matchValues": [int(events.conv_match[i])]})
                assert histogram in ([0], [value])
                paid[i] = histogram == [value]
            else:
                r, j = i
                clock["now"] = Fraction(int(events.round_time[r]), MICROS_PER_SECOND)
                if attack.fresh:  # Sybil k R + j; its conversion names the j-th Sybils of the earlier rounds
                    sybil = f"sybil-{rank[r] * redirections + j}.example"
                    impression = {"histogramIndex": 0, "matchValue": SYBIL_MATCH}
                    named = [f"sybil-{k * redirections + j}.example" for k in range(rank[r])]
                else:
                    sybil = f"sybil-{int(events.round_sybils[r, j])}.example"
                    impression = {"histogramIndex": 0, "conversionSites": conv_names[events.advertisers:]}
                    named = [f"sybil-{b}.example" for b in range(attack.sybils)
                             if int(events.round_named[r, j]) >> b & 1]
                if kind == "sybil-imp":
                    backend.save_impression(sybil, None, impression)
                elif named:  # the fresh attacker's first round has no site to name, and does not convert
                    histogram = backend.measure_conversion(sybil, None, {
                        "aggregationService": SERVICE, "epsilon": float(attack.epsilon), "histogramSize": 1,
                        "lookbackDays": 30, "value": 1, "maxValue": 1, "impressionSites": named})
                    paid[events.conv_time.size + r * redirections + j] = histogram == [1]
    return paid


BUDGETS = {
    "per-site": depletion.Budgets(MILLION, None, None, None),
    "global": depletion.Budgets(MILLION, 3 * MILLION, None, None),
    "quotas": depletion.Budgets(MILLION, 3 * MILLION, MILLION // 2, None),
    "conversion-quota": depletion.Budgets(2 * MILLION, 3 * MILLION, 3 * MILLION, 700_000),
    "tight": depletion.Budgets(600_000, 1_400_000, 400_000, MILLION),
    "cap": depletion.Budgets(MILLION, 3 * MILLION, MILLION, MILLION, conversion_site_cap=1),
    "quotas-cap": depletion.Budgets(MILLION, 4 * MILLION, MILLION // 2, 700_000, conversion_site_cap=2),
}
ATTACKS = {"named-drawn": depletion.Attack(sybils=12, redirections=3, epsilon=Fraction(1, 2)),
           "named-all-unvisited": depletion.Attack(sybils=6, redirections=4),
           "fresh": depletion.Attack(redirections=4, fresh=True)}


@pytest.mark.parametrize("attack", ATTACKS.values(), ids=ATTACKS.keys())
@pytest.mark.parametrize("budgets", BUDGETS.values(), ids=BUDGETS.keys())
def test_the_column_wise_replay_is_the_backend(dataset, attack, budgets):
    """Every measureConversion call's outcome (benign and the attacker's), exactly as the ``Backend`` returns it,
    under three attacks (each conversion naming drawn Sybils and asking epsilon 0.5, or naming all those its round
    did not visit and asking epsilon 1, or the fresh-Sybil attacker's, epsilon 1) and with or without Big Bird's
    per-user-action cap (1 or 2 conversion sites per user action and epoch). Capacities are exact multiples of the
    deductions (a value-1 conversion deducts 200,000 micro-epsilon: three fit in 600,000, a fourth does not), and
    every filter and the cap refuse some deduction in some setting (``test_every_filter_refuses_in_some_setting``)."""
    events = depletion.events_of(dataset, epoch_origin(dataset), 5, attack)
    deductions = depletion.build(events)
    refusal = depletion.run(deductions, budgets)
    calls = events.conv_time.size + events.round_device.size * attack.redirections
    paid = depletion.paid(deductions, refusal, calls)
    assert np.array_equal(paid, _replay_backend(events, budgets))
    assert (refusal[deductions.conversion < deductions.benign] == 0).any()
    # the attacker's conversions pay wherever one deduction fits every filter
    assert events.round_device.size > 20
    assert paid[events.conv_time.size:].any() == (attack.deduction <= min(budgets.capacities()))


def test_every_filter_refuses_in_some_setting(dataset):
    """The settings of the comparison with the ``Backend`` make each of the four filters the first to refuse some
    benign deduction and some of the attacker's, under each attack, and the per-user-action cap refuse some of the
    attacker's (so that the comparison covers every check). The cap never refuses a benign deduction: a benign
    user action has one conversion site."""
    for attack in ATTACKS.values():
        deductions = depletion.build(depletion.events_of(dataset, epoch_origin(dataset), 5, attack))
        benign = deductions.conversion < deductions.benign
        codes = np.concatenate([depletion.run(deductions, budgets) for budgets in BUDGETS.values()])
        mine = np.tile(benign, len(BUDGETS))
        assert set(codes[mine].tolist()) == {0, 1, 2, 3, 4}
        assert set(codes[~mine].tolist()) == {0, 1, 2, 3, 4, 5}


def test_big_bird_experiment(tmp_path):
    """``pm-beam evaluate big-bird`` at the tiny size (Criteo-like at 1 %, seed 0): under either attack the per-site
    budgets alone leave every benign query as it was (the attacker spends only its own sites' budgets), the global
    budget alone loses reports and answered queries; against the random attacker the quotas at the artifact's sizes
    bring them back, with or without the per-user-action cap; against the fresh-Sybil attacker the quotas refuse
    nothing and lose what the global budget alone loses, and only the cap brings the queries back. An
    impression-site quota of 0.5 costs reports of value 3 or more without any attack, one of 8 lets the random
    attacker through."""
    out = tmp_path / "out"
    assert main(["big-bird", "--tiny", "--output", str(out), "--quiet"]) == 0
    entry = json.loads((out / "results.json").read_text())["experiments"]["big-bird"]
    for name in ("big-bird_points.csv", "big-bird_queries.csv", "fig_big_bird_quotas.png", "fig_big_bird_global.png",
                 "fig_big_bird_cap.png", "fig_big_bird_popularity.png"):
        assert name in entry["files"] and (out / name).stat().st_size > 0
    points = entry["points"]

    def at(config, attack, **values):
        return bigbird.point_at(points, config, attack, **values)

    with open(out / "big-bird_queries.csv", newline="") as handle:
        queries = list(csv.DictReader(handle))
    per_site = {attacker: [(q["querier_site"], q["category"], q["batch_index"], q["biased_value"]) for q in queries
                           if q["config"] == "per_site_only" and q["attacker"] == attacker
                           and q["first_rank"] in ("", "1")]
                for attacker in ("", "random", "fresh")}
    assert per_site[""] and per_site["random"] == per_site[""] and per_site["fresh"] == per_site[""]
    calm = at("global", False)
    assert calm["answered_share"] == 1.0 and calm["reports_lost"] == at("per_site_only", False)["reports_lost"]
    assert at("global_quotas_cap", False)["reports_lost"] == calm["reports_lost"]
    for attacker in ("random", "fresh"):
        assert at("per_site_only", True, attacker=attacker)["attacker_conversions_paid"] > 0
        attacked = at("global", True, attacker=attacker)
        assert attacked["answered_share"] < 0.5 and attacked["reports_lost"] > 100 * calm["reports_lost"]
        assert attacked["blocked_global"] > 0.05 and attacked["attacker_epsilon_drained"] > 0
        capped = at("global_quotas_cap", True, attacker=attacker)
        assert capped["answered_share"] == 1.0 and capped["reports_lost"] < attacked["reports_lost"] / 100
        assert 0 < capped["attacker_epsilon_drained"] < attacked["attacker_epsilon_drained"] / 2
        tighter = at("global_quotas_cap", True, attacker=attacker, conversion_site_cap=1)
        assert tighter["attacker_epsilon_drained"] <= capped["attacker_epsilon_drained"]
    attacked, guarded = at("global", True), at("global_quotas", True)
    assert guarded["answered_share"] == 1.0 and guarded["reports_lost"] == calm["reports_lost"]
    assert 0 < guarded["attacker_epsilon_drained"] < attacked["attacker_epsilon_drained"]
    assert at("global_quotas_cap", True)["reports_lost"] == calm["reports_lost"]
    # the fresh-Sybil attacker: the quotas refuse none of its conversions, and the cap refuses some
    fresh_attacked, fresh_quotas = at("global", True, attacker="fresh"), at("global_quotas", True, attacker="fresh")
    for column in ("reports_lost", "answered_share", "rmsre_median", "attacker_epsilon_drained"):
        assert fresh_quotas[column] == fresh_attacked[column]
    assert at("global_quotas_cap", True, attacker="fresh")["reports_lost"] > calm["reports_lost"]
    small = at("global_quotas", False, impression_quota=0.5)
    assert small["blocked_impression_quota"] > 0.02 and small["answered_share"] < 1.0
    assert at("global_quotas", True, impression_quota=8.0)["reports_lost"] == attacked["reports_lost"]
    head = entry["headline"]
    assert head["attack"]["global_quotas"]["answered_share"] == 1.0 and head["global_attack_over_baseline_median"] > 2
    assert head["fresh_attack"]["global_quotas"]["answered_share"] < 0.5
    assert head["fresh_attack"]["global_quotas_cap"]["answered_share"] == 1.0
    report = (out / "report.md").read_text()
    assert "## Big Bird: the depletion attack" in report and "fig_big_bird_cap.png" in report
    assert "| Big Bird Fig. 5c" in report and "| Big Bird Fig. 6a" in report and "| fresh |" in report
