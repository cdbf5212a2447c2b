"""Big Bird's evaluation (Tholoniat et al., "Beyond Per-Querier Budgets", arXiv 2506.05290, Sec. 7, Fig. 5, 6a and
6c): benign queriers of the W3C Attribution API on the Criteo-like data, with and without the depletion attack, under
four configurations of the API's budgets.

* ``per_site_only``: per-site budgets alone (the paper's "Attribution w/o global");
* ``global``: the global budget per epoch beside them ("Attribution w/ global");
* ``global_quotas``: the global budget guarded by the impression-site and conversion-site quotas (the artifact's
  Big Bird without its domain cap);
* ``global_quotas_cap``: the same with Big Bird's per-user-action cap (Sec. 4, Alg. 2): at most 2 conversion sites of
  a user action draw from an epoch (the artifact's Big Bird).

Two attackers (``ATTACKERS``, ``evaluation.depletion.Attack``): the artifact's random attacker, whose conversions of
a round all name the same few Sybil impression sites, and the fresh-Sybil attacker, which brings a new impression site
and conversion site for every conversion: the quotas hold against the first and not the second, which only the cap
bounds (by the user actions the attacker rides on).

The budgets are the paper artifact's (github.com/columbia/bigbird, ``experiments.rs``): per-site 1, global 8,
conversion-site quota 1, impression-site quota 2, domain cap 2 (``DEFAULTS``). As in its Fig. 5, the impression-site
quota is swept (``Sizes.big_bird_quotas``) with the global budget at 8, against the two baselines; beyond the
artifact, the global budget is swept (``Sizes.big_bird_globals``) for the global budget alone and with the quotas at
2, the paper's recommendation to configure it "for benign load with added slack for DoS resilience"; as in its Fig.
6a, the cap is swept (``Sizes.big_bird_caps``) under both attackers; as in its Fig. 6c, the random attack moves to
less popular sites (``Sizes.big_bird_ranks``: the sites ranked r to r + 9). The workload, the attack and their replay
are ``evaluation.depletion``'s: the benign calls and each attack's are resolved once, then every budget setting is
one replay of the same calls.

Each query is a batch of 350 reports of one (advertiser, category), summed with Laplace noise of scale ``2 maxValue /
epsilon``, as the Cookie Monster ``criteo`` experiment cuts them; its RMSRE is analytic, ``sqrt((Q~ - Q)^2 + 2 b^2) /
Q`` with ``Q`` the sum of the values of the batch's attributable conversions without any budget and ``Q~`` those the
budgets let through. A query is answered when its RMSRE is within the 5 % accuracy target (``ACCURACY_TARGET``). The
paper's figures show the median and the 95th percentile of the benign queries' error and, for its causes, the share
of the reports that lost an epoch to each filter: so do ours.

Writes ``big-bird_points.csv`` (one row per setting), ``big-bird_queries.csv`` (every query of every setting), the
figures ``fig_big_bird_quotas.png`` (Fig. 5a-d: error and its causes against the impression-site quota, without and
with the attack), ``fig_big_bird_global.png`` (answered queries and error against the global budget),
``fig_big_bird_cap.png`` (Fig. 6a: error and reports lost against the per-user-action cap, under both attackers)
and ``fig_big_bird_popularity.png`` (Fig. 6c: error against the popularity of the hijacked sites).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from evaluation import depletion, figures
from evaluation.data import Dataset, load_dataset
from evaluation.experiments import ExperimentOutput, Settings
from evaluation.output import Progress, write_csv, write_dict_csv
from evaluation.realistic import CRITEO_BATCH, criteo_dataset, generation_of
from evaluation.runs import epoch_origin
from transforms.attribution_api.mechanisms.backend import MICRO

NAME = "big-bird"
CONFIGS = ("per_site_only", "global", "global_quotas", "global_quotas_cap")
LABELS = {"per_site_only": "per-site budgets only", "global": "global budget alone",
          "global_quotas": "global budget + quotas", "global_quotas_cap": "global budget + quotas + cap"}
COLORS = {"per_site_only": "tab:green", "global": "tab:blue", "global_quotas": "tab:red",
          "global_quotas_cap": "tab:purple"}
ATTACKERS = ("random", "fresh")  # the artifact's random attacker; the fresh-Sybil one (``depletion.Attack.fresh``)
ATTACKER_LABELS = {"random": "random attacker", "fresh": "fresh-Sybil attacker"}
ATTACKER_COLORS = {"random": "tab:orange", "fresh": "tab:purple"}
# the artifact's (experiments.rs, default_runtime_config): capacities (1, 8, 1, 2) and quota_count Some(2), its domain
# cap, which pdslib applies to the conversion sites of a user action in each epoch
DOMAIN_CAP = 2
DEFAULTS = {"per_site": 1.0, "global_budget": 8.0, "impression_quota": 2.0, "conversion_quota": 1.0,
            "conversion_site_cap": DOMAIN_CAP}
ACCURACY_TARGET = 0.05
# The paper's numbers for its Fig. 5 and 6c, as its evaluation artifact states them (github.com/columbia/bigbird,
# README: "claim each figure supports", paraphrasing Sec. 7 of the paper's latest version)
PAPER = {
    "baseline": "5.2 % median error (the baselines, no attack)",
    "small_quota": "14.0 % median (2.7x) at impression-site quota 0.5, no attack",
    "small_quota_blocked": "16.2 % of reports (quota 0.5); under 0.002 % from 2",
    "per_site_blocked": "about 2.8 % of reports (every configuration)",
    "attack_global": "48.5 % median (9.3x the baseline)",
    "attack_quotas": "5.5 % median, 14.8 % p95 (quota 1 to 2)",
    "attack_large_quota": "about 20 % median at quota 5; the global budget blocks under 1 % of reports up to "
                          "quota 2, about 11 % at 3 and 19 % at 4",
    "popularity": "random attacker: at the baseline whatever the sites' rank (Big Bird); the omniscient one from "
                  "29.0 % (top 10) to 10.9 % (ranks 41-50)",
    "slack": "global 8 for per-site 1: the global budget configured more loosely than per-site budgets, \"tuned for "
             "benign load with added slack for DoS resilience\" (abstract)",
    "cap": "the domain cap bounds depletion even against the omniscient attacker: median error at most 10 % at cap 1, "
           "28.6 % at cap 2, against 48.3-48.4 % without global protection; 5.4 % against the random attacker at cap 2",
}
BLOCKED = {f"blocked_{name}": name for name in depletion.REFUSALS}  # share of reports losing an epoch to each filter
FILTER_COLORS = {"blocked_per_site": "tab:green", "blocked_global": "tab:blue", "blocked_impression_quota": "tab:red",
                 "blocked_conversion_quota": "tab:purple"}  # the filters of Fig. 5b and 5d (no cap there)
POINT_COLUMNS = ("config", "attack", "attacker", "first_rank", "per_site", "global_budget", "impression_quota",
                 "conversion_quota", "conversion_site_cap", "queries", "rmsre_median", "rmsre_p95", "rmsre_mean",
                 "rmsre_max", "answered_share", "reports_attributable", "reports_lost", "reports_lost_share", *BLOCKED,
                 "attacker_conversions_paid", "attacker_epsilon_drained", "seconds")
QUERY_COLUMNS = ("config", "attack", "attacker", "first_rank", "global_budget", "impression_quota", "conversion_site_cap",
                 "querier_site", "category", "batch_index", "true_value", "biased_value", "noise_scale", "rmsre")


@dataclass(frozen=True)
class Setting:
    """One run point: a configuration, without the attack or under one of ``ATTACKERS`` (hijacking sites from
    popularity rank ``first_rank`` on), its budgets in epsilon and its per-user-action cap (None: off)."""

    config: str
    attacker: str | None
    global_budget: float | None
    impression_quota: float | None
    conversion_quota: float | None
    conversion_site_cap: int | None
    first_rank: int | None = None

    @property
    def attack(self) -> bool:
        return self.attacker is not None

    def budgets(self) -> depletion.Budgets:
        def micro(epsilon: float | None) -> int | None:
            return None if epsilon is None else round(Fraction(str(epsilon)) * MICRO)

        per_site = micro(DEFAULTS["per_site"])
        assert per_site is not None
        return depletion.Budgets(per_site, micro(self.global_budget), micro(self.impression_quota),
                                 micro(self.conversion_quota), self.conversion_site_cap)


def setting(config: str, attack: bool, global_budget: float = DEFAULTS["global_budget"],
            impression_quota: float = DEFAULTS["impression_quota"], first_rank: int = 1, attacker: str = "random",
            conversion_site_cap: int = DOMAIN_CAP) -> Setting:
    """``config``'s budgets: the global budget, the quotas and the per-user-action cap only where the configuration
    has them; ``attacker`` and ``first_rank`` only under attack."""
    with_global = config != "per_site_only"
    with_quotas = config in ("global_quotas", "global_quotas_cap")
    return Setting(config, attacker if attack else None, global_budget if with_global else None,
                   impression_quota if with_quotas else None, DEFAULTS["conversion_quota"] if with_quotas else None,
                   conversion_site_cap if config == "global_quotas_cap" else None, first_rank if attack else None)


def settings_of(quotas: tuple, globals_: tuple, ranks: tuple, caps: tuple) -> list[Setting]:
    """The run points: every configuration at the defaults and the quota sweep at the default global budget (Fig.
    5), then the global budget sweep of the global budget alone and with the quotas, without and with the random
    attack; every configuration under random attacks on less popular sites (Fig. 6c); every configuration under the
    fresh-Sybil attack, and the cap swept under both attackers (Fig. 6a); each once."""
    points: dict[Setting, None] = {}
    for attack in (False, True):
        points.update({setting(config, attack): None for config in CONFIGS})
        points.update({setting("global_quotas", attack, impression_quota=q): None for q in quotas})
        for global_budget in globals_:
            points.update({setting(config, attack, global_budget): None for config in ("global", "global_quotas")})
    points.update({setting(config, True, first_rank=rank): None for rank in ranks for config in CONFIGS})
    points.update({setting(config, True, attacker="fresh"): None for config in CONFIGS})
    points.update({setting("global_quotas_cap", True, attacker=attacker, conversion_site_cap=cap): None
                   for attacker in ATTACKERS for cap in caps})
    return list(points)


@dataclass
class Workload:
    """The calls of one replay (with or without the attack) and what does not depend on budgets."""

    events: depletion.Events
    deductions: depletion.Deductions
    calls: int  # measureConversion calls: the benign conversions, then the attacker's
    attributable: np.ndarray


def workload(dataset: Dataset, seed: int, attack: depletion.Attack | None) -> Workload:
    """The calls of ``dataset``'s browsers (and of ``attack``), resolved once for every budget setting."""
    events = depletion.events_of(dataset, epoch_origin(dataset), seed, attack)
    deductions = depletion.build(events)
    calls = events.conv_time.size + events.round_device.size * (attack.redirections if attack else 0)
    return Workload(events, deductions, calls, depletion.attributable(deductions))


