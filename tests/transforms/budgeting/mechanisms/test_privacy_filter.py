"""Pure-DP privacy filters with integer budgets (``transforms/budgeting/mechanisms/privacy_filter.py``; Cookie
Monster paper App. B, Eq. 3).

Eq. 3: a filter of capacity eps_G that accepted eps_1, ..., eps_k halts the next request eps_{k+1} when
eps_1 + ... + eps_{k+1} > eps_G, and a halted request consumes nothing.
"""
from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transforms.budgeting.mechanisms.privacy_filter import FilterTable
from transforms.core.mechanisms.budget_units import UNITS_PER_EPSILON, epsilon_units, units_epsilon

# --------------------------------------------------------------------------- units


def test_units_per_epsilon_and_exact_decimals():
    assert UNITS_PER_EPSILON == 10**12
    assert epsilon_units(1, "down") == 10**12
    assert epsilon_units(0.1, "up") == epsilon_units(0.1, "down") == 10**11  # floats go through their repr
    assert epsilon_units("0.7", "up") == 7 * 10**11
    assert epsilon_units(Fraction(3, 4), "down") == 75 * 10**10
    assert epsilon_units(0, "up") == 0


def test_rounding_directions():
    """Charges round up, capacities down: rounding can only make a filter stricter."""
    third = Fraction(1, 3)
    assert epsilon_units(third, "up") == 333_333_333_334
    assert epsilon_units(third, "down") == 333_333_333_333
    tiny = Fraction(1, 10**13)  # a tenth of a unit
    assert epsilon_units(tiny, "up") == 1
    assert epsilon_units(tiny, "down") == 0
    almost_two = 2 - tiny
    assert epsilon_units(almost_two, "up") == 2 * 10**12
    assert epsilon_units(almost_two, "down") == 2 * 10**12 - 1


@settings(max_examples=200, deadline=None)
@given(st.fractions(min_value=0, max_value=1000, max_denominator=10**15))
def test_rounding_brackets_the_exact_value(epsilon):
    up, down = epsilon_units(epsilon, "up"), epsilon_units(epsilon, "down")
    assert units_epsilon(down) <= epsilon <= units_epsilon(up)
    assert up - down in (0, 1)
    assert (up == down) == ((epsilon * UNITS_PER_EPSILON).denominator == 1)


def test_units_epsilon_is_exact():
    assert units_epsilon(1) == Fraction(1, 10**12)
    assert units_epsilon(epsilon_units("0.35", "up")) == Fraction(35, 100)


@pytest.mark.parametrize("bad, rounding, error", [(-0.1, "up", "negative"), (Fraction(-1, 10**20), "down", "negative"),
                                                  (1, "nearest", "rounding"), (1, "UP", "rounding")])
def test_epsilon_units_refuses(bad, rounding, error):
    with pytest.raises(ValueError, match=error):
        epsilon_units(bad, rounding)


def test_epsilon_units_refuses_non_finite_and_bools():
    with pytest.raises(ValueError):
        epsilon_units(float("inf"), "up")
    with pytest.raises(ValueError):
        epsilon_units(float("nan"), "up")
    with pytest.raises(TypeError):
        epsilon_units(True, "up")


# --------------------------------------------------------------------------- one filter


def test_eq3_boundary_exactly_to_capacity_succeeds_one_more_unit_halts():
    table = FilterTable(100)
    assert table.try_consume("k", 60)
    assert table.try_consume("k", 40)  # 60 + 40 = 100 = capacity: not > eps_G, accepted
    assert dict(table.items()) == {"k": 100}
    assert not table.try_consume("k", 1)  # 101 > 100: Halt
    assert dict(table.items()) == {"k": 100}  # and nothing consumed
    assert table.try_consume("k", 0)  # a zero charge always fits
    assert dict(table.items()) == {"k": 100}


def test_a_halted_request_consumes_nothing_and_smaller_ones_still_fit():
    table = FilterTable(10)
    assert table.try_consume("k", 7)
    assert not table.try_consume("k", 4)
    assert table.consumed == {"k": 7}
    assert table.try_consume("k", 3)
    assert table.consumed == {"k": 10}


def test_filters_are_per_key_and_created_empty():
    table = FilterTable(5)
    assert table.can_pay("new", 5) and not table.can_pay("new", 6)
    assert "new" not in table.consumed  # can_pay does not create
    assert table.try_consume(("nike.com", 1), 5)
    assert table.try_consume(("nike.com", 2), 5)
    assert not table.try_consume(("nike.com", 1), 1)
    assert table.try_consume(("adidas.com", 1), 5)
    assert table.consumed == {("nike.com", 1): 5, ("nike.com", 2): 5, ("adidas.com", 1): 5}


