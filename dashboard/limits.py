"""Whole-number server limits read from environment variables (the Run page's job caps, the upload caps)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from talos_core.errors import check_env_int


def ints_from_env(fields: Sequence[tuple[str, str]], *, minimum: int, rule: str,
                  env: Mapping[str, str] | None = None) -> dict[str, int]:
    """``{field: value}`` for each ``(field, VARIABLE)`` set (non-blank) in ``env`` (default ``os.environ``).

    A value that is not an integer, or is below ``minimum``, is one sentence: ``VARIABLE must be <rule>, got '…'``.

    >>> ints_from_env([("n", "N")], minimum=1, rule="a positive integer", env={"N": " 3 "})
    {'n': 3}
    >>> ints_from_env([("n", "N")], minimum=1, rule="a positive integer", env={})
    {}
    """
    env = os.environ if env is None else env
    out = {}
    for name, var in fields:
        value = check_env_int(var, env.get(var), low=minimum, what=rule)
        if value is not None:
            out[name] = value
    return out