def measure(work: Workload, point: Setting, truth: np.ndarray) -> tuple[dict, list[list]]:
    """One replay of ``work`` under ``point``'s budgets: its row (error, answered queries, reports lost and what
    refused them, the attacker's drain) and its queries' rows."""
    began = time.monotonic()
    events, deductions = work.events, work.deductions
    refusal = depletion.run(deductions, point.budgets())
    paid = depletion.paid(deductions, refusal, work.calls)
    benign = deductions.benign
    reported = paid[:benign]
    query, batch, biased = depletion.query_sums(events, np.where(reported, events.conv_value, 0), CRITEO_BATCH)
    scale = depletion.noise_scale()
    errors = depletion.rmsre(truth, biased, scale)
    known = errors[~np.isnan(errors)]
    attributable = int(work.attributable.sum())
    lost = int((work.attributable & ~reported).sum())
    blocked = {}
    mine = deductions.conversion < benign
    for code, column in enumerate(BLOCKED, 1):
        hit = np.zeros(benign, dtype=bool)
        hit[deductions.conversion[mine & (refusal == code)]] = True
        blocked[column] = float(hit.sum() / attributable) if attributable else 0.0
    attacker = ~mine & (refusal == 0)
    row = {
        "config": point.config, "attack": point.attack, "attacker": point.attacker, "first_rank": point.first_rank,
        "per_site": DEFAULTS["per_site"], "global_budget": point.global_budget,
        "impression_quota": point.impression_quota, "conversion_quota": point.conversion_quota,
        "conversion_site_cap": point.conversion_site_cap, "queries": int(known.size),
        "rmsre_median": float(np.median(known)) if known.size else None,
        "rmsre_p95": float(np.quantile(known, 0.95)) if known.size else None,
        "rmsre_mean": float(known.mean()) if known.size else None,
        "rmsre_max": float(known.max()) if known.size else None,
        "answered_share": float(np.mean(known <= ACCURACY_TARGET)) if known.size else None,
        "reports_attributable": attributable, "reports_lost": lost,
        "reports_lost_share": lost / attributable if attributable else 0.0, **blocked,
        "attacker_conversions_paid": int(paid[benign:].sum()),
        "attacker_epsilon_drained": int(deductions.amount[attacker].sum()) / MICRO,
    }
    row["seconds"] = round(time.monotonic() - began, 2)
    queries = [[point.config, point.attack, point.attacker, point.first_rank, point.global_budget,
                point.impression_quota, point.conversion_site_cap, events.advertiser_names[events.queries[q][0]],
                events.categories[events.queries[q][1]], b, t, s, scale, e]
               for q, b, t, s, e in zip(query.tolist(), batch.tolist(), truth.tolist(), biased.tolist(),
                                        errors.tolist(), strict=True)]
    return row, queries


