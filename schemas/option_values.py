"""The text forms of command-line values: each option's domain, checked when the option is parsed.

Every numeric option of every pipeline and generator declares its domain with one of these types (``type=`` of
``argparse``): ``Integer`` (whole numbers, within signed 64 bits unless narrower), ``Real`` (finite floats) and
``Exact`` (exact rationals for privacy parameters: ``1e-5`` is exactly 1/100000, as budgets must be exact,
DESIGN.md "Budgets are exact"). A value outside the domain is an ``argparse.ArgumentTypeError`` whose message
says what the domain is and what was given, so the parser reports one line naming the option (DESIGN.md,
"Command-line conventions"). ``invalid_examples`` lists values just outside the domain, for the tests that
hold every option to its domain.
"""
from __future__ import annotations

import argparse
import math
import os
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import overload

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)

# A decimal number, optionally in scientific notation, or a ratio of two integers: what Exact accepts.
_EXACT = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?|[+-]?\d+/\d+")
_INTEGER = re.compile(r"[+-]?\d+")


def _interval(low, high, low_open: bool = False, high_open: bool = False) -> str:
    """``[1, 64]``, ``(0, 1)``, ``>= 0``, ``> 0`` ... in words."""
    if high is None:
        return f"{'>' if low_open else '>='} {low}"
    if low is None:
        return f"{'<' if high_open else '<='} {high}"
    return f"in {'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"


@dataclass(frozen=True)
class Integer:
    """A whole number in [low, high] (default: any signed 64-bit integer)."""

    low: int = INT64_MIN
    high: int = INT64_MAX

    @property
    def __name__(self) -> str:  # argparse names the type in some of its messages
        return "integer"

    def domain(self) -> str:
        low = None if self.low == INT64_MIN else self.low
        high = None if self.high == INT64_MAX else self.high
        if low is None and high is None:
            return "a 64-bit integer"
        return f"an integer {_interval('-2^63' if low is None else _int_text(low), None if high is None else _int_text(high))}"

    def __call__(self, text: str) -> int:
        stripped = text.strip().replace("_", "")
        if not _INTEGER.fullmatch(stripped):
            raise argparse.ArgumentTypeError(f"must be {self.domain()}, got {text!r}")
        value = int(stripped)
        if not self.low <= value <= self.high:
            raise argparse.ArgumentTypeError(f"must be {self.domain()}, got {text}")
        return value

    def valid_example(self) -> str:
        """A value inside the domain."""
        return str(min(max(self.low, 1), self.high))

    def invalid_examples(self) -> list[str]:
        """Values just outside the domain, and ones of the wrong type."""
        examples = ["x", "1.5", "nan", ""]
        if self.low > INT64_MIN:
            examples.append(str(self.low - 1))
        examples.append(str(self.high + 1) if self.high < INT64_MAX else str(2**64))
        return examples


@dataclass(frozen=True)
class _Interval:
    """A number in the interval given by ``low``/``high`` (None: unbounded), each end closed unless
    ``low_open``/``high_open``."""

    low: float | Fraction | None = None
    high: float | Fraction | None = None
    low_open: bool = False
    high_open: bool = False

    @property
    def __name__(self) -> str:  # argparse names the type in some of its messages
        return "number"

    def _inside(self, value: float | Fraction) -> bool:
        if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
            return False
        return not (self.high is not None and (value > self.high or (self.high_open and value == self.high)))


