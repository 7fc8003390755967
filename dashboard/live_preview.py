"""The Arithmetic page's in-browser first-order (linearized) preview: pure functions, no
Streamlit.

A slider move on the Arithmetic page must redraw the *First-order model* chart without a server round trip. The
preview is a weighted sum of cached arrays (SCHEMA.md ``preview``; :func:`talos_core.result_arrays.preview_logits`), so
the browser can compute it itself: the page sends these arrays once per session (:func:`preview_payload`), and the
component (``dashboard/live_preview.js``, mounted by :mod:`dashboard.live_component`) recomputes the accuracies
in JavaScript on every ``input`` event of its sliders and redraws the chart in the same frame. On release it
reports the α's to Python, which redraws the exact bars, the α curve, the metrics and the gallery.

The payload (JSON, :data:`PAYLOAD_VERSION`)::

    {"version": 1, "key": "<content hash>", "vectors": [τ tasks, the α order],
     "eval": [{"task", "n", "c", "dtype": "float32"|"float64",
               "base": b64 [n, c], "jvp": b64 [len(vectors), n, c], "labels": b64 int32 [n]}, ...],
     "zero_shot": [...], "single_task": [...]  (null where unknown), "method", "color"}

Arrays are little-endian raw bytes, base64-encoded; float16 caches are widened to float32 (exactly). The browser
sums ``base + (((α_1 jvp_1) + α_2 jvp_2) + …)`` with every step rounded to the dtype (``Math.fround``) and α in
float32, exactly as :func:`~talos_core.result_arrays.preview_logits`, so both count the same correct predictions.
:func:`payload_accuracy` is that computation in numpy on the decoded payload (for tests and the browser test).

Only what the accuracies need is sent (logits at θ0, JVPs and labels of the tasks shown; no inputs), and only once
per session: :class:`SliderSpec` / :func:`render_data` carry a payload ``key`` on every rerun and the payload only
when the browser does not have it yet (the component asks again, by key, if it lost it).
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from dashboard.figures import method_color
from talos_core.errors import TalosError
from talos_core.result_arrays import PreviewCache, preview_accuracy

PAYLOAD_VERSION = 1
#: above this many bytes of encoded arrays the page keeps the server-side preview (one slider release would
#: otherwise send a whole large cache to the browser once per session)
MAX_PAYLOAD_BYTES = 32 * 2**20


def encode_array(arr: np.ndarray, dtype: str) -> str:
    """``arr`` as little-endian ``dtype`` bytes, base64 (C order)."""
    return base64.b64encode(np.ascontiguousarray(arr, dtype=np.dtype(dtype).newbyteorder("<")).tobytes()).decode()


def decode_array(text: str, dtype: str, shape: Sequence[int]) -> np.ndarray:
    """Inverse of :func:`encode_array`."""
    arr = np.frombuffer(base64.b64decode(text), dtype=np.dtype(dtype).newbyteorder("<"))
    return arr.astype(np.dtype(dtype)).reshape(tuple(int(s) for s in shape))


def _float_dtype(*arrays: np.ndarray) -> str:
    """float64 if any array is float64, else float32 (float16 and float32 widen to float32 exactly)."""
    return "float64" if any(np.asarray(a).dtype == np.float64 for a in arrays) else "float32"


def _nullable(values: Sequence[float] | None, n: int) -> list[float | None]:
    if values is None:
        return [None] * n
    out = [None if v is None or not math.isfinite(float(v)) else float(v) for v in values]
    if len(out) != n:
        raise TalosError(f"got {len(out)} reference accuracies for {n} tasks")
    return out


def preview_payload(preview: PreviewCache, eval_tasks: Sequence[str], *, zero_shot: Sequence[float] | None = None,
                    single_task: Sequence[float] | None = None, method: str | None = None) -> dict:
    """What the browser needs to recompute :func:`~talos_core.result_arrays.preview_accuracy` on ``eval_tasks`` for any
    α mix, plus the chart's reference markers (``zero_shot`` / ``single_task`` per eval task, NaN = unknown)."""
    unknown = [e for e in eval_tasks if e not in preview.eval_tasks]
    if unknown:
        raise TalosError(f"the preview has no evaluation task {unknown[0]!r}; it has {', '.join(preview.eval_tasks)}")
    vectors = list(preview.tasks)
    entries = []
    for e in eval_tasks:
        base = np.asarray(preview.base[e])
        jvps = [np.asarray(preview.jvp[(e, t)]) for t in vectors]
        dtype = _float_dtype(base, *jvps)
        n, c = (int(s) for s in base.shape)
        jvp = np.stack(jvps) if jvps else np.zeros((0, n, c))
        labels = np.asarray(preview.labels[e])
        if labels.size and (labels.min() < -(2**31) or labels.max() >= 2**31):
            raise TalosError(f"the preview labels of {e!r} do not fit in int32")
        entries.append({"task": e, "n": n, "c": c, "dtype": dtype, "base": encode_array(base, dtype),
                        "jvp": encode_array(jvp, dtype), "labels": encode_array(labels, "int32")})
    payload = {"version": PAYLOAD_VERSION, "vectors": vectors, "eval": entries,
               "zero_shot": _nullable(zero_shot, len(eval_tasks)),
               "single_task": _nullable(single_task, len(eval_tasks)),
               "method": method or "", "color": method_color(method) if method else method_color("talos")}
    payload["key"] = payload_key(payload)
    return payload


