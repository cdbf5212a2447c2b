"""``report.md``: every experiment in ``results.json``, its figures, and our numbers next to the paper's.

The paper's published numbers (Cookie Monster paper Sec. 8.2-8.4) are quoted in
``PAPER``, Big Bird's (arXiv 2506.05290 Sec. 7) in ``bigbird.PAPER``; the text
of each section says how our setting differs (scale, synthetic data) so that a
difference can be read for what it is.
"""
from __future__ import annotations

from pathlib import Path

from evaluation import bigbird


def _fmt(value, digits: int = 4) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


def _table(rows: list[dict], columns: list[str]) -> list[str]:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_fmt(row.get(column)) for column in columns) + " |" for row in rows]
    return lines


def _microbenchmark(name: str, entry: dict) -> list[str]:
    knob = name.split("-")[1]
    head = entry["headline"]
    lines = [
        f"Seed 003 Fig. 4 ({'a-b' if knob == 'knob1' else 'c-d'}): budget consumption as {knob} varies "
        f"(the other knob at {entry['settings']['other_knob']}; B = {entry['settings']['batch_size']}, "
        f"{2 * entry['settings']['products']} queries, 7-day epochs, eps_G = 1). Averages over the device-epochs the "
        "reports requested (the paper's metric), over every epoch of the span for devices that converted (the "
        "artifact's notebooks), and for all devices.",
        "",
        *_table(entry["points"], ["policy", knob, "avg_budget_requested", "avg_budget_converted", "avg_budget_all",
                                  "max_budget"]),
        "",
        f"- Cookie Monster lowest average at every {knob} value: **{_fmt(head['cookie_monster_lowest_everywhere'])}** "
        "(paper: \"Cookie Monster systematically consumes the least amount of budget\").",
        f"- At knob1 = knob2 = 0.1: IPA-like / Cookie Monster = {_fmt(head['ipa_over_cookie_monster_average'], 3)}, "
        f"ARA-like / Cookie Monster = {_fmt(head['ara_over_cookie_monster_average'], 3)} (average over requested "
        "device-epochs). The paper gives these only as plots.",
        f"- IPA-like's maximum: {_fmt(max(p['max_budget'] for p in entry['points'] if p['policy'] == 'ipa_like'))} "
        "(the artifact's notebook: IPA's maximum grows by 0.0921 per query, an epoch that every query covers, and "
        "ends at 0.921).",
    ]
    return lines


