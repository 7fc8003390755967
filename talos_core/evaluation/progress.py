"""Partial results of a long evaluation step, so that a step cut off mid-way goes on where it stopped.

A non-linear 20×20 ξ grid of MiniLM over 2 × 512 texts takes hours on a laptop CPU, and the sparsity ablation
evaluates addition and negation at several sparsities in one step; a session that ends, a node that is pre-empted
or a Ctrl-C would otherwise throw all of it away. :class:`Progress` keeps the finished parts (a grid row, one
sparsity's summaries) in one JSON file (:meth:`talos_core.store.Store.progress_path`), valid only for the ``key``
it was written with: everything the numbers depend on (runs, grids, points, seeds, evaluation precision, batch
size, device). Evaluation is deterministic, so a stored part is the number a re-computation would give. The step
clears the file once its result is written; a damaged file counts as empty.

>>> import tempfile, pathlib
>>> p = Progress(pathlib.Path(tempfile.mkdtemp()) / "x.json", {"runs": ["a", "b"]})
>>> p.put("row 0", [0.5, 0.25]); p.get("row 0"), p.get("row 1")
([0.5, 0.25], None)
>>> Progress(p.path, {"runs": ["a", "c"]}).get("row 0") is None  # other runs: not theirs
True
>>> p.clear(); p.path.exists()
False
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from talos_core.atomic import atomic_write_json, read_json
from talos_core.errors import TalosError


def evaluation_key(ctx: Any) -> dict[str, Any]:
    """The part of a :class:`Progress` key that every evaluation step shares: what the context's numbers depend on
    besides the step's own inputs (resolved evaluation precision, batch size, device)."""
    from talos_core.inference.precision import model_precision

    return {"eval_precision": model_precision(ctx.model), "batch_size": ctx.batch_size, "device": str(ctx.model.device)}


@dataclass(frozen=True)
class Progress:
    """The finished parts of one evaluation step, stored in ``path`` under ``key``."""

    path: Path
    key: dict[str, Any]

    def done(self) -> dict[str, Any]:
        """``{part: value}`` saved for this key; ``{}`` without a file, for another key or for a damaged file."""
        if not self.path.exists():
            return {}
        try:
            saved = read_json(self.path)
        except TalosError:
            return {}
        if not isinstance(saved, dict) or saved.get("key") != self.key or not isinstance(saved.get("parts"), dict):
            return {}
        return dict(saved["parts"])

    def get(self, part: str) -> Any:
        return self.done().get(part)

    def put(self, part: str, value: Any) -> None:
        """Save ``value`` as finished ``part`` (atomically, beside the parts already saved for this key)."""
        parts = self.done()
        parts[part] = value
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(self.path, {"key": self.key, "parts": parts})

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)