@dataclass(frozen=True)
class Real(_Interval):
    """A finite float in the interval."""

    def domain(self) -> str:
        if self.low is None and self.high is None:
            return "a finite number"
        return f"a number {_interval(_g(self.low), _g(self.high), self.low_open, self.high_open)}"

    def __call__(self, text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {self.domain()}, got {text!r}") from None
        if not math.isfinite(value) or not self._inside(value):
            raise argparse.ArgumentTypeError(f"must be {self.domain()}, got {text}")
        return value

    def valid_example(self) -> str:
        """A value inside the domain."""
        low, high = self.low if self.low is not None else 0, self.high if self.high is not None else max(self.low or 0, 0) + 2
        return _g((low + high) / 2)

    def invalid_examples(self) -> list[str]:
        """Values just outside the domain, and ones of the wrong type."""
        examples = ["x", "nan", "inf", "1e400", ""]
        if self.low is not None:
            low = float(self.low)
            examples.append(_g(low) if self.low_open else _g(low - max(abs(low), 1.0) / 2))
        if self.high is not None:
            high = float(self.high)
            examples.append(_g(high) if self.high_open else _g(high + max(abs(high), 1.0) / 2))
        return examples


@dataclass(frozen=True)
class Exact(_Interval):
    """An exact rational (``Fraction``) in the interval, written as a decimal (``0.5``, ``1e-5``) or a ratio
    (``1/3``): privacy parameters, so that budgets stay exact."""

    def domain(self) -> str:
        return f"a number {_interval(self.low, self.high, self.low_open, self.high_open)}"

    def __call__(self, text: str) -> Fraction:
        stripped = text.strip()
        if not _EXACT.fullmatch(stripped):
            raise argparse.ArgumentTypeError(f"must be {self.domain()} (a decimal such as 0.5 or 1e-5, or a ratio "
                                              f"such as 1/3), got {text!r}")
        try:
            value = Fraction(stripped)
        except ZeroDivisionError:
            raise argparse.ArgumentTypeError(f"must be {self.domain()}, got {text} (a ratio over zero)") from None
        if not self._inside(value):
            raise argparse.ArgumentTypeError(f"must be {self.domain()}, got {text}")
        return value

    def valid_example(self) -> str:
        """A value inside the domain, exact (``1/2``, ``32``): the middle of the interval, or of [low, low + 2]."""
        low = Fraction(self.low) if self.low is not None else Fraction(0)
        high = Fraction(self.high) if self.high is not None else max(low, Fraction(0)) + 2
        return str((low + high) / 2)

    def invalid_examples(self) -> list[str]:
        """Values just outside the domain, and ones of the wrong type."""
        examples = ["x", "nan", "inf", "2A", "1/0", ""]
        if self.low is not None:
            examples.append(str(self.low) if self.low_open else str(Fraction(self.low) - 1))
        if self.high is not None:
            examples.append(str(self.high) if self.high_open else str(Fraction(self.high) + 1))
        return examples


def _int_text(value: int) -> str:
    """Bounds at powers of two written as such (``2^64 - 1``), others in digits."""
    powers = {2**64 - 1: "2^64 - 1", 2**63 - 1: "2^63 - 1", 2**32 - 1: "2^32 - 1"}
    return powers.get(value, str(value))


@overload
def _g(value: float | Fraction) -> str: ...
@overload
def _g(value: None) -> None: ...
def _g(value: float | Fraction | None) -> str | None:
    return None if value is None else f"{float(value):g}"


POSITIVE_INTEGER = Integer(low=1)
NONNEGATIVE_INTEGER = Integer(low=0)
PROBABILITY = Real(0, 1)
OPEN_PROBABILITY = Real(0, 1, low_open=True, high_open=True)
POSITIVE_REAL = Real(0, low_open=True)
SEED = Integer(low=0, high=2**64 - 1)
POSITIVE_EXACT = Exact(0, low_open=True)


def location(text: str) -> str:
    """A file, glob or directory named on the command line, as a pipeline's workers must find it: a local path
    made absolute, URLs (``gs://``, ``kafka://``, ``sqlite:///``...) and ``env:NAME`` as given.

    The driver judges and publishes in the directory it was started from, but a cluster's workers (Flink's Python
    worker pool, deploy/) run elsewhere: a path relative to the driver would name nothing there, or another file.
    """
    if "://" in text or text.startswith("env:"):
        return text
    return os.path.abspath(os.path.expanduser(text))
