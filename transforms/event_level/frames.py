"""Batch replay of many devices whose event-level sources are held as columns (Ghazi et al. Sec. 2.2, Alg. 4 and 8).

``devices.replay_devices`` registers every source in its device's ``EventLevelClient``. At population
scale almost every source is idle: no trigger ever goes to it and its s* is ⊥, so it sends nothing and changes
nothing. ``replay_frame`` keeps the columns of such sources in polars and replays, with the same client, only
the sources that may matter:

1. **Configurations** (``code_configs``): the distinct (source type, expiry, max reports, matching, trigger
   specs) of the frame, each checked once (``devices.source_config``), and a code per source.
2. **s* for every source** (``devices.choose_outputs``): one ``randomized_response_array`` call per
   configuration with the secure source; per-source keyed draws with a seeded one, exactly as the row path.
3. **Sources a trigger may go to** (``attributable_sources``). In the client a trigger goes to the best source,
   by (priority, registration order), among the sources that share its device, destination and reporting
   origin, were registered at or before it, have not expired, match its filters and are active. A source is
   inactive only once it has sent its max reports M, which takes triggers attributed to it, or when M = 0 (the
   default deactivation ``max_reports_sent``, which ``EventLevelDevice`` uses). So among the matching sources
   with M > 0, ranked by (priority, registration) from the best, the winner of a trigger is within the first
   r + 1, r being the number of triggers of the same key replayed before it: each of those deactivated at most
   one source. ``attributable_sources`` keeps, per trigger, the matching sources whose rank by (priority,
   time), ties counted in the trigger's favour, is at most the number of the key's triggers at or before its
   time: a superset of the possible winners.
4. **Replay** of the attributable and the randomized sources with their devices' triggers
   (``devices.replay_device``). Every trigger's winner is among them, so by induction over the triggers
   each of them goes through the same states as in a replay of all the sources, and sends the same reports;
   a left-out source sends nothing in both (truthful and never attributed).

No Beam import; the Beam wiring is ``transforms/event_level/reports.py``.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import polars as pl

from schemas.frames import frame_of_columns, source_rows, trigger_specs_of
from schemas.rows import EventLevelReport, EventLevelSource, EventLevelTrigger
from schemas.time_units import MICROS_PER_SECOND
from transforms.core.mechanisms.noise import RandomSource
from transforms.event_level.mechanisms.config import EventLevelConfig
from transforms.event_level.mechanisms.devices import add_stats, choose_outputs, config_or_reason, replay_device, source_config

CONFIG_COLUMNS = ("source_type", "expiry_seconds", "max_event_level_reports", "trigger_data_matching", "trigger_specs")
KEY_COLUMNS = ("device_id", "destination", "reporting_origin")  # who may take whose triggers
ROW = "row"  # a source's position in the frame
CONFIG = "config"  # a source's configuration code
_TRIGGER_COLUMNS = {**{name: pl.String() for name in KEY_COLUMNS}, "event_time_micros": pl.Int64(),
                    "filters": pl.List(pl.String())}


def _config_table(sources: pl.DataFrame) -> tuple[pl.DataFrame, list[EventLevelSource]]:
    """The distinct configurations of a frame, numbered (``CONFIG``) in order of appearance, with the ``ROW``s
    that have each, and one row standing for each (the fields ``devices`` reads a configuration from)."""
    table = (sources.select(CONFIG_COLUMNS).with_row_index(ROW)
             .group_by(CONFIG_COLUMNS, maintain_order=True).agg(ROW).with_row_index(CONFIG))
    return table, [EventLevelSource("", 0, "", "", "", kind, expiry, 0, (), reports, matching, trigger_specs_of(specs))
                   for _, kind, expiry, reports, matching, specs, _ in table.iter_rows()]


def _codes(table: pl.DataFrame, size: int) -> np.ndarray:
    members = table.select(CONFIG, ROW).explode(ROW)
    codes = np.empty(size, dtype=np.int64)
    codes[members[ROW].to_numpy()] = members[CONFIG].to_numpy()
    return codes


def code_configs(sources: pl.DataFrame) -> tuple[pl.DataFrame, list[EventLevelConfig]]:
    """The frame with a ``ROW`` and a ``CONFIG`` column (a code into the list returned); each distinct
    configuration built once. Every configuration must be valid (the reader dead-letters the others)."""
    table, standing = _config_table(sources)
    configs = [source_config(row) for row in standing]
    return sources.with_row_index(ROW).with_columns(pl.Series(CONFIG, _codes(table, sources.height))), configs


def refuse_sources(sources: pl.DataFrame, epsilon: float | None) -> tuple[pl.DataFrame, pl.Series]:
    """``devices.SourceCheck`` over a frame, once per distinct configuration: (the frame of the sources it
    passes, the reason for each source, null where it passes)."""
    table, standing = _config_table(sources)
    reasons = [outcome if isinstance(outcome := config_or_reason(row, epsilon), str) else None for row in standing]
    if not any(reasons):
        return sources, pl.Series("reason", [None] * sources.height, dtype=pl.String())
    reason = pl.Series("reason", reasons, dtype=pl.String()).gather(_codes(table, sources.height))
    return sources.filter(reason.is_null()), reason


def triggers_frame(triggers: Sequence[EventLevelTrigger]) -> pl.DataFrame:
    """The columns of ``triggers`` that attribution reads."""
    return frame_of_columns({
        "device_id": [trigger.device_id for trigger in triggers],
        "destination": [trigger.destination for trigger in triggers],
        "reporting_origin": [trigger.reporting_origin for trigger in triggers],
        "event_time_micros": [trigger.event_time_micros for trigger in triggers],
        "filters": [trigger.filters for trigger in triggers],
    }, _TRIGGER_COLUMNS)


def attributable_sources(coded: pl.DataFrame, configs: Sequence[EventLevelConfig], triggers: pl.DataFrame) -> pl.Series:
    """The ``ROW`` of every source some trigger may be attributed to (step 3 of the module docstring)."""
    expiry = np.array([config.expiry_seconds * MICROS_PER_SECOND for config in configs], dtype=np.int64)
    takes = np.array([config.max_event_level_reports > 0 for config in configs], dtype=bool)
    codes = coded[CONFIG].to_numpy()
    candidates = coded.select(
        *KEY_COLUMNS, ROW, "priority", "filter_data", pl.col("event_time_micros").alias("source_time"),
        pl.Series("expires", coded["event_time_micros"].to_numpy() + expiry[codes]),
    ).filter(pl.Series(takes[codes]))
    ranked = (
        triggers.with_row_index("trigger")
        .with_columns(pl.col("event_time_micros").rank("max").over(KEY_COLUMNS).alias("limit"))
        .join(candidates, on=KEY_COLUMNS, how="inner")
        .filter(
            (pl.col("source_time") <= pl.col("event_time_micros")) & (pl.col("event_time_micros") < pl.col("expires"))
            & ((pl.col("filters").list.len() == 0)
               | (pl.col("filters").list.set_intersection(pl.col("filter_data")).list.len() > 0))
        )
        .sort(["trigger", "priority", "source_time"], descending=[False, True, True])
        .with_columns(pl.int_range(pl.len()).over("trigger").alias("place"))
        .with_columns((pl.col("place").min().over(["trigger", "priority", "source_time"]) + 1).alias("rank"))
    )
    return ranked.filter(pl.col("rank") <= pl.col("limit"))[ROW].unique()


def replay_frame(sources: pl.DataFrame, triggers: Sequence[EventLevelTrigger], epsilon: float | None,
                 random_source: RandomSource, stats: dict | None = None) -> Iterator[EventLevelReport]:
    """The reports of the devices of a source frame (``schemas.frames.SOURCE_FRAME_COLUMNS``) and their triggers,
    as ``devices.replay_devices`` would send them for the same rows: device by device (sorted by id).
    ``stats`` as there."""
    coded, configs = code_configs(sources)
    chosen: dict[int, tuple] = {}
    if epsilon is not None:
        chosen = choose_outputs(configs, coded[CONFIG].to_numpy(), epsilon, random_source, lambda: list(zip(
            coded["device_id"].to_list(), coded["source_id"].to_list(), coded["event_time_micros"].to_list(), strict=True)))
    add_stats(stats, coded.height, len(chosen))
    replayed = attributable_sources(coded, configs, triggers_frame(triggers))
    if chosen:
        replayed = pl.concat([replayed, pl.Series(ROW, list(chosen), dtype=replayed.dtype)]).unique()
    kept = coded.filter(pl.col(ROW).is_in(replayed.implode()))
    devices: dict[str, list] = {}
    for position, row in zip(kept[ROW].to_list(), source_rows(kept), strict=True):
        devices.setdefault(row.device_id, []).append((row, chosen.get(position)))
    for trigger in triggers:
        events = devices.get(trigger.device_id)
        if events is not None:
            events.append((trigger, None))
    for device_id in sorted(devices):
        yield from replay_device(devices[device_id], epsilon, random_source)
