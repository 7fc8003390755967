"""A Streamlit session without a browser: a websocket client speaking Streamlit's own protocol (1.67).

What the frontend does, and so what this client does:

* connect to ``ws://HOST:PORT/_stcore/stream`` with the subprotocol ``streamlit`` (the frontend passes
  ``["streamlit", <xsrf token>, <session id to resume>]``; the token only matters for auth cookies and there is no
  session to resume, so ``["streamlit"]``; no Origin header: the server allows that, as for same-origin pages);
* send a ``BackMsg.rerun_script`` whose ``ClientState`` names the page (``page_name``: the URL path, e.g.
  ``arithmetic``), the URL query and the widget states;
* read ``ForwardMsg`` protobufs: ``new_session``, ``navigation`` (page hashes), ``page_info_changed`` (the URL
  query the script wrote, for widgets bound to it), ``delta`` (elements; ``delta.fragment_id`` says which
  fragment drew them), ``script_finished`` (``FINISHED_SUCCESSFULLY`` for a page run,
  ``FINISHED_FRAGMENT_RUN_SUCCESSFULLY`` for a fragment run);
* a widget change inside a fragment: ``rerun_script`` with ``ClientState.fragment_id`` = that fragment and the
  widget's new state (a float slider's value is ``double_array_value.data = [v]``);
* a ``st.components.v2`` component (``Element.bidi_component``: ``id``, ``component_name``, its ``data`` as JSON
  in ``json`` or ``mixed.json``) holds its state as one JSON object: the frontend's ``setStateValue(key, v)``
  sends ``WidgetState(id=<element id>, json_value=JSON.stringify({...state, [key]: v}))`` with the fragment id of
  the delta that drew the element (``BidiComponent.*.js`` in Streamlit 1.67's static bundle).

Only :func:`alpha_control` and :class:`AlphaControl` know what the Arithmetic page's α control is: the in-browser
preview component (``dashboard/live_component.py``: its ``data.sliders`` = ``[{id, label, lo, hi, step, value,
...}]``, state ``{"values": {slider id: α}}``, set on release; the server then redraws the *Exact* chart and writes
``?<slider id>=α`` to the URL; the preview chart is drawn in the browser) or, under AppTest / without a preview
cache, a ``st.slider`` whose move redraws the server-side *First-order model* chart.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import parse_qs

from streamlit.proto.Alert_pb2 import Alert
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ClientState_pb2 import ClientState
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState

from dashboard.views import EXACT as EXACT_MODEL
from dashboard.views import FIRST_ORDER

PAGE_DONE = ForwardMsg.FINISHED_SUCCESSFULLY
FRAGMENT_DONE = ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY
# the chart titles come from the page code, so a renamed chart cannot silently leave the client finding nothing
PREVIEW = FIRST_ORDER  # the server-drawn preview chart (st.slider path)
EXACT = f"{EXACT_MODEL} ("  # the exact chart the server redraws after a component move
COMPONENT = "talos_live_preview"


class ProtocolError(RuntimeError):
    """The server answered something a browser would show as an error (or did not answer in time)."""


@dataclass
class AlphaControl:
    """The Arithmetic page's first α control: widget id, range, grid step, current value, its fragment; ``kind``
    ``slider`` (a ``st.slider``) or ``component`` (a slider ``slider_id`` of the in-browser preview component, whose
    other sliders stand at ``others``); ``chart``: title prefix of the server-drawn chart a move redraws."""

    widget_id: str
    lo: float
    hi: float
    step: float
    value: float
    fragment_id: str
    kind: str = "slider"
    slider_id: str = ""
    others: dict[str, float] = field(default_factory=dict)
    chart: str = PREVIEW
    default: float | None = None  # the component slider's default (the URL drops the key at it)

    def next_value(self, direction: int) -> tuple[float, int]:
        """One grid step in ``direction`` (+1/−1), bouncing at the ends; the new value and direction."""
        if self.value + direction * self.step > self.hi + 1e-9 or self.value + direction * self.step < self.lo - 1e-9:
            direction = -direction
        k = round((self.value - self.lo) / self.step) + direction if self.step > 0 else 0
        return float(f"{self.lo + k * self.step:.12g}"), direction

    def state(self, value: float) -> WidgetState:
        """The widget state the frontend sends when the slider is released at ``value``."""
        ws = WidgetState(id=self.widget_id)
        if self.kind == "component":  # setStateValue('values', {...}): the whole state object as a JSON string
            ws.json_value = json.dumps({"values": {**self.others, self.slider_id: value}})
        else:
            ws.double_array_value.data.append(value)
        return ws

    def in_url(self, query_string: str) -> bool:
        """Whether the URL the server wrote holds this control's current value (component: ``?<slider id>=α``, or
        no key at the default; a ``st.slider``: not checked)."""
        if self.kind != "component":
            return True
        got = parse_qs(query_string).get(self.slider_id)
        if got is None:
            return self.default is not None and abs(self.value - self.default) <= 1e-9
        return abs(float(got[-1]) - self.value) <= 1e-9


def _component_data(el) -> dict:
    b = el.bidi_component
    text = b.json or b.mixed.json
    try:
        data = json.loads(text) if text else {}
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def alpha_control(elements: Iterable[tuple[str, object]]) -> AlphaControl | None:
    """The first α control among a run's elements (``(fragment_id, Element)`` pairs, in order): the first slider
    labelled α… of the in-browser preview component, or the first ``st.slider`` labelled α…; None if neither."""
    for fragment_id, el in elements:
        kind = el.WhichOneof("type")
        if kind == "slider" and el.slider.label.startswith("α"):
            s = el.slider
            value = list(s.value) or list(s.default)
            return AlphaControl(s.id, float(s.min), float(s.max), float(s.step), float(value[0]), fragment_id)
        if kind == "bidi_component" and el.bidi_component.component_name.endswith(COMPONENT):
            sliders = [s for s in _component_data(el).get("sliders") or () if isinstance(s, dict)]
            for s in sliders:
                if str(s.get("label", "")).startswith("α"):
                    others = {o["id"]: float(o["value"]) for o in sliders if o is not s}
                    return AlphaControl(el.bidi_component.id, float(s["lo"]), float(s["hi"]), float(s["step"]),
                                        float(s["value"]), fragment_id, "component", s["id"], others, EXACT,
                                        float(s["default"]) if s.get("default") is not None else None)
    return None


@dataclass
class RunResult:
    """What one script (or fragment) run sent back."""

    status: int | None = None
    elements: list[tuple[str, object]] = field(default_factory=list)  # (fragment_id, Element)
    errors: list[str] = field(default_factory=list)  # exception elements, st.error alerts, page not found
    charts: list[tuple[str, float]] = field(default_factory=list)  # Plotly (title, time.monotonic() of its delta)

    def chart(self, prefix: str) -> tuple[str, float] | tuple[None, None]:
        """The first Plotly chart whose title starts with ``prefix``: (title, arrival time), else (None, None)."""
        return next(((t, at) for t, at in self.charts if t.startswith(prefix)), (None, None))


def _plotly_title(el) -> str:
    try:
        spec = json.loads(el.plotly_chart.spec)
    except (ValueError, TypeError):
        return ""
    title = ((spec.get("layout") or {}).get("title") or {})
    return title.get("text", "") if isinstance(title, dict) else str(title)


class StreamlitSession:
    """One websocket session (``async with StreamlitSession(url, page) as s``)."""

    def __init__(self, base_url: str, page: str, *, timeout: float = 60.0):
        self.ws_url = base_url.replace("http://", "ws://").rstrip("/") + "/_stcore/stream"
        self.page = page.strip("/")
        self.timeout = timeout
        self.query_string = ""
        self.page_script_hash = ""
        self._ws = None

    async def __aenter__(self) -> StreamlitSession:
        from websockets.asyncio.client import connect

        self._ws = await asyncio.wait_for(connect(self.ws_url, subprotocols=["streamlit"], max_size=None,
                                                  open_timeout=self.timeout, ping_interval=None),
                                          timeout=self.timeout)
        return self

    async def __aexit__(self, *exc) -> None:
        if self._ws is not None:
            await self._ws.close()

    async def _send(self, client_state: ClientState) -> None:
        msg = BackMsg()
        msg.rerun_script.CopyFrom(client_state)
        await self._ws.send(msg.SerializeToString())

    def _client_state(self, widgets: Iterable[WidgetState] = (), fragment_id: str = "") -> ClientState:
        cs = ClientState(query_string=self.query_string, page_script_hash=self.page_script_hash,
                         page_name="" if self.page_script_hash else self.page, fragment_id=fragment_id)
        cs.widget_states.widgets.extend(widgets)
        return cs

    async def run_page(self) -> RunResult:
        """Open the page (what a browser does on load): one full script run."""
        await self._send(self._client_state())
        return await self._collect(PAGE_DONE)

    async def move(self, control: AlphaControl, value: float) -> RunResult:
        """Set the α control to ``value`` and rerun its fragment, as the frontend does on a slider release."""
        await self._send(self._client_state([control.state(value)], control.fragment_id))
        result = await self._collect(FRAGMENT_DONE if control.fragment_id else PAGE_DONE)
        control.value = value
        return result

    async def finish_run(self, control: AlphaControl, value: float) -> RunResult:
        """After a move timed out: read on until that run's ``script_finished`` (its value is then current)."""
        result = await self._collect(FRAGMENT_DONE if control.fragment_id else PAGE_DONE)
        control.value = value
        return result

    async def _collect(self, done: int) -> RunResult:
        """ForwardMsgs until the run's ``script_finished``; errors for what a browser would show as one."""
        out = RunResult()
        deadline = time.monotonic() + self.timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ProtocolError(f"no script_finished within {self.timeout:g} s")
            try:
                raw = await asyncio.wait_for(self._ws.recv(), timeout=left)
            except asyncio.TimeoutError as exc:
                raise ProtocolError(f"no script_finished within {self.timeout:g} s") from exc
            msg = ForwardMsg()
            msg.ParseFromString(raw)
            kind = msg.WhichOneof("type")
            if kind == "new_session" and msg.new_session.page_script_hash:
                self.page_script_hash = msg.new_session.page_script_hash
            elif kind == "navigation" and msg.navigation.page_script_hash:
                self.page_script_hash = msg.navigation.page_script_hash
            elif kind == "page_info_changed":
                self.query_string = msg.page_info_changed.query_string
            elif kind == "page_not_found":
                out.errors.append(f"page not found: {msg.page_not_found.page_name}")
            elif kind == "delta" and msg.delta.WhichOneof("type") == "new_element":
                el = msg.delta.new_element
                et = el.WhichOneof("type")
                out.elements.append((msg.delta.fragment_id, el))
                if et == "exception":
                    out.errors.append(f"exception: {el.exception.type}: {el.exception.message[:200]}")
                elif et == "alert" and el.alert.format == Alert.ERROR:
                    out.errors.append(f"st.error: {el.alert.body[:200]}")
                elif et == "plotly_chart":
                    out.charts.append((_plotly_title(el), time.monotonic()))
            elif kind == "script_finished":
                out.status = msg.script_finished
                if msg.script_finished == ForwardMsg.FINISHED_WITH_COMPILE_ERROR:
                    raise ProtocolError("the script did not compile")
                if msg.script_finished == done:
                    return out
