"""The dashboard as a server for a room: it listens on 127.0.0.1 unless told otherwise, serves only
stores under its configured roots (``?store=`` elsewhere is refused, nothing created, existence not revealed),
writes only into the user's store, has a read-only mode and job caps, and shows store-supplied text as plain
text (a crafted store cannot make the viewer's browser fetch an image); a preview's arrays stay inside the store.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from dashboard_fixtures import MODEL, REPO, SUITE
from google.protobuf.json_format import MessageToDict
from streamlit.testing.v1 import AppTest

from bench.page_state import CEILING_S, wait_drawn
from bench.server import free_port, wait_healthy
from dashboard import jobs as J
from dashboard.access import ServerConfig, StoreRefused
from talos_core.errors import TalosError

APP = str(REPO / "dashboard" / "app.py")
PAGES = ["learn", "arithmetic", "disentanglement", "localization", "masks", "efficiency"]
SERVER_ENV = ("TALOS_DASHBOARD_ROOTS", "TALOS_DASHBOARD_READ_ONLY", "TALOS_DASHBOARD_MAX_JOBS",
              "TALOS_DASHBOARD_MAX_STEPS", "TALOS_DASHBOARD_MAX_EXAMPLES")


def open_app(monkeypatch, store, page: str | None = None, query: dict | None = None, env: dict | None = None):
    monkeypatch.setenv("TALOS_STORE", str(store))
    for var in SERVER_ENV:
        monkeypatch.delenv(var, raising=False)
    for k, v in (env or {}).items():
        monkeypatch.setenv(k, str(v))
    at = AppTest.from_file(APP, default_timeout=120)
    for k, v in (query or {}).items():
        at.query_params[k] = v
    if page and page != "learn":
        at.switch_page(f"app_pages/{page}.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _tree_listing(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


# --------------------------------------------------------------------------------------------
# stores only under configured roots
# --------------------------------------------------------------------------------------------
def test_store_outside_the_roots_is_refused_without_revealing_or_creating(monkeypatch, fixture_store, tmp_path):
    existing = tmp_path / "elsewhere"
    existing.mkdir()
    missing = tmp_path / "nowhere"
    messages = []
    for target in (existing, missing, Path("/")):
        at = open_app(monkeypatch, fixture_store, "arithmetic", {"store": str(target)})
        errors = [e.value for e in at.error]
        assert len(errors) == 1, errors
        assert "not one this dashboard serves" in errors[0]
        assert not at.get("plotly_chart")
        messages.append(errors[0].replace(str(target), "PATH"))
    assert messages[0] == messages[1] == messages[2], "the message must not depend on whether the path exists"
    assert _tree_listing(existing) == [] and not missing.exists(), "nothing is created outside the roots"


def test_the_run_page_does_not_create_folders_for_a_refused_store(monkeypatch, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    user = tmp_path / "mine"
    at = open_app(monkeypatch, user, "run", {"store": str(other)})
    assert _tree_listing(other) == [] and not user.exists()
    assert any("Results are written into your store" in c.value for c in at.caption)


def test_picker_lists_shipped_user_and_configured_stores(monkeypatch, fixture_store, tmp_path):
    root = tmp_path / "workshop"
    shutil.copytree(fixture_store, root / "group-a")
    (root / "notes").mkdir(parents=True)  # not a store: not listed
    at = open_app(monkeypatch, tmp_path / "mine", "arithmetic", {"store": str(root / "group-a")},
                  env={"TALOS_DASHBOARD_ROOTS": str(root)})
    picker = at.sidebar.selectbox[0]
    assert picker.options[0].startswith("Shipped results"), picker.options
    assert any(o.startswith("Your store") for o in picker.options)
    assert any(o.startswith("group-a · under") for o in picker.options)
    assert not any("notes" in o for o in picker.options)
    assert not at.error and at.get("plotly_chart"), "a store under a configured root opens"
    assert any("a store under the configured root" in c.value for c in at.sidebar.caption)
    # a different spelling of an allowed store is accepted and canonicalised in the URL
    at = open_app(monkeypatch, tmp_path / "mine", "learn", {"store": str(root / "group-a" / ".." / "group-a")},
                  env={"TALOS_DASHBOARD_ROOTS": str(root)})
    assert not at.error and at.query_params["store"] == str(root / "group-a")


def test_server_config_rules(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shipped = REPO / "cached_results"
    cfg = ServerConfig.from_env({"TALOS_STORE": str(shipped)})
    assert cfg.default == shipped and cfg.user_store == tmp_path / "runs", "never the shipped store for writing"
    assert cfg.writable_store() == tmp_path / "runs"
    assert [c.kind for c in cfg.stores()] == ["shipped", "user"]
    assert ServerConfig.from_env({}).default_choice().kind == "shipped"
    with pytest.raises(TalosError, match="read-only"):
        ServerConfig.from_env({"TALOS_DASHBOARD_READ_ONLY": "1"}).writable_store()
    with pytest.raises(StoreRefused):
        cfg.resolve("/etc")
    link = tmp_path / "root" / "escape"
    link.parent.mkdir()
    (tmp_path / "outside" / "results").mkdir(parents=True)
    link.symlink_to(tmp_path / "outside")
    cfg = ServerConfig.from_env({"TALOS_DASHBOARD_ROOTS": str(tmp_path / "root")})
    assert not any(c.path == link for c in cfg.stores()), "a symlink out of a root is not a store under it"
    with pytest.raises(TalosError, match="TALOS_DASHBOARD_MAX_STEPS"):
        ServerConfig.from_env({"TALOS_DASHBOARD_MAX_STEPS": "many"})


# --------------------------------------------------------------------------------------------
# read-only mode, the Run page's store and caps
# --------------------------------------------------------------------------------------------
def test_read_only_mode_has_no_run_page_and_writes_nothing(monkeypatch, fixture_store, tmp_path):
    store = shutil.copytree(fixture_store, tmp_path / "store")
    before = _tree_listing(store)
    at = open_app(monkeypatch, store, "learn", env={"TALOS_DASHBOARD_READ_ONLY": "1"})
    assert any("Read-only mode" in c.value for c in at.sidebar.caption)
    assert not any("Run page" in c.value for c in at.sidebar.caption)
    assert not at.error
    at = open_app(monkeypatch, store, "run", env={"TALOS_DASHBOARD_READ_ONLY": "1"})  # a deep link to /run
    assert not any(t.value.startswith("Run") for t in at.title), "no Run page in read-only mode"
    assert not at.button or not any(b.label == "Launch in background" for b in at.button)
    assert _tree_listing(store) == before


def test_run_page_refuses_jobs_over_the_caps(monkeypatch, tmp_path):
    at = open_app(monkeypatch, tmp_path / "mine", "run", env={"TALOS_DASHBOARD_MAX_STEPS": "50"})
    assert any("≤ 50 steps" in c.value for c in at.caption)
    at.number_input(key="run_steps").set_value(60).run()
    errors = [e.value for e in at.error]
    assert errors == ["steps 60 is above the cap of this dashboard server (50); lower it or ask whoever runs the "
                      "server to raise it"], errors
    assert at.button(key="run_launch").disabled
    at.number_input(key="run_steps").set_value(50).run()
    at.number_input(key="run_max_train").set_value(20001).run()
    assert any("max train examples 20001 is above the cap" in e.value for e in at.error)
    assert not (tmp_path / "mine").exists(), "nothing written"


def test_run_page_refuses_a_job_beyond_the_concurrent_cap(monkeypatch, tmp_path):
    store = tmp_path / "mine"
    spec = J.JobSpec(model="tiny-clip", tasks=("digits",), steps=5, max_train=8, max_val=8, max_test=8,
                     protocols=("single",))
    for _ in range(2):  # two queued jobs (no runner yet): the default cap of 2 is full
        J.create_job(store, J.build_commands(spec, store), {})
    at = open_app(monkeypatch, store, "run")
    assert any("already queued or running" in e.value and "at most 2 at once" in e.value for e in at.error)
    assert at.button(key="run_launch").disabled
    with pytest.raises(TalosError, match="at most 2 at once"):
        J.start_job(spec, store, limits=J.JobLimits())
    with pytest.raises(TalosError, match="steps 5 is above"):
        J.start_job(spec, store, limits=J.JobLimits(max_steps=4))
    assert len(J.list_jobs(store)) == 2, "a refused launch writes no job"


# --------------------------------------------------------------------------------------------
# a crafted store: plain text everywhere, arrays inside the store
# --------------------------------------------------------------------------------------------
EVIL_TASK = "![x](http://leak.invalid/x.png)"
EVIL_METHOD = "![m](leak.invalid.png)"  # a file name cannot hold "/"; a relative URL still makes the browser fetch


def crafted_store(fixture_store: Path, dest: Path) -> Path:
    """The synthetic store with a task renamed to markdown image syntax in every result, suite-record fields
    likewise, and an addition/negation result of a method with such a name."""
    store = shutil.copytree(fixture_store, dest)
    for path in (store / "results").rglob("*.json"):
        path.write_text(path.read_text().replace('"fashion-mnist"', json.dumps(EVIL_TASK)))
    suite = store / "results" / "suite" / f"{SUITE}.json"
    rec = json.loads(suite.read_text())
    rec.update(control_task=EVIL_TASK, device=EVIL_TASK, scale=EVIL_TASK, eval_precision=EVIL_TASK)
    suite.write_text(json.dumps(rec))
    for kind in ("addition", "negation"):
        src = store / "results" / kind / f"{SUITE}__{MODEL}__talos.json"
        shutil.copy(src, src.with_name(f"{SUITE}__{MODEL}__{EVIL_METHOD}.json"))
    return store


UNESCAPED_LINK = re.compile(r"(?<!\\)\[[^\]]*(?<!\\)\]\(")  # [text]( or ![alt]( with no backslash before [ or ]
MARKDOWN_FIELDS = {"body", "label", "help", "text", "placeholder"}


def _markdown_texts(at: AppTest) -> list[str]:
    """Every string Streamlit renders as Markdown: element bodies (markdown, captions, alerts, headings),
    widget/expander/tab labels, help tooltips, progress texts."""
    out: list[str] = []

    def collect(obj, key=None):
        if isinstance(obj, dict):
            for k, v in obj.items():
                collect(v, k)
        elif isinstance(obj, list):
            for v in obj:
                collect(v, key)
        elif isinstance(obj, str) and key in MARKDOWN_FIELDS:
            out.append(obj)

    def walk(node):
        proto = getattr(node, "proto", None)
        if proto is not None:
            collect(MessageToDict(proto))
        for child in getattr(node, "children", {}).values():
            walk(child)

    walk(at._tree)
    return out


@pytest.mark.parametrize("page,query", [(p, {}) for p in PAGES] + [("arithmetic", {"method": EVIL_METHOD})])
def test_crafted_store_strings_render_as_plain_text(monkeypatch, fixture_store, tmp_path, page, query):
    store = crafted_store(fixture_store, tmp_path / "crafted")
    at = open_app(monkeypatch, store, page, {"same": "false", **query})
    texts = _markdown_texts(at)
    if page == "arithmetic":  # and the negation tab's texts (the tab is built once opened)
        from test_dashboard import open_negation_tab

        texts += _markdown_texts(open_negation_tab(at))
    leaks = [t for t in texts if UNESCAPED_LINK.search(t) or "<img" in t.lower()]
    assert not leaks, leaks
    if page in ("learn", "arithmetic"):  # the crafted names did reach Markdown, escaped
        assert any(r"!\[" in t for t in texts), texts


def test_preview_arrays_must_stay_inside_the_store(monkeypatch, fixture_store, tmp_path):
    from talos_core.result_arrays import load_preview
    from talos_core.schema import CorruptResult

    store = shutil.copytree(fixture_store, tmp_path / "store")
    name = f"{SUITE}__{MODEL}__talos"
    meta_path = store / "results" / "preview" / f"{name}.json"
    outside = tmp_path / "outside.safetensors"
    shutil.copy(meta_path.with_suffix(".safetensors"), outside)
    meta = json.loads(meta_path.read_text())
    for arrays in (str(outside), "../../../outside.safetensors"):  # an absolute path, a relative escape
        meta_path.write_text(json.dumps({**meta, "arrays": arrays}))
        with pytest.raises(CorruptResult, match="not a file in its folder"):
            load_preview(store, name)
    (meta_path.parent / "link.safetensors").symlink_to(outside)  # a symlink inside the folder, leading out
    meta_path.write_text(json.dumps({**meta, "arrays": "link.safetensors"}))
    with pytest.raises(CorruptResult, match="leads outside the store"):
        load_preview(store, name)
    at = open_app(monkeypatch, store, "arithmetic", {"method": "talos"})
    assert [e.value for e in at.error if "leads outside the store" in e.value], [e.value for e in at.error]
    assert at.get("plotly_chart"), "the exact results are still shown"


# --------------------------------------------------------------------------------------------
# the listening address
# --------------------------------------------------------------------------------------------
def _listening(port: int) -> set[str]:
    """Local addresses with a socket in LISTEN state on ``port`` (from /proc/net/tcp and tcp6)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            local, state = line.split()[1], line.split()[3]
            addr, port_hex = local.split(":")
            if state == "0A" and int(port_hex, 16) == port:
                raw = bytes.fromhex(addr)
                if len(raw) == 4:
                    found.add(socket.inet_ntop(socket.AF_INET, raw[::-1]))
                else:
                    words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
                    found.add(socket.inet_ntop(socket.AF_INET6, words))
    return found


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux /proc/net/tcp")
def test_talos_dashboard_listens_on_loopback_by_default(fixture_store, tmp_path):
    port = free_port()
    log = open(tmp_path / "server.log", "w")  # noqa: SIM115 - the server writes to it while it runs
    proc = subprocess.Popen([sys.executable, "-m", "talos_core.cli", "dashboard", "--port", str(port),
                             "--store", str(fixture_store)], cwd=str(tmp_path), stdout=log, stderr=subprocess.STDOUT,
                            env=dict(os.environ, PYTHONPATH=str(REPO)), start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not _listening(port) and proc.poll() is None:
            time.sleep(0.2)
        assert _listening(port) == {"127.0.0.1"}, (tmp_path / "server.log").read_text()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)
        log.close()


