"""The querier's side: batches of B reports, the DP summation query, and IPA-like central budgets.

Seed 003 Appendix A Alg. 1 AnswerQuery: the reports of a batch are summed and
Laplace noise is added inside the MPC/TEE. Sec. 8.1: the querier cuts the
reports of each query (here each (querier site, query key)) into batches of B
in conversion-time order and runs one query per full batch; it picks epsilon
from an accuracy target, eps = Delta ln(1/beta) / (alpha B c~)
(``accuracy.AccuracyTarget``). IPA-like budgets centrally (``CentralBudget``): a batch
runs only if every epoch it covers can pay epsilon on the querier's filter
for that epoch, then all of them pay; otherwise it is rejected. Beam-free.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, NamedTuple

from schemas.rows import IncompleteBatch, QueryResult
from transforms.budgeting.mechanisms.device import ReportRecord
from transforms.budgeting.mechanisms.privacy_filter import FilterTable
from transforms.core.mechanisms.budget_units import as_fraction, epsilon_units
from transforms.core.mechanisms.noise import DEFAULT_GRANULARITY, GridLaplace, RandomSource, laplace_scale_for

if TYPE_CHECKING:  # pragma: no cover
    from transforms.budgeting.mechanisms.bias import BiasDetection

EXECUTED = "executed"
REJECTED = "rejected"
DEFAULT_BATCH_SIZE = 2000


def report_order(report: ReportRecord) -> tuple:
    """The order reports reach the querier in: conversion time, then device and conversion id (deterministic)."""
    return (report.conversion_time_micros, report.device_id, report.conversion_id)


class QueryBatch(NamedTuple):
    """B reports of one (querier site, query key), summed; ``completed`` is the order key of its last report."""

    querier_site: str
    query_key: str
    batch_index: int
    completed: tuple
    report_count: int
    sums: tuple
    epsilon: float
    sensitivity: float
    epochs: tuple
    bias_weight: float = 0.0  # the largest Thm. 18 Delta of its reports when bias detection is on


def make_batch(querier_site: str, query_key: str, batch_index: int, reports: Sequence[ReportRecord]) -> QueryBatch:
    """One batch from its reports (in report order). Its epsilon is the smallest requested and its
    sensitivity the largest query global sensitivity, so the noise satisfies every report's request."""
    dimension = max(len(report.histogram) for report in reports)
    sums = tuple(math.fsum(r.histogram[i] for r in reports if i < len(r.histogram)) for i in range(dimension))
    epochs = sorted({epoch for r in reports for epoch in range(r.first_epoch, r.last_epoch + 1)})
    return QueryBatch(
        querier_site=querier_site,
        query_key=query_key,
        batch_index=batch_index,
        completed=report_order(reports[-1]),
        report_count=len(reports),
        sums=sums,
        epsilon=min(r.requested_epsilon for r in reports),
        sensitivity=max(r.query_global_sensitivity for r in reports),
        epochs=tuple(epochs),
        bias_weight=max(r.bias_weight for r in reports),
    )


class BatchCutter:
    """Cuts the reports of one (querier, query key), fed in report order, into batches of ``batch_size``.
    ``pending`` holds the reports of the batch not yet full (not executed: the querier waits for B)."""

    def __init__(self, querier_site: str, query_key: str, batch_size: int, next_index: int = 0, pending=None):
        self.querier_site, self.query_key, self.batch_size = querier_site, query_key, batch_size
        self.next_index = next_index
        self.pending: list = [] if pending is None else pending

    def add(self, reports: Iterable[ReportRecord]) -> list[QueryBatch]:
        """Append ``reports`` (in order); the batches that became full."""
        full = []
        for report in reports:
            self.pending.append(report)
            if len(self.pending) == self.batch_size:
                full.append(make_batch(self.querier_site, self.query_key, self.next_index, self.pending))
                self.next_index += 1
                self.pending = []
        return full

    def incomplete(self) -> IncompleteBatch | None:
        """The reports still waiting for a full batch, if any."""
        return IncompleteBatch(self.querier_site, self.query_key, len(self.pending)) if self.pending else None