def test_a_halt_on_a_new_key_records_it_with_zero():
    table = FilterTable(5)
    assert not table.try_consume("k", 6)
    assert table.consumed == {"k": 0}


def test_touch_records_zero_and_keeps_existing():
    table = FilterTable(5)
    table.touch("a")
    assert table.try_consume("b", 3)
    table.touch("b")
    assert dict(table.items()) == {"a": 0, "b": 3}


def test_zero_capacity_accepts_only_zero():
    table = FilterTable(0)
    assert table.try_consume("k", 0)
    assert not table.try_consume("k", 1)
    assert table.consumed == {"k": 0}


def test_invalid_capacity_and_charges():
    with pytest.raises(ValueError, match="capacity"):
        FilterTable(-1)
    table = FilterTable(5)
    with pytest.raises(ValueError, match="negative"):
        table.try_consume("k", -1)
    assert table.consumed == {}


def test_shared_consumed_dict_is_used_in_place():
    """A FilterTable built over an existing dict (device state) reads and writes that dict."""
    consumed = {"k": 4}
    table = FilterTable(5, consumed)
    assert not table.try_consume("k", 2)
    assert table.try_consume("k", 1)
    assert consumed == {"k": 5}


# --------------------------------------------------------------------------- all or nothing


def test_try_consume_all_pays_everything_or_nothing():
    table = FilterTable(10, {"a": 8})
    assert not table.try_consume_all([("a", 3), ("b", 1), ("c", 2)])  # a would reach 11
    assert table.consumed == {"a": 8, "b": 0, "c": 0}  # keys touched, nothing paid
    assert table.try_consume_all([("a", 2), ("b", 1), ("c", 2)])  # a reaches exactly 10
    assert table.consumed == {"a": 10, "b": 1, "c": 2}


def test_try_consume_all_sums_repeated_keys_before_checking():
    table = FilterTable(10)
    assert not table.try_consume_all([("a", 6), ("a", 5)])  # 11 in total on one filter
    assert table.consumed == {"a": 0}
    assert table.try_consume_all([("a", 6), ("a", 4)])
    assert table.consumed == {"a": 10}


def test_try_consume_all_of_nothing_succeeds():
    table = FilterTable(1)
    assert table.try_consume_all([])
    assert table.consumed == {}


def test_try_consume_all_takes_a_generator():
    table = FilterTable(3)
    assert table.try_consume_all((("q", epoch), 3) for epoch in range(4))
    assert table.consumed == {("q", epoch): 3 for epoch in range(4)}


def test_try_consume_all_refuses_negative_charges_like_try_consume():
    table = FilterTable(10, {"a": 10})
    with pytest.raises(ValueError, match="negative"):
        table.try_consume_all([("a", -5)])
    assert table.consumed == {"a": 10}


# --------------------------------------------------------------------------- any interleaving

KEYS = st.sampled_from([("q1", 0), ("q1", 1), ("q2", 0), ("q2", 1), ("q1", 2)])
AMOUNTS = st.integers(min_value=0, max_value=12)
OPERATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("one"), KEYS, AMOUNTS),
        st.tuples(st.just("all"), st.lists(st.tuples(KEYS, AMOUNTS), max_size=5)),
    ),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(capacity=st.integers(min_value=0, max_value=30), operations=OPERATIONS)
def test_no_interleaving_overshoots_and_halts_change_nothing(capacity, operations):
    table = FilterTable(capacity)
    model: dict = {}  # the reference: consumption per key, by Eq. 3
    for operation in operations:
        before = dict(table.consumed)
        if operation[0] == "one":
            _, key, units = operation
            fits = model.get(key, 0) + units <= capacity
            assert table.try_consume(key, units) is fits
            if fits:
                model[key] = model.get(key, 0) + units
            else:
                assert {k: v for k, v in table.consumed.items() if v} == {k: v for k, v in before.items() if v}
        else:
            charges = operation[1]
            totals: dict = {}
            for key, units in charges:
                totals[key] = totals.get(key, 0) + units
            fits = all(model.get(key, 0) + units <= capacity for key, units in totals.items())
            assert table.try_consume_all(charges) is fits
            if fits:
                for key, units in totals.items():
                    model[key] = model.get(key, 0) + units
            else:
                assert all(table.consumed.get(k, 0) == v for k, v in before.items())
                assert all(table.consumed[key] == before.get(key, 0) for key, _ in charges)
        assert all(0 <= units <= capacity for units in table.consumed.values())
        assert {k: v for k, v in table.consumed.items() if v} == {k: v for k, v in model.items() if v}
