"""User-facing errors.

Every problem caused by the user's input (an unknown model name, an impossible sparsity, an empty
dataset, a corrupt store file) is raised as :class:`TalosError` with one sentence that names the bad
value and says what is allowed. The CLI and the dashboard print that sentence instead of a traceback.
"""

from __future__ import annotations

from collections.abc import Iterable


class TalosError(ValueError):
    """An error in user input or user-provided files, with a message meant for people."""


def unknown(kind: str, value: object, allowed: Iterable[str]) -> TalosError:
    """Build the standard "unknown X" error.

    >>> str(unknown("model", "vit-z", ["tiny-clip", "minilm-l6"]))
    "unknown model 'vit-z'; choose one of: minilm-l6, tiny-clip"
    """
    return TalosError(f"unknown {kind} {value!r}; choose one of: {', '.join(sorted(allowed))}")


#: the largest seed: seeds feed numpy and torch generators, which take 64-bit integers
MAX_SEED = 2**63 - 1


def check_seed(value: object, name: str = "seed") -> int:
    """``value`` must be an integer in [0, :data:`MAX_SEED`] (numpy's generators refuse negative seeds).

    >>> check_seed(-1)
    Traceback (most recent call last):
    ...
    talos_core.errors.TalosError: seed must be an integer in [0, 2**63 - 1], got -1
    """
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_SEED:
        raise TalosError(f"{name} must be an integer in [0, 2**63 - 1], got {value!r}")
    return value


def check_range(name: str, value: float, low: float, high: float, *, high_open: bool = True,
                low_open: bool = False) -> float:
    """Validate ``low <= value < high`` (bounds open/closed as asked) and return ``value``.

    >>> check_range("sparsity", 0.9, 0.0, 1.0)
    0.9
    >>> check_range("sparsity", 1.0, 0.0, 1.0)
    Traceback (most recent call last):
    ...
    talos_core.errors.TalosError: sparsity must be in [0, 1), got 1.0
    """
    import math

    lo_br = "(" if low_open else "["
    hi_br = ")" if high_open else "]"
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if ok:
        ok = (value > low if low_open else value >= low) and (value < high if high_open else value <= high)
    if not ok:
        raise TalosError(f"{name} must be in {lo_br}{low:g}, {high:g}{hi_br}, got {value!r}")
    return value