def point_at(points: list[dict], config: str, attack: bool, **values) -> dict:
    """The point of ``config`` with ``attack`` (the random attacker unless ``values`` names another) at the default
    budgets but ``values`` ({} when absent)."""
    wanted = {"global_budget": DEFAULTS["global_budget"], "impression_quota": DEFAULTS["impression_quota"],
              "first_rank": 1, "attacker": "random", "conversion_site_cap": DOMAIN_CAP, **values}
    base = setting(config, attack, wanted["global_budget"], wanted["impression_quota"], wanted["first_rank"],
                   wanted["attacker"], wanted["conversion_site_cap"])
    return next((p for p in points if p["config"] == config and p.get("attacker") == base.attacker
                 and p["global_budget"] == base.global_budget and p["impression_quota"] == base.impression_quota
                 and p.get("conversion_site_cap") == base.conversion_site_cap and p["first_rank"] == base.first_rank),
                {})


def headline(points: list[dict], quotas: tuple, globals_: tuple, ranks: tuple, caps: tuple) -> dict:
    """The numbers ``report.md`` sets against the paper's (Fig. 5a-d, 6a and 6c and the global budget's slack)."""
    def ratio(top: dict, bottom: dict) -> float | None:
        a, b = top.get("rmsre_median"), bottom.get("rmsre_median")
        return a / b if a is not None and b else None

    summary = ("rmsre_median", "rmsre_p95", "answered_share", "reports_lost_share")
    out: dict = {"defaults": DEFAULTS, "accuracy_target": ACCURACY_TARGET}
    for attacker, label in ((None, "no_attack"), ("random", "attack"), ("fresh", "fresh_attack")):
        out[label] = {config: {key: point_at(points, config, attacker is not None, attacker=attacker or "random").get(
            key) for key in summary} for config in CONFIGS}
    baseline = point_at(points, "per_site_only", False)
    out["global_attack_over_baseline_median"] = ratio(point_at(points, "global", True), baseline)
    out["quotas_attack_over_baseline_median"] = ratio(point_at(points, "global_quotas", True), baseline)
    out["fresh_attack_over_baseline_median"] = {
        config: ratio(point_at(points, config, True, attacker="fresh"), baseline) for config in CONFIGS}
    smallest = min(quotas)
    out["smallest_quota"] = smallest
    out["smallest_quota_no_attack_median"] = point_at(points, "global_quotas", False, impression_quota=smallest).get(
        "rmsre_median")
    out["smallest_quota_over_baseline_median"] = ratio(
        point_at(points, "global_quotas", False, impression_quota=smallest), baseline)
    out["blocked_per_site_no_attack"] = baseline.get("blocked_per_site")
    for attack, label in ((False, "no_attack"), (True, "attack")):
        by_quota = {q: point_at(points, "global_quotas", attack, impression_quota=q) for q in quotas}
        out[f"by_quota_{label}"] = {q: {key: p.get(key) for key in ("rmsre_median", "rmsre_p95", "answered_share",
                                                                      "blocked_impression_quota", "blocked_global")}
                                    for q, p in by_quota.items()}
    out["answered_share_by_global_attack"] = {
        config: {g: point_at(points, config, True, global_budget=g).get("answered_share") for g in globals_}
        for config in ("global", "global_quotas")}
    out["rmsre_median_by_first_rank_attack"] = {
        config: {r: point_at(points, config, True, first_rank=r).get("rmsre_median") for r in ranks}
        for config in CONFIGS}
    out["by_cap_attack"] = {
        attacker: {cap: {key: point_at(points, "global_quotas_cap", True, attacker=attacker,
                                       conversion_site_cap=cap).get(key)
                         for key in (*summary, "attacker_epsilon_drained")} for cap in caps}
        for attacker in ATTACKERS}
    return out