class _FakeServer:
    def __init__(self, cmd, env):
        _FakeServer.last = (cmd, env)

    def wait(self, timeout=None):
        return 0


def test_host_flag_exposes_with_a_warning_and_passes_the_policy(monkeypatch, capsys, fixture_store, tmp_path):
    from talos_core import cli
    from talos_core.cli import dashboard as cli_dashboard

    monkeypatch.setattr(cli_dashboard.subprocess, "Popen", _FakeServer)
    assert cli.main(["dashboard", "--store", str(fixture_store), "--port", "8600"]) == 0
    cmd, env = _FakeServer.last
    assert cmd[cmd.index("--server.address") + 1] == "127.0.0.1"
    assert "warning" not in capsys.readouterr().err
    assert cli.main(["dashboard", "--store", str(fixture_store), "--host", "0.0.0.0", "--read-only",
                     "--store-root", str(tmp_path), "--max-jobs", "1", "--max-steps", "300",
                     "--max-examples", "0"]) == 0
    cmd, env = _FakeServer.last
    assert cmd[cmd.index("--server.address") + 1] == "0.0.0.0"
    err = capsys.readouterr().err
    assert "warning: the dashboard listens on 0.0.0.0:8501" in err and "no authentication" in err
    assert env["TALOS_DASHBOARD_READ_ONLY"] == "1" and env["TALOS_DASHBOARD_ROOTS"].startswith(str(tmp_path))
    assert (env["TALOS_DASHBOARD_MAX_JOBS"], env["TALOS_DASHBOARD_MAX_STEPS"],
            env["TALOS_DASHBOARD_MAX_EXAMPLES"]) == ("1", "300", "0")
    assert cli.main(["dashboard", "--store-root", str(tmp_path / "missing")]) == 2
    assert "is not a folder" in capsys.readouterr().err