def payload_key(payload: Mapping) -> str:
    """A content hash of the payload (without its own ``key``): the browser's cache key."""
    body = json.dumps({k: v for k, v in payload.items() if k != "key"}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(body.encode()).hexdigest()[:20]


def payload_bytes(payload: Mapping) -> int:
    """Size of the payload as the page sends it (compact JSON, UTF-8)."""
    return len(json.dumps(payload, separators=(",", ":")).encode())


def payload_cache(payload: Mapping) -> PreviewCache:
    """The decoded payload as a :class:`~talos_core.result_arrays.PreviewCache` (the eval tasks it carries)."""
    vectors = list(payload["vectors"])
    labels, base, jvp = {}, {}, {}
    for e in payload["eval"]:
        n, c, dt = e["n"], e["c"], e["dtype"]
        labels[e["task"]] = decode_array(e["labels"], "int32", [n])
        base[e["task"]] = decode_array(e["base"], dt, [n, c])
        stack = decode_array(e["jvp"], dt, [len(vectors), n, c])
        for i, t in enumerate(vectors):
            jvp[(e["task"], t)] = stack[i]
    return PreviewCache(vectors, [e["task"] for e in payload["eval"]], labels, base, jvp)


def payload_accuracy(payload: Mapping, alphas: Mapping[str, float]) -> dict[str, float]:
    """The accuracies the browser computes from ``payload`` for ``alphas`` (vector task → α; others 0)."""
    cache = payload_cache(payload)
    return preview_accuracy(cache, {t: float(a) for t, a in alphas.items() if t in cache.tasks})


# --------------------------------------------------------------------------------------------
# sliders
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SliderSpec:
    """One α slider of the component: ``id`` is its URL query key (``?<id>=α``), ``tasks`` the vectors it sets."""

    id: str
    label: str
    tasks: tuple[str, ...]
    lo: float
    hi: float
    step: float
    default: float

    def snap(self, value: float) -> float:
        """``value`` clamped to ``[lo, hi]`` and moved to the nearest point of the slider's step grid (what an HTML
        range input does to a value it is given), rounded to 12 significant digits as the browser writes it."""
        v = min(max(float(value), self.lo), self.hi)
        if self.step <= 0:
            return _tidy(v)
        k_max = math.floor((self.hi - self.lo) / self.step + 1e-9)
        k = min(max(round((v - self.lo) / self.step), 0), k_max)
        return _tidy(self.lo + k * self.step)

    def parse(self, text: object) -> float | None:
        """A URL / state value for this slider, snapped; ``None`` when it is not a finite number."""
        if isinstance(text, list | tuple):
            text = text[-1] if text else None
        try:
            v = float(text)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return None
        return self.snap(v) if math.isfinite(v) else None


def _tidy(x: float) -> float:
    return float(f"{x:.12g}")


def addition_sliders(tasks: Sequence[str], lo: float, hi: float, step: float, default: float, *, same: bool,
                     key: str, label_all: str = "α (all tasks)") -> list[SliderSpec]:
    """The sliders of the addition tab: one for every task (``same``; URL key ``key``) or one per task (URL keys
    ``key.<task slug>``, like the page's Streamlit sliders)."""
    from talos_core.schema import slug

    lo, hi, step = _tidy(lo), _tidy(hi), _tidy(step)
    proto = SliderSpec(key, label_all, tuple(tasks), lo, hi, step, 0.0)
    default = proto.snap(default)
    if same:
        return [SliderSpec(key, label_all, tuple(tasks), lo, hi, step, default)]
    return [SliderSpec(f"{key}.{slug(t)}", f"α {t}", (t,), lo, hi, step, default) for t in tasks]


def negation_sliders(targets: Sequence[str], grids: Mapping[str, Sequence[float]], selected: Mapping[str, float], *,
                     key: str, ranges: Mapping[str, tuple[float, float, float]] | None = None) -> list[SliderSpec]:
    """The sliders of the negation tab: one per target over ``ranges[target]`` = ``(lo, hi, step)`` (default: its
    whole α grid by a fifth of the grid step; URL key ``key.<target slug>``, like the page's Streamlit sliders),
    starting at the selected α."""
    from talos_core.schema import slug

    out = []
    for t in targets:
        g = np.unique(np.asarray(grids[t], dtype=float))
        lo, hi, step = (ranges or {}).get(t) or (g.min(), g.max(), float(np.min(np.diff(g))) / 5 if g.size > 1
                                                 else 1.0)
        proto = SliderSpec(f"{key}.{slug(t)}", f"α negate {t}", (t,), _tidy(lo), _tidy(hi), _tidy(step), 0.0)
        out.append(SliderSpec(**{**asdict(proto), "tasks": proto.tasks,
                                 "default": proto.snap(selected.get(t, float(g.min())))}))
    return out


def resolve_values(specs: Sequence[SliderSpec], state: Mapping | None, query: Mapping[str, object]) -> dict[str, float]:
    """The current value of every slider: the component's reported state, else the URL, else the default."""
    out = {}
    for s in specs:
        v = s.parse(state.get(s.id)) if isinstance(state, Mapping) and s.id in state else None
        if v is None and s.id in query:
            v = s.parse(query[s.id])
        out[s.id] = s.default if v is None else v
    return out


def alphas_of(specs: Sequence[SliderSpec], values: Mapping[str, float]) -> dict[str, float]:
    """Task → α from slider values."""
    return {t: float(values[s.id]) for s in specs for t in s.tasks}


def query_updates(specs: Sequence[SliderSpec], values: Mapping[str, float],
                  query: Mapping[str, object]) -> tuple[dict[str, str], list[str]]:
    """``(to set, to delete)`` so the URL holds every slider that is off its default (``bind="query-params"``'s
    rule: a value at its default leaves the URL)."""
    put, drop = {}, []
    for s in specs:
        v = values[s.id]
        if abs(v - s.default) <= 1e-12:
            if s.id in query:
                drop.append(s.id)
        else:
            text = f"{v:.12g}"
            cur = query.get(s.id)
            if isinstance(cur, list | tuple):
                cur = cur[-1] if cur else None
            if cur != text:
                put[s.id] = text
    return put, drop


def render_data(specs: Sequence[SliderSpec], values: Mapping[str, float], payload: Mapping, *, include_payload: bool,
                chart: str = "addition_preview", tasks: Sequence[str] | None = None, **extra) -> dict:
    """The component's ``data`` for one rerun: sliders with their current values, the payload key, and the payload
    itself only when ``include_payload`` (the browser does not have it yet). ``tasks``: the chart's bars (default:
    the payload's eval tasks, in order). ``chart``: ``addition_preview`` (θ0 + Σ α_t τ_t) or ``negation_preview``
    (each target on its own, θ0 − α_t τ_t, with ``control`` (an eval task or ``None``), ``control_label`` and
    ``control_zero_shot`` in ``extra``)."""
    if chart not in ("addition_preview", "negation_preview"):
        raise TalosError(f"unknown live chart {chart!r}; choose addition_preview or negation_preview")
    return {"chart": chart, "key": payload["key"],
            "sliders": [dict(asdict(s), tasks=list(s.tasks), value=float(values[s.id])) for s in specs],
            "tasks": list(tasks) if tasks is not None else [e["task"] for e in payload["eval"]],
            "payload": dict(payload) if include_payload else None, **extra}


def preview_title(tasks: Sequence[str], alphas: Mapping[str, float], accuracy: Mapping[str, float]) -> str:
    """The chart title :func:`dashboard.views.addition_preview` writes (the browser writes the same string)."""
    pm = float(np.mean([accuracy[t] for t in tasks])) if tasks else float("nan")
    label = ", ".join(f"{alphas.get(t, 0.0):.2g}" for t in tasks)
    return f"First-order model, α = ({label}) — mean {pm:.3f}"