def _quota_panels(points: list[dict], quotas: tuple, attack: bool, letters: str) -> list:
    """Fig. 5a-b (or c-d under attack): the quotas configuration's median and 95th-percentile error against the
    impression-site quota, beside the two baselines; and the share of reports each filter took an epoch from."""
    swept = [point_at(points, "global_quotas", attack, impression_quota=q) for q in quotas]
    series = {f"{LABELS['global_quotas']} ({stat})": (list(quotas), [p[f"rmsre_{stat}"] for p in swept],
                                                      COLORS["global_quotas"], style)
              for stat, style in (("median", "-"), ("p95", "--"))}
    references = {f"{LABELS[config]} ({stat})": (point_at(points, config, attack)[f"rmsre_{stat}"], COLORS[config], style)
                  for config in ("per_site_only", "global") for stat, style in (("median", "-"), ("p95", "--"))}
    state = "under attack" if attack else "no attack"
    causes = {BLOCKED[column]: (list(quotas), [p[column] for p in swept], color, "-")
              for column, color in FILTER_COLORS.items()}
    return [
        figures.series_panel(series, f"({letters[0]}) benign query error, {state}\n(global budget "
                             f"{DEFAULTS['global_budget']:g}, conversion-site quota {DEFAULTS['conversion_quota']:g})",
                             "impression-site quota (epsilon)", "RMSRE", references, log_y=True),
        figures.series_panel(causes, f"({letters[1]}) benign reports losing an epoch, by filter, {state}",
                             "impression-site quota (epsilon)", "share of attributable reports"),
    ]