def _data_line(settings: dict) -> list[str]:
    """The generated dataset's scalar statistics, if the experiment recorded them."""
    data = settings.get("data")
    if not isinstance(data, dict):
        return []
    scalars = {k: v for k, v in data.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return ["Data: " + ", ".join(f"{k} = {_fmt(v)}" for k, v in scalars.items()) + ".", ""]


def _realistic(name: str, entry: dict, paper: list[str]) -> list[str]:
    head = entry["headline"]
    rows = sorted(entry["points"], key=lambda p: (p.get("augment", 0), p["epoch_days"], p["policy"]))
    swept = ["augment"] if any(p.get("augment") for p in rows) else []
    lines = [
        *_data_line(entry["settings"]),
        *_table(rows, ["policy", *swept, "epoch_days", "avg_budget_requested", "avg_budget_converted", "avg_budget_all",
                       "max_budget", "queries_executed", "queries_total", "rmsre_median", "rmsre_mean", "rmsre_max",
                       "rmsre_empirical_median", "reports_with_dropped_epochs"]),
        "",
        "| headline (7-day epochs) | ours | paper |",
        "|---|---|---|",
        f"| ARA-like / Cookie Monster average budget, devices that converted (the artifact's metric) | "
        f"{_fmt(head.get('ara_over_cookie_monster_avg_budget_converted'), 3)} | {paper[0]} |",
        f"| IPA-like queries executed | {head.get('ipa_executed')} of {head.get('queries_total')} | {paper[1]} |",
        "| mean RMSRE (IPA-like, ARA-like, Cookie Monster) | "
        + ", ".join(_fmt(head.get("rmsre_mean", {}).get(p), 3) for p in ("ipa_like", "ara_like", "cookie_monster"))
        + f" | {paper[2]} |",
    ]
    one_day = {p: values.get("1", values.get(1)) for p, values in head.get("rmsre_mean_by_epoch_days", {}).items()}
    if len(paper) > 3 and one_day:
        lines.append("| mean RMSRE at 1-day epochs (IPA-like, ARA-like, Cookie Monster) | "
                     + ", ".join(_fmt(one_day.get(p), 3) for p in ("ipa_like", "ara_like", "cookie_monster"))
                     + f" | {paper[3]} |")
    if "cookie_monster_within_ipa_range_share" in head:
        lines.append(f"| Cookie Monster queries within IPA-like's RMSRE range | "
                     f"{_fmt(100 * head['cookie_monster_within_ipa_range_share'], 3)} % | 96 % |")
    if "cookie_monster_rmsre_mean_growth_1_to_60_days" in head:
        lines.append(f"| Cookie Monster mean RMSRE, 60-day over 1-day epochs | "
                     f"{_fmt(100 * head['cookie_monster_rmsre_mean_growth_1_to_60_days'], 3):} % more | 25 % more |")
    by_epoch = head.get("rmsre_mean_by_epoch_days", {})
    if by_epoch:
        days = sorted({int(d) for values in by_epoch.values() for d in values})
        lines += ["", "Mean RMSRE by epoch length (days):", "",
                  "| policy | " + " | ".join(str(d) for d in days) + " |", "|---|" + "---|" * len(days)]
        for policy, values in by_epoch.items():
            lines.append(f"| {policy} | " + " | ".join(_fmt(values.get(str(d), values.get(d)), 3) for d in days) + " |")
    return lines


def _spread(entry: dict, count: str, heartbeats: bool) -> str:
    """The median tightness of one variant at its smallest and largest kappa."""
    mine = sorted((p for p in entry["points"] if p["count"] == count and p["heartbeats"] == heartbeats),
                  key=lambda p: p["kappa"])
    if not mine:
        return "n/a"
    return f"{_fmt(mine[0]['tightness_median'], 3)} to {_fmt(mine[-1]['tightness_median'], 3)}"


def _bias(entry: dict) -> list[str]:
    head = entry["headline"]
    settings = entry["settings"]
    return [
        "Seed 003 Appendix D, which the paper proves but does not evaluate. Cookie Monster on a microbenchmark with "
        f"contention (knob1 = {settings['knob1']}, knob2 = {settings['knob2']}, B = {settings['batch_size']}: devices "
        "run out of budget). Each report carries kappa x its empty-epoch count (Thm. 15) or kappa x 1[some epoch "
        "empty] (Thm. 16); occupied device-epochs pay epsilon kappa / Delta more (Thm. 17); heartbeats make every "
        f"device-epoch occupied. beta = {head['beta']}; the bound's noise is redrawn {settings['repetitions']} times "
        "per query (the query's own discrete Laplace scale).",
        "",
        f"Without detection the same workload spends {_fmt(head['baseline_avg_budget_converted'])} on average per "
        "device-epoch of converting devices, and its queries are biased by "
        f"{_fmt(100 * head['baseline_mean_relative_bias'], 3)} % of the true value on average.",
        "",
        *_table(entry["points"], ["kappa", "count", "heartbeats", "coverage", "count_coverage", "tightness_median",
                                  "bound_relative_median", "queries_with_bias", "mean_relative_bias",
                                  "nominal_extra_loss", "extra_budget_converted"]),
        "",
        f"- Coverage is at least 1 - beta = {1 - head['beta']:g} at every point (lowest {_fmt(head['min_coverage'])}). "
        "The count's own bound holds with probability 1 - q^K / (1 + q), about 1 - beta / 2 (`count_coverage`): the "
        "bound is one-sided, and the bias bound is looser still because an empty epoch moves a report by at most, "
        "not exactly, Delta.",
        f"- Tightness (bound / true bias): Thm. 16 {_spread(entry, 'reports', True)}, Thm. 15 "
        f"{_spread(entry, 'epochs', True)} (without heartbeats {_spread(entry, 'epochs', False)}), from the smallest "
        "to the largest kappa. The noise term b ln(1/beta) / kappa shrinks as kappa grows; what remains is how far "
        "each empty epoch's worst case, Delta, is from what it really removed. For last-touch reports (m = 1) one "
        "empty epoch or several change a report by at most the same Delta^max, so Thm. 16's count fits the bias "
        "and Thm. 15's counts every empty epoch at full weight.",
        "- The price: each occupied device-epoch pays epsilon kappa / Delta more (`nominal_extra_loss`). Past "
        "kappa of a few Delta the counting coordinate alone exhausts the filters, every epoch is dropped, the "
        "consumption measured falls and the bias grows: the bound then certifies a bad result instead of "
        "preventing it.",
        "- The extra loss also changes how many reports an epoch can pay for: when the requested epsilon is just "
        "under a fraction 1/k of eps_G, any extra loss leaves room for k - 1 payments instead of k, so the bias can "
        "jump at the smallest kappa (`mean_relative_bias` against the baseline above).",
        "- `bound_relative_median` is what the querier learns: the median bound as a share of the true value.",
    ]


def _big_bird(entry: dict) -> list[str]:
    """Big Bird's depletion attack (arXiv 2506.05290 Sec. 7): the four configurations at the artifact's budgets under
    both attackers, the sweeps, and the paper's numbers beside ours."""
    points, head, settings = entry["points"], entry["headline"], entry["settings"]
    attack = settings["attack"]
    defaults = {"impression_quota": settings["impression_quota"], "global_budget": settings["global_budget"]}

    def at(config: str, under_attack: bool, **values) -> dict:
        return bigbird.point_at(points, config, under_attack, **values)

    def errors(point: dict) -> str:
        return f"{_pct(point.get('rmsre_median'))} median, {_pct(point.get('rmsre_p95'))} p95"

    def outcome(point: dict) -> str:
        return f"{errors(point)}, {_pct(point.get('answered_share'))} answered"

    lines = [
        "Big Bird (Tholoniat et al., arXiv 2506.05290) Sec. 7, Fig. 5, 6a and 6c: benign queriers of the W3C "
        "Attribution "
        "API (`transforms/attribution_api`) on the Criteo-like data while Sybil sites drain the global budget, under "
        "four configurations: per-site budgets only, the global budget alone, the global budget with the "
        "impression-site and conversion-site quotas, and the same with Big Bird's per-user-action cap (Sec. 4, Alg. "
        "2). Budgets in epsilon: per-site "
        f"{settings['per_site']:g}, global {defaults['global_budget']:g}, impression-site quota "
        f"{defaults['impression_quota']:g}, conversion-site quota {settings['conversion_quota']:g}; the cap lets "
        f"{settings['conversion_site_cap']} conversion sites of a user action (an attack round, or a benign event) "
        f"draw from each epoch (the artifact's budgets and domain cap); {settings['epoch_days']}-day epochs. Every "
        "advertiser "
        "converts on its own site and queries batches of "
        f"{settings['batch_size']} reports per product category (the `criteo` experiment's queries); each conversion "
        f"asks epsilon {settings['benign_epsilon']:g} for its purchase count (at most {settings['max_value']}), so a "
        "query's noise scale is 10; a query is answered when its RMSRE is within "
        f"{_pct(head['accuracy_target'])}. Impressions are spread over {settings['publishers']} publishers (a Zipf "
        f"law). The attacker hijacks the {attack['hijacked']} most visited publishers and advertisers; each visit "
        f"there brings a round of {attack['redirections']} of its {attack['sybils']} Sybil sites, each saving an "
        f"impression and converting with epsilon {attack['epsilon']:g} over {attack['named']} Sybil impression sites "
        "(the artifact's random attacker). The fresh-Sybil attacker rides the same visits, but every redirection is a "
        "Sybil site of its own, whose conversion names the impression sites of the same redirection in the device's "
        "earlier rounds: no two of its conversions share an impression site or a conversion site, so the quotas never "
        "refuse it. The replay is the API backend's arithmetic, call for call (`evaluation/depletion.py`; "
        "`tests/evaluation/test_bigbird.py` holds it equal to the backend, the cap included).",
        "",
        *_data_line(settings),
        "| configuration | attacker | median RMSRE | p95 RMSRE | queries answered | reports lost | reports losing an "
        "epoch to the per-site / global / impression-site / conversion-site filter / the cap | attacker's epsilon "
        "drained |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for attacker in (None, *bigbird.ATTACKERS):
        for config in bigbird.CONFIGS:
            p = at(config, attacker is not None, attacker=attacker or "random")
            lines.append(f"| {bigbird.LABELS[config]} | {attacker or 'none'} | {_fmt(p.get('rmsre_median'), 3)} | "
                         f"{_fmt(p.get('rmsre_p95'), 3)} | {_pct(p.get('answered_share'))} | "
                         f"{_pct(p.get('reports_lost_share'))} | "
                         + " / ".join(_pct(p.get(column)) for column in bigbird.BLOCKED)
                         + f" | {_fmt(p.get('attacker_epsilon_drained'))} |")
    lines += ["", f"Fig. 5: the impression-site quota swept (global budget {defaults['global_budget']:g}).", "",
              "| impression-site quota | median / p95 RMSRE, no attack | reports losing an epoch to the quota | "
              "median / p95 RMSRE, attack | reports losing an epoch to the global budget, attack |",
              "|---|---|---|---|---|"]
    for quota in settings["impression_quotas"]:
        calm, attacked = at("global_quotas", False, impression_quota=quota), at("global_quotas", True,
                                                                                 impression_quota=quota)
        lines.append(f"| {quota:g} | {_fmt(calm.get('rmsre_median'), 3)} / {_fmt(calm.get('rmsre_p95'), 3)} | "
                     f"{_pct(calm.get('blocked_impression_quota'))} | {_fmt(attacked.get('rmsre_median'), 3)} / "
                     f"{_fmt(attacked.get('rmsre_p95'), 3)} | {_pct(attacked.get('blocked_global'))} |")
    lines += ["", "The global budget swept: queries answered (quotas at their defaults).", "",
              "| global budget | global alone | global alone, attack | with quotas | with quotas, attack |",
              "|---|---|---|---|---|"]
    for budget in settings["global_budgets"]:
        lines.append(f"| {budget:g} | " + " | ".join(_pct(at(config, under_attack, global_budget=budget).get(
            "answered_share")) for config in ("global", "global_quotas") for under_attack in (False, True)) + " |")
    lines += ["", "Fig. 6a: the per-user-action cap swept (conversion sites per user action and epoch; global budget and "
              "quotas at their defaults); \"off\" is the quotas alone.", "",
              "| cap | random attacker: median / p95 RMSRE, answered | fresh-Sybil attacker: median / p95 RMSRE, "
              "answered | attacker's epsilon drained, random / fresh |", "|---|---|---|---|"]
    for cap in (None, *settings["conversion_site_caps"]):
        mine = {attacker: at("global_quotas" if cap is None else "global_quotas_cap", True, attacker=attacker,
                             conversion_site_cap=cap) for attacker in bigbird.ATTACKERS}
        lines.append(f"| {'off' if cap is None else cap} | " + " | ".join(
            f"{_fmt(p.get('rmsre_median'), 3)} / {_fmt(p.get('rmsre_p95'), 3)}, {_pct(p.get('answered_share'))}"
            for p in mine.values()) + " | " + " / ".join(_fmt(p.get("attacker_epsilon_drained")) for p in mine.values())
            + " |")
    lines += ["", "Fig. 6c: the random attack on less popular sites (the sites ranked r to r + "
              f"{attack['hijacked'] - 1}): median RMSRE.", "",
              "| first rank hijacked | " + " | ".join(bigbird.LABELS[c] for c in bigbird.CONFIGS) + " |",
              "|---|" + "---|" * len(bigbird.CONFIGS)]
    for rank in settings["first_ranks"]:
        lines.append(f"| {rank} | " + " | ".join(_fmt(at(c, True, first_rank=rank).get("rmsre_median"), 3)
                                               for c in bigbird.CONFIGS) + " |")
    paper = bigbird.PAPER
    baseline, small = at("per_site_only", False), at("global_quotas", False, impression_quota=head["smallest_quota"])
    quota_attack = {q: at("global_quotas", True, impression_quota=q) for q in settings["impression_quotas"]}
    large = [q for q in quota_attack if q > defaults["impression_quota"]]
    lines += [
        "", "| headline | ours | paper (its artifact, Sec. 7) |", "|---|---|---|",
        f"| error without attack, every configuration at the defaults | {errors(baseline)} | {paper['baseline']} |",
        f"| impression-site quota {head['smallest_quota']:g}, no attack | {errors(small)} "
        f"({_fmt(head['smallest_quota_over_baseline_median'], 3)}x) | {paper['small_quota']} |",
        f"| reports losing an epoch to the impression-site quota, no attack | {_pct(small.get('blocked_impression_quota'))}"
        f" at {head['smallest_quota']:g}; {_pct(at('global_quotas', False).get('blocked_impression_quota'))} at "
        f"{defaults['impression_quota']:g} | {paper['small_quota_blocked']} |",
        f"| reports losing an epoch to the per-site budget, no attack | {_pct(head['blocked_per_site_no_attack'])} | "
        f"{paper['per_site_blocked']} |",
        f"| under attack, global budget alone | {errors(at('global', True))} "
        f"({_fmt(head['global_attack_over_baseline_median'], 3)}x) | {paper['attack_global']} |",
        f"| under attack, global budget with quotas (Big Bird) | {errors(at('global_quotas', True))} | "
        f"{paper['attack_quotas']} |",
        "| under the fresh-Sybil attack: global budget alone; with the quotas; with the quotas and the cap | "
        + "; ".join(outcome(at(config, True, attacker="fresh")) for config in ("global", "global_quotas",
                                                                             "global_quotas_cap"))
        + " | not in the paper's evaluation: its resilience theorem bounds the quotas alone only by the Sybil sites "
        "times a quota, and the cap by the user actions |",
        "| the per-user-action cap swept, median error, random / fresh-Sybil attacker | "
        + "; ".join(f"{cap}: " + " / ".join(_pct(at("global_quotas_cap", True, attacker=attacker,
                                                     conversion_site_cap=cap).get("rmsre_median"))
                                            for attacker in bigbird.ATTACKERS)
                    for cap in settings["conversion_site_caps"])
        + f" | {paper['cap']} |",
        "| under attack, larger impression-site quotas | "
        + "; ".join(f"{q:g}: {_pct(quota_attack[q].get('rmsre_median'))} median, global blocks "
                    f"{_pct(quota_attack[q].get('blocked_global'))}" for q in large)
        + f" | {paper['attack_large_quota']} |",
        "| attack on less popular sites (global alone; with quotas) | "
        + " / ".join(_pct(at("global", True, first_rank=r).get("rmsre_median")) for r in settings["first_ranks"])
        + "; " + " / ".join(_pct(at("global_quotas", True, first_rank=r).get("rmsre_median"))
                           for r in settings["first_ranks"]) + f" | {paper['popularity']} |",
        "| the smallest global budget that answers every query under attack (global alone; with quotas) | "
        + "; ".join(_fmt(min((g for g, share in head["answered_share_by_global_attack"][config].items()
                              if share == 1.0), key=float, default=None)) for config in ("global", "global_quotas"))
        + f" | {paper['slack']} |",
    ]
    return lines


NOTES = {
    "microbenchmark-knob1": [
        "Setup as the published generator builds it: every conversion at the cap (5), last touch over 30 days, "
        "B = 2,000, epsilon = 5 ln(100) / (0.05 x 2,000 x 5) = 0.046 per report. The quick size sweeps knob1 down to "
        "0.01 (200,000 devices); `--full` adds 0.001 (2 M devices), as in the paper.",
        "",
    ],
    "microbenchmark-knob2": [
        "Same setup, knob1 = 0.1; knob2 from 0.01 to 1 impression per device per day (`--full` adds 0.001).",
        "",
    ],
    "patcg": [
        "How this differs from the paper's run, and what that does to the numbers:",
        "- **Data.** A synthetic stand-in matching the statistics the paper gives (1 % of conversions attributable, "
        "1.5 conversions per converting device, 3.2 impressions per device shown ads, 10 attribute values, 80 "
        "queries), not the PATCG files. Only converting devices are kept, as the artifact's preprocessing does.",
        "- **Span.** Conversions spread over 120 days ('four months', Sec. 8.3). The artifact's files cover 31 days, "
        "so the same charges there are averaged over about 5 epochs instead of about 22: its averages (ARA-like "
        "ends at 0.277) are several times ours. Ratios between policies do not depend on the span.",
        "- **Scale.** This run has {scale} of the paper's devices and conversions. Every report requests the "
        "artifact's epsilon, 15 ln(100) / (0.05 x 2,000) = 0.691, at every scale, so each device pays what it would "
        "at full size. The RMSRE uses the query's Laplace scale times the data scale (the relative noise of a "
        "full-size batch).",
        "- **Window.** 7 days, as in the artifact's PATCG runs (Sec. 8.1 states 30 days as the general default).",
        "",
    ],
    "big-bird": [
        "How this differs from the paper's run:",
        "- **Data.** The Criteo-like dataset at {scale} of the paper's size (the `criteo` experiment's), not the "
        "CriteoPrivateAd sample; its single publisher is replaced by publishers drawn for each impression. Epochs of "
        "7 days and a 30-day lookback (the artifact: 1-day epochs, 2-epoch reports).",
        "- **Queries.** The `criteo` experiment's: (advertiser, category) batches of 350 reports of the purchase "
        "count, epsilon 1 each; the artifact's queriers ask for 5-bucket histograms of value-1 reports in batches "
        "of at least 5,000, with the epsilon that meets a 5 % RMSRE target.",
        "- **Big Bird.** The per-user-action cap is the artifact's domain cap (2): the conversion sites of a user "
        "action that draw from an epoch. The impression-site count cap of w3c/attribution PR #309, which the "
        "artifact does not implement either, is not replayed. The attacker keeps 20 redirections per visit under "
        "the cap (the artifact gives it cap + 2); the cap lets 2 of them through per epoch either way.",
        "- **Attack.** The artifact's random attacker, except that each conversion draws its own named Sybils; with "
        "20 of 25 Sybils visited per round, every conversion names the 5 others, as in the artifact. The fresh-Sybil "
        "attacker is ours, standing for the worst case of the resilience theorem without the cap; the artifact's "
        "omniscient attacker and its Sybil-count sweep (Fig. 6b) are not run.",
        "",
    ],
    "criteo": [
        "How this differs from the paper's run:",
        "- **Data.** A synthetic stand-in (292 advertisers of heavy-tailed sizes, clicks as impressions, sales at "
        "click time + delay as conversions, value = purchase count capped at 5), not the Criteo logs.",
        "- **Batches.** Exactly 350 reports per query, epsilon = 5 ln(100) / (0.05 x 350 x 2) = 0.658 per report "
        "(the artifact's batches were 300 to 450 with the same expected average value 2). This run has {scale} of "
        "the paper's impressions; below the full size fewer (advertiser, category) pairs reach 350 reports, so "
        "there are fewer queries than the paper's 898.",
        "- **Criteo++** adds X impressions per conversion of the same device, advertiser and category, uniform over "
        "the 30 days before it; only Cookie Monster depends on them (Fig. 6d).",
        "",
    ],
}

def _point(entry: dict | None, policy: str, **params) -> dict:
    """The run point of ``policy`` with ``params`` (``{}`` when absent)."""
    for point in (entry or {}).get("points", []):
        if point["policy"] == policy and all(point.get(k) == v for k, v in params.items()):
            return point
    return {}


def _pct(value) -> str:
    return "n/a" if value is None else f"{100 * value:.3g} %"


def _summary(experiments: dict, compare: tuple[str, dict] | None = None) -> list[str]:
    """Our numbers next to the paper's, with the reason for each difference (the run's own figures), and, with
    ``compare`` (a label and another run's experiments), that run's numbers in a column of their own."""
    rows = _summary_rows(experiments)
    if not rows:
        return []
    if compare is None:
        lines = ["## Against the paper", "", "| what | paper | ours | why they differ |", "|---|---|---|---|"]
        return lines + [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows] + [""]
    other = {what: ours for what, _, ours, _ in _summary_rows(compare[1])}
    lines = ["## Against the paper", "", f"| what | paper | ours | {compare[0]} | why they differ |",
             "|---|---|---|---|---|"]
    return lines + [f"| {a} | {b} | {c} | {other.get(a, 'n/a')} | {d} |" for a, b, c, d in rows] + [""]


def _summary_rows(experiments: dict) -> list[tuple[str, str, str, str]]:
    """The rows of ``_summary``: what, the paper's number, ours, why they differ."""
    rows = []
    knob1, knob2 = experiments.get("microbenchmark-knob1"), experiments.get("microbenchmark-knob2")
    if knob1 and knob2:
        lowest = knob1["headline"]["cookie_monster_lowest_everywhere"] and knob2["headline"]["cookie_monster_lowest_everywhere"]
        ipa_max = max(p["max_budget"] for p in knob1["points"] if p["policy"] == "ipa_like")
        rows += [
            ("Fig. 4: Cookie Monster spends the least at every knob value", "yes", _fmt(lowest),
             "Same generator model as the artifact's."),
            ("Fig. 4b: IPA-like's maximum after the 20 queries", "0.921 (artifact notebook)", _fmt(ipa_max),
             "Every query pays epsilon = 0.046 on an epoch that all 20 cover: 20 x 0.046."),
        ]
    patcg = experiments.get("patcg")
    if patcg:
        head = patcg["headline"]
        cm, ara = _point(patcg, "cookie_monster", epoch_days=7), _point(patcg, "ara_like", epoch_days=7)
        data = patcg["settings"].get("data", {})
        attributable = data.get("attributable_fraction", 0.0) * patcg["settings"].get("batch_size", 0)
        cm_paying = cm.get("reports_paying", 0) / max(cm.get("reports", 1), 1)
        ara_paying = ara.get("reports_paying", 0) / max(ara.get("reports", 1), 1)
        rows += [
            ("Fig. 5a: ARA-like / Cookie Monster average budget at the end", "209x",
             f"{_fmt(head.get('ara_over_cookie_monster_avg_budget_converted'), 3)}x",
             f"Cookie Monster pays only for reports whose window holds an impression: {_pct(cm_paying)} of ours (the "
             "generator targets 1 % for the 7-day window, but the device reads whole epochs, up to 14 days back), "
             f"about one epoch each; ARA-like pays both epochs of {_pct(ara_paying)} of the reports (the others are "
             "nullified). With 1 % paying, as in the paper, the ratio would be about 200."),
            ("Fig. 5a: IPA-like queries executed (7-day epochs)", "3 of 80",
             f"{head.get('ipa_executed')} of {head.get('queries_total')}",
             "An epoch's central filter pays epsilon = 0.69 once (capacity 1), so the count is how many batches "
             "fit between the epochs already paid: it depends on how batches tile the epochs, over 120 days here "
             "against the artifact's 31."),
            ("Fig. 5b-c: Cookie Monster's error below ARA-like's, ARA-like's growing with the epoch length",
             "yes", "mean RMSRE 1 to 60 days: ARA-like "
             + " / ".join(_fmt(v, 2) for v in head["rmsre_mean_by_epoch_days"].get("ara_like", {}).values())
             + "; Cookie Monster "
             + " / ".join(_fmt(v, 2) for v in head["rmsre_mean_by_epoch_days"].get("cookie_monster", {}).values()),
             f"Same shape. Cookie Monster's worst query still has RMSRE {_fmt(cm.get('rmsre_max'), 2)}: with about "
             f"{_fmt(attributable, 2)} attributable reports per batch at this scale, a few lost reports move a "
             "batch by several percent."),
        ]
    criteo = experiments.get("criteo")
    if criteo:
        head = criteo["headline"]
        one_day = {p: v.get("1") for p, v in head["rmsre_mean_by_epoch_days"].items()}
        augment = head.get("cookie_monster_avg_budget_all_by_augment", {})
        rows += [
            ("Sec. 8.4: mean RMSRE at 1-day epochs, IPA-like / ARA-like / Cookie Monster", "0.0209 / 0.0325 / 0.0198",
             " / ".join(_fmt(one_day.get(p), 3) for p in ("ipa_like", "ara_like", "cookie_monster")),
             "Same order. IPA-like is pure noise, sqrt(2) b / Q(D) with b = 5 / 0.658 and Q(D) about 350 x 1.35 "
             "(our mean purchase count); ARA-like's excess comes from heavy devices buying again within the window."),
            ("Fig. 6b: Cookie Monster's queries within IPA-like's RMSRE range", "96 %",
             _pct(head.get("cookie_monster_within_ipa_range_share")),
             "Every batch here has 350 reports of similar value, so IPA-like's errors lie in a narrow band "
             "(noise only) that the smallest bias leaves; the real batches' sums vary far more."),
            ("Fig. 6c: Cookie Monster's mean RMSRE from 1-day to 60-day epochs", "+25 %",
             "+" + _pct(head.get("cookie_monster_rmsre_mean_growth_1_to_60_days")),
             "Longer epochs put more of a heavy device's conversions on the same filters."),
            ("Fig. 6d: Cookie Monster approaches ARA-like as impressions are added", "yes",
             "average (all devices) " + " / ".join(_fmt(v, 2) for v in augment.values())
             + f" for +{' / +'.join(str(a) for a in augment)} against ARA-like's {_fmt(head.get('ara_like_avg_budget_all'), 2)}",
             "Same shape: added impressions make more epochs of each window pay."),
            ("Sec. 8.4: IPA-like queries executed (7-day epochs)", "146 of 898 (artifact notebook)",
             f"{head.get('ipa_executed')} of {head.get('queries_total')}",
             f"At the paper's scale the synthetic data has {head.get('queries_total')} queries to the paper's 898 and "
             "IPA-like runs about the same share; below it fewer queries share each advertiser's central filters."
             if (criteo["settings"].get("scale") or 0) >= 1 else
             f"This run has {_pct(criteo['settings'].get('scale'))} of the paper's data: fewer queries share each "
             "advertiser's central filters."),
        ]
    bird = experiments.get("big-bird")
    if bird:
        points, head, paper = bird["points"], bird["headline"], bigbird.PAPER
        attacked = {config: bigbird.point_at(points, config, True) for config in bigbird.CONFIGS}
        fresh = {config: bigbird.point_at(points, config, True, attacker="fresh") for config in bigbird.CONFIGS}
        small = bigbird.point_at(points, "global_quotas", False, impression_quota=head["smallest_quota"])
        rows += [
            ("Big Bird Fig. 5c: median benign error under attack, global budget alone; with the quotas",
             f"{paper['attack_global']}; {paper['attack_quotas']}",
             f"{_pct(attacked['global'].get('rmsre_median'))} median "
             f"({_fmt(head['global_attack_over_baseline_median'], 3)}x), {_pct(attacked['global'].get('rmsre_p95'))} "
             f"p95; {_pct(attacked['global_quotas'].get('rmsre_median'))} median, "
             f"{_pct(attacked['global_quotas'].get('rmsre_p95'))} p95",
             "Same shape. The attacker's rounds come with visits to hijacked sites; a round's conversions match the "
             "Sybil impressions of the device's earlier rounds within 30 days, so only devices visited twice lose "
             f"budget: {_pct(attacked['global'].get('reports_lost_share'))} of the benign reports here, most of them "
             "in the queries of the hijacked advertisers (each of their conversions is a visit the attacker follows), "
             "so the median depends on how many of the queries are theirs. The quotas "
             "hold against this attacker without the per-user-action cap: a round's conversions all read the same few "
             "Sybil impression sites, whose quotas let about 2 of them through."),
            ("Big Bird Fig. 6a: the per-user-action cap (2) against an attacker the quotas do not stop; median benign "
             "error under attack, quotas alone; with the cap", paper["cap"],
             f"fresh-Sybil attacker: {_pct(fresh['global_quotas'].get('rmsre_median'))} median, "
             f"{_pct(fresh['global_quotas'].get('answered_share'))} answered; "
             f"{_pct(fresh['global_quotas_cap'].get('rmsre_median'))} median, "
             f"{_pct(fresh['global_quotas_cap'].get('answered_share'))} answered",
             "Our fresh-Sybil attacker names a new impression site and converts on a new site for every conversion, "
             "so the quotas never refuse it and it drains as much as against the global budget alone; the cap lets "
             "only 2 conversion sites of a round draw from an epoch, tying the drain to the visits it rides on. The "
             "artifact's omniscient attacker (its worst case under the cap) is not run."),
            ("Big Bird Fig. 5a: impression-site quota 0.5 without attack", paper["small_quota"],
             f"{_pct(small.get('rmsre_median'))} median ({_fmt(head['smallest_quota_over_baseline_median'], 3)}x)",
             "A conversion of value v deducts v / 5 of epsilon: under a quota of 0.5 no report of value 3 or more "
             "passes (5 % of the conversions). The paper's reports are of value 1 and ask less epsilon (batches of "
             "at least 5,000)."),
        ]
    bias = experiments.get("bias-detection")
    if bias:
        rows.append(("Appendix D: the bias bound holds with probability at least 1 - beta", "proved, not evaluated",
                     f"lowest coverage {_fmt(bias['headline']['min_coverage'])} for beta = {bias['headline']['beta']}",
                     "The bound is one-sided and conservative (see the section)."))
    return rows


SECTIONS = {
    "microbenchmark-knob1": "Microbenchmark, knob1 (Fig. 4a-b)",
    "microbenchmark-knob2": "Microbenchmark, knob2 (Fig. 4c-d)",
    "patcg": "PATCG-like (Fig. 5)",
    "criteo": "Criteo-like (Fig. 6)",
    "bias-detection": "Bias detection (Appendix D)",
    "big-bird": "Big Bird: the depletion attack on the W3C Attribution API (arXiv 2506.05290, Fig. 5, 6a and 6c)",
    "custom": "Your data",
}


def render(results: dict, realistic_paper: dict[str, list[str]], notes: dict[str, list[str]] = NOTES,
           compare: tuple[str, dict] | None = None) -> str:
    """The whole report from ``results.json``'s content (and, with ``compare``, another run's numbers beside the
    headline ones: a label and that run's ``results.json`` content)."""
    lines = ["# Cookie Monster evaluation (Cookie Monster paper Sec. 8 and Appendix D), reproduced", "",
             "Generated by `python -m pipelines.evaluate`; every number below comes from `results.json` next to this "
             "file. Budgets are SENSITIVE evaluation metrics (per device-epoch consumption), never what a querier "
             "sees. Metric definitions: README, section \"Evaluation\".", ""]
    lines += _summary(results["experiments"], None if compare is None else (compare[0], compare[1]["experiments"]))
    for name, title in SECTIONS.items():
        entry = results["experiments"].get(name)
        if entry is None:
            continue
        settings = {k: v for k, v in entry["settings"].items() if k != "data"}
        lines += [f"## {title}", "", f"Run time {entry['seconds']:.0f} s ({entry.get('size', 'quick')} size, seed "
                  f"{entry.get('seed', 0)}). Settings: " + ", ".join(f"{k} = {v}" for k, v in settings.items()) + ".", ""]
        scale = entry["settings"].get("scale")
        lines += [note.replace("{scale}", _pct(scale)) for note in notes.get(name, [])]
        if name.startswith("microbenchmark"):
            lines += _microbenchmark(name, entry)
        elif name == "bias-detection":
            lines += _bias(entry)
        elif name == "big-bird":
            lines += _big_bird(entry)
        else:
            lines += _realistic(name, entry, realistic_paper.get(name, ["n/a", "n/a", "n/a"]))
        lines += [""] + [f"![{file}]({file})" for file in entry["files"] if file.endswith(".png")]
        lines += ["", "Tables: " + ", ".join(f"[{f}]({f})" for f in entry["files"] if f.endswith(".csv")), ""]
    return "\n".join(lines) + "\n"


def write_report(out: Path, results: dict, realistic_paper: dict[str, list[str]],
                 notes: dict[str, list[str]] = NOTES, compare: tuple[str, dict] | None = None) -> Path:
    path = out / "report.md"
    path.write_text(render(results, realistic_paper, notes, compare), encoding="utf-8")
    return path
