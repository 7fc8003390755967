"""Streamlit side of the Arithmetic page's in-browser preview: the ``st.components.v2`` component that
holds the α slider(s) and the *First-order model* preview chart, recomputed in the browser on every slider ``input`` —
in the addition tab (:func:`addition_sliders`) and the negation tab (:func:`negation_sliders`).

The data it gets and the numerics are in :mod:`dashboard.live_preview` (pure, tested without Streamlit); the
JavaScript is ``dashboard/live_preview.js`` (inline, no build step, nothing fetched). Under ``AppTest``
(components are not rendered there), without a preview cache, for a one-point α grid, or for a preview larger than
:data:`dashboard.live_preview.MAX_PAYLOAD_BYTES` the page keeps its Streamlit sliders and the server-drawn chart
(:func:`live_enabled` / :func:`negation_payload` say which).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import streamlit as st
from streamlit.errors import StreamlitAPIException

from dashboard import data, live_preview, ui
from talos_core.result_arrays import PreviewCache

_JS = (Path(__file__).with_name("live_preview.js")).read_text(encoding="utf-8")
_CSS = """
.talos-live { font-family: "Source Sans", "Source Sans Pro", sans-serif; color: #31333F; }
.talos-live-sliders { display: grid; grid-template-columns: 1fr; gap: 0.25rem 1.25rem; margin-bottom: 0.5rem; }
.talos-live-sliders.talos-live-grid { grid-template-columns: repeat(auto-fill, minmax(12rem, 1fr)); }
.talos-live-slider label { display: flex; justify-content: space-between; font-size: 14px; line-height: 1.6; }
.talos-live-value { color: var(--st-primary-color, #ff4b4b); font-variant-numeric: tabular-nums; }
.talos-live-slider input[type=range] { -webkit-appearance: none; appearance: none; width: 100%; height: 24px;
  margin: 0.1rem 0 0.4rem 0; cursor: pointer; outline: none; background-color: transparent;
  background-image: linear-gradient(to right, var(--st-primary-color, #ff4b4b) var(--pct, 0%), #d5dae5 var(--pct, 0%));
  background-size: 100% 4px; background-position: center; background-repeat: no-repeat; }
.talos-live-slider input[type=range]::-webkit-slider-thumb { -webkit-appearance: none; appearance: none;
  width: 18px; height: 18px; border-radius: 50%; background: var(--st-primary-color, #ff4b4b);
  border: 2px solid #ffffff; box-shadow: 0 0 0 1px rgba(0, 0, 0, 0.15); }
.talos-live-slider input[type=range]::-moz-range-thumb { width: 18px; height: 18px; border-radius: 50%;
  background: var(--st-primary-color, #ff4b4b); border: 2px solid #ffffff; }
.talos-live-slider input[type=range]:focus-visible::-webkit-slider-thumb {
  box-shadow: 0 0 0 0.2rem rgba(255, 75, 75, 0.5); }
.talos-live-chart { width: 100%; min-height: 380px; overflow: hidden; }
.talos-live-chart[data-state=loading] { color: #808495; font-size: 14px; padding-top: 2rem; }
.talos-live-chart svg { display: block; }
"""

_component = st.components.v2.component("talos_live_preview", js=_JS, css=_CSS, isolate_styles=False)

_SENT = "_talos_live_sent"  # payload keys this session's browser received
LIVE_VALUES = "_talos_live_values."  # + component key: the slider values it last reported
_PAYLOADS: dict[tuple, tuple[PreviewCache, dict]] = {}  # built payloads, per loaded preview cache (a few)


def _noop() -> None:
    pass


def in_app_test() -> bool:
    """Running under ``streamlit.testing.v1.AppTest`` (components are not rendered there)."""
    from streamlit import config

    try:  # st.get_option reads a cached copy; AppTest patches the config itself
        return bool(config.get_option("global.appTest"))
    except Exception:  # an unknown option in another Streamlit version: not a test
        return False


def _payload(preview: PreviewCache, tasks: Sequence[str], zero_shot: Sequence[float], single_task: Sequence[float],
             method: str) -> dict:
    """:func:`dashboard.live_preview.preview_payload`, built once per loaded cache and arguments."""
    def _key(v: float) -> float | None:
        return None if v is None or not math.isfinite(float(v)) else float(v)

    key = (id(preview), tuple(tasks), tuple(_key(v) for v in zero_shot), tuple(_key(v) for v in single_task), method)
    hit = _PAYLOADS.get(key)
    if hit is not None and hit[0] is preview:
        return hit[1]
    payload = live_preview.preview_payload(preview, tasks, zero_shot=zero_shot, single_task=single_task, method=method)
    if len(_PAYLOADS) >= 16:
        _PAYLOADS.pop(next(iter(_PAYLOADS)))
    _PAYLOADS[key] = (preview, payload)
    return payload


def addition_payload(add: data.Addition, preview: PreviewCache, *, single=None, method: str,
                     split: str = "test") -> tuple[dict, list[str]] | None:
    """The addition tab's payload and its bars' tasks, or ``None`` when the live preview is off for it (see the
    module docstring)."""
    lo, hi = float(min(add.alpha_grid)), float(max(add.alpha_grid))
    if in_app_test() or preview is None or hi - lo < 1e-12:
        return None
    tasks = [t for t in add.tasks if t in preview.eval_tasks]
    zs, st_acc = data.single_reference(single, method, add.tasks, split)
    payload = _payload(preview, tasks, [zs[add.tasks.index(t)] for t in tasks],
                       [st_acc[add.tasks.index(t)] for t in tasks], method)
    if live_preview.payload_bytes(payload) > live_preview.MAX_PAYLOAD_BYTES:
        return None
    return payload, tasks


def live_enabled(add: data.Addition, preview: PreviewCache | None, *, single=None, method: str) -> bool:
    """Whether the addition tab uses the in-browser preview."""
    return preview is not None and addition_payload(add, preview, single=single, method=method) is not None


def _mount(specs: list[live_preview.SliderSpec], payload: dict, tasks: list[str], ckey: str, chart: str,
           **extra) -> dict[str, float]:
    """Mount the component with ``specs`` and return slider id → value (state, else URL, else default), keeping
    the URL equal to them."""
    mirror = LIVE_VALUES + ckey
    query = st.query_params.to_dict()
    values = live_preview.resolve_values(specs, st.session_state.get(mirror), query)
    sent: set = st.session_state.setdefault(_SENT, set())
    include = payload["key"] not in sent
    res = _component(key=ckey, data=live_preview.render_data(specs, values, payload, include_payload=include,
                                                             tasks=tasks, chart=chart, **extra),
                     on_values_change=_noop, on_need_change=_noop)
    sent.add(payload["key"])
    if res.get("need") == payload["key"] and not include:  # the browser lost the arrays: send them again
        sent.discard(payload["key"])
        try:
            st.rerun(scope="fragment")
        except StreamlitAPIException:  # not in a fragment rerun
            st.rerun()
    state = res.get("values")
    last = state if isinstance(state, Mapping) else st.session_state.get(mirror)
    values = live_preview.resolve_values(specs, last, query)
    st.session_state[mirror] = values
    put, drop = live_preview.query_updates(specs, values, query)
    for k in drop:
        del st.query_params[k]
    for k, v in put.items():
        st.query_params[k] = v
    return values


def negation_payload(neg: data.Negation, preview: PreviewCache | None, *,
                     method: str) -> tuple[dict, list[str], str | None] | None:
    """The negation tab's payload, its targets with a preview and the control task (``None`` when the preview has
    no control points), or ``None`` when the live preview is off for it."""
    if in_app_test() or preview is None or not neg.targets:
        return None
    if any(np.unique(neg.grid(t)).size < 2 for t in neg.targets):  # a one-point grid: nothing to slide
        return None
    targets = [t for t in neg.targets if t in preview.tasks and t in preview.eval_tasks]
    if not targets:
        return None
    control = neg.control_task if neg.control_task in preview.eval_tasks else None
    evals = targets + ([control] if control is not None and control not in targets else [])
    payload = _payload(preview, evals, [float("nan")] * len(evals), [float("nan")] * len(evals), method)
    if live_preview.payload_bytes(payload) > live_preview.MAX_PAYLOAD_BYTES:
        return None
    return payload, targets, control


def _view_key(view: str, specs: Sequence[live_preview.SliderSpec]) -> str:
    """A short key of the results shown (``view``: store, suite, model, method) and the sliders' spans: another view
    or α range mounts a fresh component, never one holding the previous results' sliders and values."""
    import hashlib

    sig = view + "|" + "|".join(f"{s.id}:{s.lo:g}:{s.hi:g}:{s.step:g}" for s in specs)
    return hashlib.sha1(sig.encode()).hexdigest()[:10]


def negation_sliders(neg: data.Negation, got: tuple[dict, list[str], str | None], *, method: str, view: str,
                     ranges: Mapping[str, tuple[float, float, float]], split: str = "test") -> dict[str, float]:
    """Mount the negation tab's component (one slider per target + the live preview chart, each target negated
    on its own) and return target → α; ``got`` is :func:`negation_payload`'s (not ``None``); ``ranges``: each
    target's ``(lo, hi, step)`` (:mod:`dashboard.alpha_range`)."""
    payload, targets, control = got
    specs = live_preview.negation_sliders(neg.targets, {t: neg.grid(t) for t in neg.targets}, neg.selected,
                                          key=ui.qkey("n", method), ranges=ranges)
    czs = neg.control_zero_shot.get(split)
    from dashboard.figures import turn_labels

    values = _mount(specs, payload, targets, f"live.neg.{ui.qkey(method)}.{_view_key(view, specs)}",
                    "negation_preview", control=control, control_label=neg.control_task,
                    control_zero_shot=float(czs) if czs is not None and math.isfinite(float(czs)) else None,
                    turn=turn_labels(targets))
    return live_preview.alphas_of(specs, values)


def addition_sliders(add: data.Addition, got: tuple[dict, list[str]], *, method: str, same: bool, view: str,
                     lo: float, hi: float, step: float) -> dict[str, float]:
    """Mount the component (sliders over ``[lo, hi]`` by ``step`` + live preview chart) and return task → α as the
    sliders stand; ``got`` is :func:`addition_payload`'s (not ``None``); ``view`` names the results shown.

    The values come from the component's state (what the browser reported on the last release), else the URL
    (``?a.<method>=α``, ``?a.<method>.<task>=α``), else the selected α; the URL is kept equal to them."""
    payload, tasks = got
    specs = live_preview.addition_sliders(add.tasks, lo, hi, step, add.selected_alpha, same=same,
                                          key=ui.qkey("a", method))
    from dashboard.figures import turn_labels

    ckey = f"live.add.{ui.qkey(method)}.{'same' if same else 'each'}.{_view_key(view, specs)}"
    return live_preview.alphas_of(specs, _mount(specs, payload, tasks, ckey, "addition_preview",
                                                turn=turn_labels(tasks)))