def _global_panels(points: list[dict], globals_: tuple) -> list:
    """Answered queries and median error against the global budget, without (dotted) and with the attack."""
    def series(column: str) -> dict:
        lines = {}
        for config in ("global", "global_quotas"):
            for attack, style in ((False, ":"), (True, "-")):
                mine = [point_at(points, config, attack, global_budget=g) for g in globals_]
                lines[f"{LABELS[config]}{', attack' if attack else ''}"] = (
                    list(globals_), [p[column] for p in mine], COLORS[config], style)
        return lines

    def baseline(column: str) -> dict:
        return {f"{LABELS['per_site_only']}, attack": (point_at(points, "per_site_only", True)[column],
                                                       COLORS["per_site_only"], "-")}

    return [
        figures.series_panel(series("answered_share"), f"(a) queries within the {ACCURACY_TARGET:.0%} target "
                             f"(quotas: impression {DEFAULTS['impression_quota']:g}, conversion "
                             f"{DEFAULTS['conversion_quota']:g})", "global budget per epoch (epsilon)",
                             "share of queries", baseline("answered_share"), log_x=True),
        figures.series_panel(series("rmsre_median"), "(b) median benign query error", "global budget per epoch "
                             "(epsilon)", "RMSRE", baseline("rmsre_median"), log_x=True, log_y=True),
    ]