def batch_order(batch: QueryBatch) -> tuple:
    """The order queries are run in: when their batch completed, then query key and index."""
    return (batch.completed, batch.query_key, batch.batch_index)


class CentralBudget:
    """IPA-like budgeting (Cookie Monster paper Sec. 2.2, 8.1): one filter per (querier site, epoch), off device."""

    def __init__(self, capacity_units: int, consumed: dict | None = None) -> None:
        self.filters = FilterTable(capacity_units, consumed)

    def admit(self, batch: QueryBatch) -> bool:
        """Pay epsilon on every epoch the batch covers, or nothing (the query is rejected)."""
        units = epsilon_units(batch.epsilon, "up")
        return self.filters.try_consume_all(((batch.querier_site, epoch), units) for epoch in batch.epochs)


def _result(
    batch: QueryBatch, noisy_value: tuple, scale: Fraction, status: str, bias: BiasDetection | None = None
) -> QueryResult:
    """The result; with bias detection, coordinate 0 of ``noisy_value`` (M_0) becomes the noisy count of empty
    epochs (or reports) M_0 / kappa and the Thm. 15/16 bound on the bias, and the other m are the value."""
    estimate = bound = None
    if bias is not None and noisy_value:
        counted, noisy_value = noisy_value[0], noisy_value[1:]
        estimate = counted / float(bias.kappa)
        bound = bias.bound(counted, float(scale), batch.bias_weight)
    return QueryResult(
        querier_site=batch.querier_site,
        query_key=batch.query_key,
        batch_index=batch.batch_index,
        report_count=batch.report_count,
        noisy_value=noisy_value,
        epsilon=batch.epsilon,
        noise_scale=float(scale),
        status=status,
        empty_count_estimate=estimate,
        bias_bound=bound,
    )


def execute(
    batch: QueryBatch,
    source: RandomSource,
    granularity: Fraction = DEFAULT_GRANULARITY,
    bias: BiasDetection | None = None,
) -> QueryResult:
    """Alg. 1 AnswerQuery: each entry of the batch sum plus Laplace noise of scale query global sensitivity /
    epsilon (``GridLaplace``, exact on a 2^-20 grid, scale inflated by the grid step). The noise is drawn from
    ``source.keyed_child`` of the batch, so a seeded run is reproducible whatever the processing order. With
    ``bias`` (Appendix D), the counting coordinate gets the same noise and the result carries the bias bound.

    The discretised Laplace keeps the tail the bound needs: with q = e^{-g/b}, P(X <= -K g) = q^K / (1 + q),
    at most e^{-a/b} for a <= K g, so P(X < -b ln(1/beta)) <= beta."""
    scale = laplace_scale_for(as_fraction(batch.sensitivity), as_fraction(batch.epsilon), granularity)
    mechanism = GridLaplace(scale, granularity)
    child = source.keyed_child(("query", batch.querier_site, batch.query_key, batch.batch_index))
    return _result(batch, tuple(mechanism.release(value, child) for value in batch.sums), scale, EXECUTED, bias)


def rejected(batch: QueryBatch, granularity: Fraction = DEFAULT_GRANULARITY) -> QueryResult:
    """The result of a batch a central budget refused: no value (the scale is the one ``execute`` would use)."""
    scale = laplace_scale_for(as_fraction(batch.sensitivity), as_fraction(batch.epsilon), granularity)
    return _result(batch, (), scale, REJECTED)


def run_queries(
    batches: Iterable[QueryBatch],
    central: CentralBudget | None,
    source: RandomSource,
    bias: BiasDetection | None = None,
) -> Iterator[QueryResult]:
    """Queries in batch order: executed with noise, or (IPA-like, ``central`` given) rejected when the central
    budget cannot pay."""
    for batch in sorted(batches, key=batch_order):
        if central is None or central.admit(batch):
            yield execute(batch, source, bias=bias)
        else:
            yield rejected(batch)