@pytest.mark.browser
@pytest.mark.slow
def test_crafted_store_in_a_real_browser_fetches_nothing_and_links_nothing(fixture_store, tmp_path):
    """Chromium on every page of the crafted store: no request for the leak URL, no <img> or <a> made from
    store text (Streamlit's Markdown would otherwise render the task name as an image and bare URLs as links)."""
    chromium = os.environ.get("TALOS_CHROMIUM", "/usr/bin/chromium")
    playwright = pytest.importorskip("playwright.sync_api")
    if not Path(chromium).exists():
        pytest.skip(f"no Chromium at {chromium}")
    store = crafted_store(fixture_store, tmp_path / "crafted")
    port = free_port()
    log = open(tmp_path / "server.log", "w")  # noqa: SIM115 - the server writes to it while it runs
    proc = subprocess.Popen([sys.executable, "-m", "talos_core.cli", "dashboard", "--port", str(port),
                             "--store", str(store)], cwd=str(tmp_path), stdout=log, stderr=subprocess.STDOUT,
                            env=dict(os.environ, PYTHONPATH=str(REPO)), start_new_session=True)
    leak_js = ("() => [...document.querySelectorAll('img[src], a[href]')].map(e => e.src || e.href)"
               ".filter(u => u.includes('leak.invalid') && !u.includes('method='))")
    try:
        wait_healthy(port, proc)
        with playwright.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            page = browser.new_page()
            page.set_default_timeout(CEILING_S * 1000)
            page.set_default_navigation_timeout(CEILING_S * 1000)
            fetched = []
            page.on("request", lambda r: fetched.append(r.url) if "leak.invalid" in r.url.split("?")[0] else None)
            for path in ["", "arithmetic?same=false", "arithmetic?method=%21%5Bm%5D%28leak.invalid.png%29",
                         "disentanglement", "localization", "masks", "efficiency"]:
                page.goto(f"http://127.0.0.1:{port}/{path}")
                wait_drawn(page)  # the run is over and everything it shows is drawn: any request it makes is made
                assert page.evaluate(leak_js) == [], path
            browser.close()
        assert fetched == []
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)
        log.close()