def _cap_panels(points: list[dict], caps: tuple) -> list:
    """Fig. 6a: the benign queries' error and the share of benign reports lost against the per-user-action cap
    (global budget and quotas at their defaults), under each attacker, beside the quotas without the cap (dotted)."""
    def swept(attacker: str, column: str) -> list:
        return [point_at(points, "global_quotas_cap", True, attacker=attacker, conversion_site_cap=cap)[column]
                for cap in caps]

    def uncapped(column: str, what: str) -> dict:
        return {f"{LABELS['global_quotas']} (no cap), {ATTACKER_LABELS[attacker]}{what}": (
            point_at(points, "global_quotas", True, attacker=attacker)[column], ATTACKER_COLORS[attacker], ":")
            for attacker in ATTACKERS}

    errors = {f"{ATTACKER_LABELS[attacker]} ({stat})": (list(caps), swept(attacker, f"rmsre_{stat}"),
                                                         ATTACKER_COLORS[attacker], style)
              for attacker in ATTACKERS for stat, style in (("median", "-"), ("p95", "--"))}
    lost = {ATTACKER_LABELS[attacker]: (list(caps), swept(attacker, "reports_lost_share"), ATTACKER_COLORS[attacker],
                                        "-") for attacker in ATTACKERS}
    quotas = (f"global {DEFAULTS['global_budget']:g}, quotas {DEFAULTS['impression_quota']:g} and "
              f"{DEFAULTS['conversion_quota']:g}")
    return [
        figures.series_panel(errors, f"(a) benign query error under attack, against the\nper-user-action cap "
                             f"({quotas})", "conversion sites per user action and epoch", "RMSRE",
                             uncapped("rmsre_median", " (median)"), log_y=True),
        figures.series_panel(lost, "(b) benign reports lost under attack", "conversion sites per user action and "
                             "epoch", "share of attributable reports", uncapped("reports_lost_share", ""), log_y=True),
    ]


def _popularity_panel(points: list[dict], ranks: tuple) -> list:
    """Fig. 6c: the error under attacks on sites of decreasing popularity (hijacked ranks ``r .. r + 9``)."""
    series = {f"{LABELS[config]} ({stat})": (list(ranks), [point_at(points, config, True, first_rank=r)[f"rmsre_{stat}"]
                                                           for r in ranks], COLORS[config], style)
              for config in CONFIGS for stat, style in (("median", "-"), ("p95", "--"))}
    return [figures.series_panel(series, "benign query error under attack, by the popularity\nof the sites "
                                 "hijacked (global 8, quotas 2 and 1, cap 2)", "popularity rank of the first site hijacked",
                                 "RMSRE", log_y=True)]


