"""User-facing errors, and the checks of user input that raise them.

Every problem caused by the user's input (an unknown model name, an impossible sparsity, an empty
dataset, a corrupt store file) is raised as :class:`TalosError` with one sentence that names the bad
value and says what is allowed. The CLI and the dashboard print that sentence instead of a traceback.

The typed checks of numbers live here, in the lowest layer, so every module asks the same questions:
:func:`is_int` and :func:`is_number` (a boolean is never a number: ``True`` is not a step count), and
:func:`check_int` / :func:`check_number`, which raise one :class:`TalosError` sentence and return the value.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable


class TalosError(ValueError):
    """An error in user input or user-provided files, with a message meant for people."""


def unknown(kind: str, value: object, allowed: Iterable[str]) -> TalosError:
    """Build the standard "unknown X" error.

    >>> str(unknown("model", "vit-z", ["tiny-clip", "minilm-l6"]))
    "unknown model 'vit-z'; choose one of: minilm-l6, tiny-clip"
    """
    return TalosError(f"unknown {kind} {value!r}; choose one of: {', '.join(sorted(allowed))}")


# --------------------------------------------------------------------------------------------
# typed checks: integers and finite numbers, never booleans
# --------------------------------------------------------------------------------------------
def is_int(value: object, *, numpy: bool = False) -> bool:
    """``value`` is an integer and not a boolean; numpy integers count only with ``numpy`` (where the value
    is used, not stored: a numpy integer is no JSON number).

    >>> is_int(3), is_int(True), is_int(3.0)
    (True, False, False)
    """
    if isinstance(value, bool):
        return False
    return isinstance(value, numbers.Integral) if numpy else isinstance(value, int)


def is_number(value: object, *, numpy: bool = False) -> bool:
    """``value`` is a finite real number (an integer or a float) and not a boolean; numpy scalars of every
    width count only with ``numpy`` (a ``numpy.float64`` is a float, so it always does).

    >>> is_number(0.5), is_number(2), is_number(False), is_number(float("nan")), is_number("1")
    (True, True, False, False, False)
    """
    if isinstance(value, bool):
        return False
    if not isinstance(value, numbers.Real if numpy else (int, float)):
        return False
    try:
        return math.isfinite(value)
    except (TypeError, OverflowError):
        return False


def is_strict_instance(value: object, kinds: tuple[type, ...]) -> bool:
    """``isinstance(value, kinds)``, except that a boolean is only an instance where ``bool`` is listed
    (Python counts ``True`` as an ``int``; a JSON ``true`` is no count).

    >>> is_strict_instance(True, (int,)), is_strict_instance(True, (bool,)), is_strict_instance(1, (int, float))
    (False, True, True)
    """
    return isinstance(value, kinds) and (bool in kinds or not isinstance(value, bool))


def _bound_text(low: float | None, high: float | None, low_open: bool, high_open: bool) -> str:
    def fmt(x: float) -> str:
        return str(x) if isinstance(x, int) else f"{x:g}"

    if low is not None and high is not None:
        return f"in {'(' if low_open else '['}{fmt(low)}, {fmt(high)}{')' if high_open else ']'}"
    if low is not None:
        return f"{'>' if low_open else '≥'} {fmt(low)}"
    if high is not None:
        return f"{'<' if high_open else '≤'} {fmt(high)}"
    return ""


def _in_bounds(value: float, low: float | None, high: float | None, low_open: bool, high_open: bool) -> bool:
    if low is not None and not (value > low if low_open else value >= low):
        return False
    return high is None or (value < high if high_open else value <= high)


def check_int(name: str, value: object, *, low: int | None = None, high: int | None = None,
              optional: bool = False, numpy: bool = False, what: str | None = None) -> int | None:
    """``value`` as an ``int``: an integer (not a boolean) in ``[low, high]`` (a bound left ``None`` is open),
    or ``None`` when ``optional``. Otherwise one :class:`TalosError`: "``name`` must be ``what``, got …", where
    ``what`` defaults to a phrase of the bounds ("a positive integer", "an integer in [0, 7]", …).

    >>> check_int("steps", 5, low=1)
    5
    >>> check_int("steps", True, low=1)
    Traceback (most recent call last):
    ...
    talos_core.errors.TalosError: steps must be a positive integer, got True
    >>> check_int("k", 9, low=0, high=8)
    Traceback (most recent call last):
    ...
    talos_core.errors.TalosError: k must be an integer in [0, 8], got 9
    """
    if value is None and optional:
        return None
    if is_int(value, numpy=numpy) and _in_bounds(value, low, high, False, False):
        return int(value)
    if what is None:
        if high is None and low in (0, 1):
            what = "a positive integer" if low == 1 else "a non-negative integer"
        else:
            what = " ".join(filter(None, ("an integer", _bound_text(low, high, False, False))))
    raise TalosError(f"{name} must be {what}, got {value!r}")


def check_number(name: str, value: object, *, low: float | None = None, high: float | None = None,
                 low_open: bool = False, high_open: bool = False, optional: bool = False, numpy: bool = False,
                 what: str | None = None) -> float | None:
    """``value`` as a ``float``: a finite number (not a boolean) within the bounds (each closed unless
    ``low_open`` / ``high_open``; a bound left ``None`` is open), or ``None`` when ``optional``. Otherwise one
    :class:`TalosError`: "``name`` must be ``what``, got …", ``what`` defaulting to a phrase of the bounds.

    >>> check_number("lr", 1e-3, low=0, high=1, low_open=True)
    0.001
    >>> check_number("lr", 0, low=0, high=1, low_open=True)
    Traceback (most recent call last):
    ...
    talos_core.errors.TalosError: lr must be a number in (0, 1], got 0
    >>> check_number("alpha", float("inf"))
    Traceback (most recent call last):
    ...
    talos_core.errors.TalosError: alpha must be a finite number, got inf
    """
    if value is None and optional:
        return None
    if is_number(value, numpy=numpy) and _in_bounds(value, low, high, low_open, high_open):
        return float(value)
    if what is None:
        if high is None and low == 0:
            what = "a positive number" if low_open else "a finite number ≥ 0"
        else:
            bounds = _bound_text(low, high, low_open, high_open)
            what = f"a number {bounds}" if low is not None and high is not None else \
                " ".join(filter(None, ("a finite number", bounds)))
    raise TalosError(f"{name} must be {what}, got {value!r}")


#: the largest seed: seeds feed numpy and torch generators, which take 64-bit integers
MAX_SEED = 2**63 - 1


def check_seed(value: object, name: str = "seed") -> int:
    """``value`` must be an integer in [0, :data:`MAX_SEED`] (numpy's generators refuse negative seeds).

    >>> check_seed(-1)
    Traceback (most recent call last):
    ...
    talos_core.errors.TalosError: seed must be an integer in [0, 2**63 - 1], got -1
    """
    check_int(name, value, low=0, high=MAX_SEED, what="an integer in [0, 2**63 - 1]")
    return value


def check_range(name: str, value: float, low: float, high: float, *, high_open: bool = True,
                low_open: bool = False) -> float:
    """Validate ``low <= value < high`` (bounds open/closed as asked) and return ``value`` as given.

    >>> check_range("sparsity", 0.9, 0.0, 1.0)
    0.9
    >>> check_range("sparsity", 1.0, 0.0, 1.0)
    Traceback (most recent call last):
    ...
    talos_core.errors.TalosError: sparsity must be in [0, 1), got 1.0
    """
    check_number(name, value, low=low, high=high, low_open=low_open, high_open=high_open,
                 what=f"in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}")
    return value


# --------------------------------------------------------------------------------------------
# settings typed into environment variables
# --------------------------------------------------------------------------------------------
FLAG_WORDS = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False}
"""What an on/off setting may say (any case); unset or blank means off."""


def check_flag(name: str, text: str | None) -> bool:
    """The on/off setting ``text`` of environment variable ``name``: one of :data:`FLAG_WORDS`, or unset/blank
    (off). Anything else is one :class:`TalosError`: a typo must not silently mean off (``READ_ONLY=y`` starting a
    server that writes).

    >>> check_flag("X", " Yes "), check_flag("X", None), check_flag("X", "off")
    (True, False, False)
    >>> check_flag("X", "maybe")
    Traceback (most recent call last):
    ...
    talos_core.errors.TalosError: X must be 1, true, yes or on (or 0, false, no, off, unset), got 'maybe'
    """
    word = (text or "").strip().lower()
    if not word:
        return False
    if word not in FLAG_WORDS:
        raise TalosError(f"{name} must be 1, true, yes or on (or 0, false, no, off, unset), got {text!r}")
    return FLAG_WORDS[word]


def check_env_int(name: str, text: str | None, *, low: int, what: str) -> int | None:
    """The whole number ``text`` of environment variable ``name`` (surrounding spaces ignored), at least ``low``;
    ``None`` when unset or blank. Anything else is one :class:`TalosError`: "``name`` must be ``what``, got …".

    >>> check_env_int("N", " 3 ", low=1, what="a positive integer"), check_env_int("N", "", low=1, what="")
    (3, None)
    """
    stripped = str(text or "").strip()
    if not stripped:
        return None
    try:
        value = int(stripped)
    except ValueError:
        value = None
    if value is None or value < low:
        raise TalosError(f"{name} must be {what}, got {stripped!r}")
    return value
