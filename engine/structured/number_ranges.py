"""Exact GBNF for integers in a range, and for decimals between whole-number bounds.

Integers: the decimal strings of [lo, hi] are split by length, then digit by digit
(123..456 -> 12[3-9] | 1[3-9][0-9] | [23][0-9]{2} | 4[0-4][0-9] | 45[0-6]). Negative
numbers are a "-" before the range of their magnitudes. Integers have at most 16 digits:
an open end stops there, and so does a bound beyond it (a schema's minimum of -1e300 asks
nothing the 16 digits do not already keep). Whole lengths inside the range share one
alternative ([1-9] [0-9]{1,14}), so that llama.cpp follows a few paths per digit, not one per
length: its cost per token grows with the live alternatives, and a range of 300-digit bounds
cost ~120 ms a token where a plain integer costs ~5.

Decimals x with whole-number bounds, written I.F (no exponent): for 0 <= x, x lies in
[I, I+1), so the integer part decides nearly everything. With lower bound L and upper H:
  I in [L', H-1] (L' = L, or L+1 when L is exclusive): any fraction is inside;
  I = L when L is exclusive: only a fraction that is not all zeros (x > L);
  I = H when H is inclusive: only a fraction of zeros (x = H);
  I = H-1 when H is exclusive: any fraction, but few digits (below).
Negative x mirror this on their magnitude. Floats round: 0.99999999999999999 parses as
1.0, which an exclusive maximum of 1 refuses. A decimal of at most 15 significant digits
survives the trip to a double and back, so the fraction next to an exclusive bound gets
at most 15 digits in all; elsewhere rounding cannot cross a bound, since I and I+1 are
exact doubles (numbers here have at most 15 integer digits, bounds at most 10**15).
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.structured.gbnf import alt, literal, seq

INTEGER_DIGITS = 16  # the most digits of an integer, bounded or not
MAX_INTEGER = 10**INTEGER_DIGITS - 1
DECIMAL_DIGITS = 15  # integer digits of a decimal; also the most significant digits near a bound
FRACTION_DIGITS = 16
MAX_DECIMAL_BOUND = 10**15


@dataclass(frozen=True)
class Bound:
    value: int
    exclusive: bool = False


def _digits(lo: int, hi: int) -> str:
    if lo == hi:
        return literal(str(lo))
    return f"[{lo}-{hi}]"


def _any_digits(count: int) -> str:
    return "" if count == 0 else "[0-9]" if count == 1 else f"[0-9]{{{count}}}"


def _same_length(lo: str, hi: str) -> str:
    """Digit strings of one length from lo to hi (lo <= hi), leading zeros allowed."""
    common = 0
    while common < len(lo) and lo[common] == hi[common]:
        common += 1
    prefix_digits = lo[:common]
    lo, hi = lo[common:], hi[common:]
    if not lo:
        return literal(prefix_digits)
    rest = len(lo) - 1
    first_lo, first_hi = int(lo[0]), int(hi[0])
    options = []
    if lo[1:] != "0" * rest:
        options.append(_after(lo[0], _same_length(lo[1:], "9" * rest)))
        first_lo += 1
    tail_hi = None
    if hi[1:] != "9" * rest:
        tail_hi = _after(hi[0], _same_length("0" * rest, hi[1:]))
        first_hi -= 1
    if (first_lo, first_hi) == (0, 9):
        options.append(_any_digits(rest + 1))
    elif first_lo <= first_hi:
        options.append(seq(_digits(first_lo, first_hi), _any_digits(rest)))
    if tail_hi:
        options.append(tail_hi)
    return _after(prefix_digits, alt(options)) if prefix_digits else alt(options)


def _after(digits: str, expr: str) -> str:
    """The digits, then expr: one literal when expr starts with a literal of digits too."""
    head, _, rest = expr.partition(" ")
    if head.startswith('"') and head[1:-1].isdigit():
        return seq(literal(digits + head[1:-1]), rest)
    return seq(literal(digits), expr)


def unsigned_range(lo: int, hi: int) -> str:
    """The decimal strings (no leading zeros) of the integers lo..hi, 0 <= lo <= hi."""
    options, whole = [], []
    for length in range(len(str(lo)), len(str(hi)) + 1):
        first = max(lo, 10 ** (length - 1) if length > 1 else 0)
        last = min(hi, 10**length - 1)
        if length > 1 and (first, last) == (10 ** (length - 1), 10**length - 1):
            whole.append(length)  # every number of this length: only the first and last can be partial
        elif first <= last:
            options.append(_same_length(str(first), str(last)))
    if whole:
        fewest, most = whole[0] - 1, whole[-1] - 1
        tail = _any_digits(most) if fewest == most else f"[0-9]{{{fewest},{most}}}"
        options.insert(1 if len(str(lo)) < whole[0] else 0, seq("[1-9]", tail))
    return alt(options)


def integer_range(lo: int | None, hi: int | None) -> str | None:
    """The integers lo..hi (None: open) of at most INTEGER_DIGITS digits; None when there are none."""
    lo = None if lo is not None and lo < -MAX_INTEGER else lo
    hi = None if hi is not None and hi > MAX_INTEGER else hi
    top = MAX_INTEGER
    options = []
    if hi is None or hi >= 0:
        first, last = max(lo, 0) if lo is not None else 0, top if hi is None else hi
        if first <= last:
            options.append(unsigned_range(first, last))
    if lo is None or lo < 0:
        first, last = max(-hi, 1) if hi is not None else 1, top if lo is None else -lo
        if first <= last:
            options.append(seq('"-"', unsigned_range(first, last)))
    return alt(options) if options else None


def _fraction(digits: int) -> str:
    return f'( "." [0-9]{{1,{digits}}} )?' if digits > 0 else ""


def _nonzero_fraction(digits: int) -> str | None:
    """"." then 1..digits digits, not all zeros (unambiguous: the first non-zero one leads)."""
    options = []
    for zeros in range(digits):
        more = digits - zeros - 1
        options.append(seq(_any_zeros(zeros), "[1-9]", f"[0-9]{{0,{more}}}" if more else ""))
    return seq('"."', alt(options)) if options else None


def _any_zeros(count: int) -> str:
    return literal("0" * count) if count else ""


def _near_bound_digits(integer: int) -> int:
    return DECIMAL_DIGITS - len(str(integer))


def _magnitude(lo: Bound, hi: Bound | None) -> list[str]:
    """Unsigned decimals m with lo <= m (or <) and m <= hi (or <); lo.value >= 0."""
    first = lo.value + (1 if lo.exclusive else 0)
    top = 10**DECIMAL_DIGITS - 1
    last = top if hi is None else hi.value - (2 if hi.exclusive else 1)
    options = []
    if first <= last:
        options.append(seq(unsigned_range(first, last), _fraction(FRACTION_DIGITS)))
    below_hi = None if hi is None or not hi.exclusive else hi.value - 1
    if lo.exclusive and (hi is None or lo.value < hi.value):
        fraction = _nonzero_fraction(_near_bound_digits(lo.value))
        if fraction:
            options.append(seq(literal(str(lo.value)), fraction))
    if below_hi is not None and below_hi >= first and below_hi >= 0:
        options.append(seq(literal(str(below_hi)), _fraction(_near_bound_digits(below_hi))))
    if hi is not None and not hi.exclusive and hi.value >= first:
        options.append(seq(literal(str(hi.value)), f'( "." "0"{{1,{FRACTION_DIGITS}}} )?'))
    return options


def decimal_range(lo: Bound | None, hi: Bound | None) -> str | None:
    """Decimals between whole-number bounds (None: open), without exponent; None when there are none."""
    options = []
    if hi is None or hi.value > 0 or (hi.value == 0 and not hi.exclusive):
        start = lo if lo is not None and lo.value >= 0 else Bound(0)
        options += _magnitude(start, hi)
    if lo is None or lo.value < 0:
        # Strictly negative: "-0" and "-0.0" are left to the non-negative side.
        start = Bound(-hi.value, hi.exclusive) if hi is not None and hi.value < 0 else Bound(0, True)
        end = None if lo is None else Bound(-lo.value, lo.exclusive)
        negative = _magnitude(start, end)
        if negative:
            options.append(seq('"-"', alt(negative)))
    return alt(options) if options else None