def big_bird(settings: Settings) -> ExperimentOutput:
    """Big Bird Sec. 7 / Fig. 5, 6a and 6c on the Criteo-like data (module docstring): every setting of
    ``settings_of`` on the benign workload alone and under each attack."""
    progress = Progress(NAME, settings.quiet)
    sizes = settings.sizes
    scale = settings.scale or sizes.criteo_scale
    path = criteo_dataset(settings, scale, 0)
    dataset = load_dataset("criteo-like", str(path / "impressions-*"), str(path / "conversions-*"),
                           progress=not settings.quiet)
    sweeps = (sizes.big_bird_quotas, sizes.big_bird_globals, sizes.big_bird_ranks, sizes.big_bird_caps)
    groups: dict[tuple, list[Setting]] = {}  # the settings of each workload: (attacker, first rank hijacked)
    for point in settings_of(*sweeps):
        groups.setdefault((point.attacker, point.first_rank), []).append(point)
    points, queries, workloads = [], [], []
    truth = np.zeros(0)
    for (attacker, rank), group in groups.items():  # one workload at a time: at the paper's scale each takes gigabytes
        attack = None if rank is None else depletion.Attack(first_rank=rank, fresh=attacker == "fresh")
        work = workload(dataset, settings.seed, attack)
        events = work.events
        if rank is None:  # the benign workload comes first; its unbudgeted sums are every setting's truth
            _, _, truth = depletion.query_sums(events, np.where(work.attributable, events.conv_value, 0), CRITEO_BATCH)
        workloads.append({"attacker": attacker, "first_rank": rank, "attack_rounds": int(events.round_device.size),
                          "attacked_devices": int(np.unique(events.round_device).size),
                          "deductions": int(work.deductions.amount.size)})
        hijacked = "no attack" if attack is None else (f"{ATTACKER_LABELS[attacker]} on the sites ranked {rank} to "
                                                       f"{rank + attack.hijacked - 1}")
        progress(f"{hijacked}: "
                 f"{events.round_device.size:,} attack rounds on {workloads[-1]['attacked_devices']:,} of "
                 f"{dataset.device_ids.size:,} converting devices, {work.deductions.amount.size:,} deductions to check")
        for point in group:
            row, rows = measure(work, point, truth)
            points.append(row)
            queries += rows
            progress(f"{point.config}{', attack' if point.attack else ''}, global {point.global_budget}, impression "
                     f"quota {point.impression_quota}, cap {point.conversion_site_cap}: median RMSRE "
                     f"{row['rmsre_median']:.4f}, p95 {row['rmsre_p95']:.4f}, {row['answered_share']:.1%} answered, "
                     f"{row['reports_lost_share']:.2%} reports lost ({row['seconds']:.1f} s)")
        del work
    out = settings.out
    files = [write_dict_csv(out / f"{NAME}_points.csv", points, POINT_COLUMNS).name,
             write_csv(out / f"{NAME}_queries.csv", QUERY_COLUMNS, queries).name,
             figures.save(out / "fig_big_bird_quotas.png",
                          _quota_panels(points, sizes.big_bird_quotas, False, "ab")
                          + _quota_panels(points, sizes.big_bird_quotas, True, "cd"), columns=2).name,
             figures.save(out / "fig_big_bird_global.png", _global_panels(points, sizes.big_bird_globals)).name,
             figures.save(out / "fig_big_bird_cap.png", _cap_panels(points, sizes.big_bird_caps)).name,
             figures.save(out / "fig_big_bird_popularity.png", _popularity_panel(points, sizes.big_bird_ranks)).name]
    generation = generation_of(path)
    attack = depletion.Attack()
    return ExperimentOutput(NAME, points, files, headline(points, *sweeps), {
        "scale": scale, "batch_size": CRITEO_BATCH, "epoch_days": depletion.EPOCH_DAYS,
        "lookback_days": depletion.LOOKBACK_DAYS, "benign_epsilon": float(depletion.BENIGN_EPSILON),
        "max_value": depletion.MAX_VALUE, "publishers": depletion.PUBLISHERS, **DEFAULTS,
        "impression_quotas": list(sizes.big_bird_quotas), "global_budgets": list(sizes.big_bird_globals),
        "first_ranks": list(sizes.big_bird_ranks), "conversion_site_caps": list(sizes.big_bird_caps),
        "attackers": list(ATTACKERS),
        "attack": {"sybils": attack.sybils, "redirections": attack.redirections, "hijacked": attack.hijacked,
                   "named": attack.named, "epsilon": float(attack.epsilon), "genuine_first": attack.genuine_first},
        "devices": int(dataset.device_ids.size), "workloads": workloads,
        "data": generation["stats"], "events_read": dataset.read,
    }, progress.elapsed())
