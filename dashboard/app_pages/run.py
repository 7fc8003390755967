"""Run: fine-tune + evaluate in the background (the `talos` CLI in a detached process); results land in the
user's own store (``$TALOS_STORE``, else ``./runs``; never the shipped ``cached_results/``) and appear on the
other pages when that store is picked in the sidebar. Progress bar and live log per job. The server's caps
(:class:`dashboard.jobs.JobLimits`) bound job size and concurrent jobs; read-only mode has no Run page. An
uploaded checkpoint file is imported as a run of method ``imported`` (:func:`dashboard.uploads.import_upload`)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import jobs, suite_jobs, ui, uploads
from dashboard.access import ServerConfig
from talos_core.errors import TalosError
from talos_core.schema import method_label

try:
    cfg = ServerConfig.from_env()
except TalosError as exc:  # a bad cap
    ui.stop_on_problem(exc)
if cfg.read_only:  # the page is not in the navigation then; a link to it says why nothing runs here
    st.title("Classroom mode: nothing runs on this server")
    st.info("Classroom mode: this dashboard shows the results it holds and computes nothing, so there is no Run "
            "page here. Explore them on the other pages (the sidebar); to fine-tune and evaluate your own runs, "
            "start the dashboard on your own machine (`talos dashboard`), where the Run page writes into your "
            "own store.")
    st.stop()
st.title("Run: compute new results")
try:
    root = cfg.writable_store()
except TalosError as exc:  # the user's store is the shipped one
    ui.stop_on_problem(exc)
limits = cfg.limits
caps = [f"{limits.max_jobs} concurrent job{'s' if limits.max_jobs != 1 else ''}" if limits.max_jobs else "",
        f"≤ {limits.max_steps:,} steps" if limits.max_steps else "",
        f"≤ {limits.max_examples:,} examples per split" if limits.max_examples else ""]
caps = [c for c in caps if c]
st.caption(f"Results are written into your store **{ui.md(root)}** (never into the shipped results); pick it in "
           "the sidebar to see them. Each launch is a separate background job with its own log"
           + (f". This server's caps: {', '.join(caps)}." if caps else "."))


@st.cache_resource(show_spinner="Loading the model and task registries…")
def registries() -> tuple[pd.DataFrame, pd.DataFrame, list[str], bool]:
    """(models, tasks, fine-tuning methods, CUDA available) — imported once per server process."""
    import torch

    from talos_core.models import model_table
    from talos_core.runners import FINETUNE_METHODS
    from talos_core.tasks import task_table

    return model_table(), task_table(), sorted(FINETUNE_METHODS), bool(torch.cuda.is_available())


def own_task_spec(name: str):
    """The resolved spec of an uploaded task (read once per process while its files are unchanged)."""
    from talos_core.tasks import get_task
    from talos_core.tasks.files import release_data

    spec = get_task(name)
    release_data(spec)  # the page needs the class names only; the job's own process reads the examples
    return spec


models, tasks_df, methods, gpu = registries()
cpu_models = models[models["cpu"]]["name"].tolist()  # the registry's models that fit a CPU-only machine


def _named(kind: str) -> str:
    names = models[models["cpu"] & (models["weights"] == kind)]["name"]
    return ", ".join(f"`{n}`" for n in names)


if gpu:
    st.success("A CUDA GPU is available: paper-scale models are feasible (they download weights/datasets "
               "unless cached).")
else:
    st.info(f"**CPU only.** Feasible here: the offline models {_named('random')} (random init, seconds per run) "
            f"and {_named('pretrained')} (real weights, minutes: keep steps ≤ 100 and max-train ≤ 512) on offline "
            "tasks. The paper's CLIP ViT / T5 models need a GPU and internet downloads. Disentanglement is the "
            "slowest protocol (grid² evaluations); keep its grid small.")

offline_models = models[models["offline"]]["name"].tolist()
model_opts = ([m for m in offline_models if m in cpu_models] + [m for m in offline_models if m not in cpu_models]
              + [m for m in models["name"] if m not in offline_models])
desc = dict(zip(models["name"], models["description"]))
c1, c2 = st.columns(2)
model = c1.selectbox("Model", model_opts, index=model_opts.index("tiny-clip") if "tiny-clip" in model_opts else 0,
                     format_func=lambda m: m if m in offline_models else f"{m} (needs download)", key="run_model",
                     help="Offline models work without internet.")
typed = c1.text_input("… or type a model", "", key="run_model_typed",
                      placeholder="hf-encoder:<id> or clip:<arch>:<tag>",
                      help="Any sentence encoder of the Hugging Face hub (hf-encoder:sentence-transformers/"
                           "all-mpnet-base-v2, or a local folder) or open_clip checkpoint (clip:ViT-B-16:"
                           "laion2b_s34b_b88k); overrides the list.").strip()
family = str(models.set_index("name").loc[model, "family"])
if typed:
    from talos_core.models import get_model_spec

    try:
        refused = cfg.model_problem(typed)
        if refused:
            raise TalosError(refused)
        typed_spec = get_model_spec(typed)
    except TalosError as exc:
        ui.show_problem(exc)
        model, typed = None, ""  # nothing is launched with a refused spec
    else:
        model, family = typed, typed_spec.family
        desc[model] = typed_spec.description
        if typed not in offline_models:  # a registered offline model typed by name downloads nothing
            c1.warning("Typed models download their weights from the internet on first use (Hugging Face hub / "
                       "open_clip); without internet, or offline mode, the job fails with “could not be loaded”.")
if model is None:
    st.stop()
c1.caption(desc.get(model, ""))
modality = "image" if family in ("clip", "cnn") else "text"
tt = tasks_df[tasks_df["modality"] == modality]
offline_tasks = tt[tt["source"] == "offline"]["name"].tolist()
task_opts = offline_tasks + tt[tt["source"] != "offline"]["name"].tolist()
is_control = dict(zip(tt["name"], tt["control"].astype(bool)))
default_tasks = [t for t in offline_tasks if not is_control[t]]
if not any(is_control[t] for t in offline_tasks) and len(default_tasks) > 1:
    default_tasks = default_tasks[:-1]  # keep one offline task back as the negation control
default_tasks = default_tasks[:3]
chosen = c2.multiselect("Tasks", task_opts, default=default_tasks, key=f"run_tasks_{modality}",
                        format_func=lambda t: t if t in offline_tasks else f"{t} (needs download)",
                        help=f"{modality} tasks (offline ones first)")
with st.expander("Your own data: upload a CSV or a zip of an image folder", expanded=False):
    st.caption(f"A **CSV** (or TSV) with a text column and a label column makes a text task; a **.zip of an image "
               f"folder** with one sub-folder of images per class (and optionally train/ and test/ sub-folders) makes "
               f"an image task. Class names come from the data; without a test split 20% is held out. Uploads are "
               f"saved in your store under uploads/ (at most {cfg.uploads.max_upload_mb} MB per file, "
               f"{cfg.uploads.max_unpacked_mb} MB unpacked).")
    u1, u2, u3 = st.columns([2, 1, 1])
    upload = u1.file_uploader("CSV or zip", type=list(uploads.UPLOAD_TYPES), key="run_upload",
                              max_upload_size=cfg.uploads.max_upload_mb)
    text_col = u2.text_input("text column", "", key="run_upload_text", help="CSV only; empty: detected "
                             "(text, sentence, review, …, or the other of two columns)")
    label_col = u3.text_input("label column", "", key="run_upload_label", help="CSV only; empty: detected "
                              "(label, class, category, stars, …)")
    if upload is not None:
        try:
            own = uploads.save_upload(root, upload.name, upload.getvalue(), limits=cfg.uploads,
                                options={"text": text_col.strip(), "label": label_col.strip()})
            own_spec = own_task_spec(own)
        except TalosError as exc:
            ui.show_problem(exc)
        else:
            shown = ", ".join(own_spec.classes[:8]) + (", …" if len(own_spec.classes) > 8 else "")
            st.success(ui.md(f"{own_spec.modality} task {own}: {len(own_spec.classes)} classes ({shown}); "
                             f"{own_spec.description}."))
            if own_spec.modality != modality:
                st.warning(f"This is a {own_spec.modality} task but {model} takes {modality} inputs; pick a "
                           f"{own_spec.modality} model to use it.")
            elif own not in chosen:
                chosen = [*chosen, own]
with st.expander("Import a checkpoint fine-tuned elsewhere (method imported)", expanded=False):
    st.caption(f"A state dict of **{ui.md(model)}** fine-tuned outside the studio (a `.safetensors` file, or "
               f"`.pt`/`.pth`/`.bin`/`.ckpt` read with `torch.load(weights_only=True)`; transformers CLIP vision "
               f"names are mapped onto open_clip's) becomes a run of method **imported** whose task vector is "
               f"θ_ft − θ0; pick method *imported* below to evaluate it with the protocols. Every check (another "
               f"architecture, missing or unexpected keys, non-finite values, a copy of θ0) is one sentence and "
               f"nothing is kept. The file is saved in your store under uploads/ (at most "
               f"{cfg.uploads.max_upload_mb} MB); `talos import` also reads whole model folders.")
    i1, i2, i3 = st.columns([2, 1, 1])
    ckpt = i1.file_uploader("checkpoint", type=list(uploads.CHECKPOINT_TYPES), key="run_import_file",
                            max_upload_size=cfg.uploads.max_upload_mb)
    imp_tasks = list(dict.fromkeys([*chosen, *task_opts]))
    imp_task = i2.selectbox("fine-tuned on task", imp_tasks, key=f"run_import_task_{modality}")
    imp_label = i3.text_input("method label", "", key="run_import_label", placeholder="the file's name",
                              help="Recorded with the run; --option label=NAME picks it when several are imported")
    if st.button("Import checkpoint", disabled=ckpt is None, key="run_import"):
        try:
            with st.spinner("Reading the checkpoint and computing θ_ft − θ0…"):
                imported = uploads.import_upload(root, ckpt.name, ckpt.getvalue(), model=model, task=imp_task,
                                           label=imp_label.strip() or None, limits=cfg.uploads)
        except (TalosError, OSError) as exc:
            ui.show_problem(exc)
        else:
            info = imported.run.manifest.info
            st.success(ui.md(f"{'Already imported' if imported.reused else 'Imported'}: run {imported.run.id} "
                             f"(label {info.get('label')}, {info.get('layout')}). Evaluate it with method imported."))
            for note in imported.notes:
                st.caption(ui.md(note))
method = c1.selectbox("Method", methods, index=methods.index("talos") if "talos" in methods else 0, key="run_method",
                      format_func=method_label)
sparsity = c2.slider("Sparsity (fraction frozen, sparse methods)", 0.0, 0.99, 0.9, 0.01, key="run_sparsity")

with st.expander("Training and evaluation size", expanded=not gpu):
    d1, d2, d3, d4 = st.columns(4)
    def _capped(value: int, cap: int) -> int:
        return min(value, cap) if cap else value

    steps = d1.number_input("steps", 1, 100000, _capped(30 if not gpu else 2000, limits.max_steps), key="run_steps")
    max_train = d2.number_input("max train examples", 1, 10**7, _capped(256 if not gpu else 100000,
                                                                         limits.max_examples), key="run_max_train")
    max_val = d3.number_input("max val examples", 1, 10**7, _capped(128 if not gpu else 2048, limits.max_examples),
                              key="run_max_val")
    max_test = d4.number_input("max test examples", 1, 10**7, _capped(128 if not gpu else 10000,
                                                                       limits.max_examples), key="run_max_test")
    e1, e2, e3 = st.columns(3)
    suite = e1.text_input("suite name", "dashboard", key="run_suite",
                          help="Groups these results; existing results with the same suite/model/method are replaced.")
    protocols = e2.multiselect("protocols", list(jobs.PROTOCOL_ORDER), default=list(jobs.DEFAULT_PROTOCOLS),
                               key="run_protocols")
    controls = [t for t in offline_tasks if t not in chosen] + [t for t in task_opts
                                                                if t not in offline_tasks and t not in chosen]
    reg_control = [t for t in controls if t in offline_tasks and is_control[t]] or \
                  [t for t in controls if t in offline_tasks] or controls
    control = e3.selectbox("negation control task", controls or ["(none)"],
                           index=controls.index(reg_control[0]) if reg_control else 0, key=f"run_control_{modality}",
                           format_func=lambda t: t if t in offline_tasks or t == "(none)" else f"{t} (needs download)")
    if control == "(none)":
        control = None
    g1, g2, g3 = st.columns(3)
    grid = g1.number_input("disentanglement grid (paper 20)", 2, 40, 8 if not gpu else 20, key="run_grid")
    points = g2.number_input("disentanglement points/task (paper 2048)", 8, 4096, 128 if not gpu else 2048,
                             key="run_points")
    preview_points = g3.number_input("preview points/task", 8, 4096, 128 if not gpu else 512, key="run_ppoints")

spec = jobs.JobSpec(model=model, tasks=tuple(chosen), method=method, sparsity=float(sparsity), steps=int(steps),
                 max_train=int(max_train), max_val=int(max_val), max_test=int(max_test), suite=suite.strip(),
                 protocols=tuple(protocols), control_task=control, grid=int(grid), points=int(points),
                 preview_points=int(preview_points), device="auto")
try:
    cmds = jobs.build_commands(spec, root)
    over = limits.problem(spec) or limits.busy(jobs.active_jobs(root))
    problem = TalosError(over) if over else None
except TalosError as exc:
    cmds, problem = [], exc
if problem:
    ui.show_problem(problem)
else:
    with st.expander(f"{len(cmds)} commands will run"):
        st.code("\n".join(jobs.display_command(c) for c in cmds), language="bash")
if not gpu and model not in cpu_models:
    st.warning(f"{ui.md(model)} is too large for a CPU-only machine in a workshop; pick one of "
               f"{', '.join(cpu_models)}.")
if st.button("Launch in background", type="primary", disabled=problem is not None, key="run_launch"):
    try:
        job = jobs.start_job(spec, root, limits=limits)
        st.session_state["run_job"] = job.label
        st.success(f"Started job {job.id}; follow it below. Results appear on the other pages when it finishes.")
    except (TalosError, OSError) as exc:
        st.error(ui.md(f"could not start the job: {exc}"))

st.subheader("Run a whole suite")
with st.expander("A suite (every method and analysis of `talos suite`), here or on a Ray cluster"):
    from talos_core.suites import SUITES

    s1, s2, s3 = st.columns(3)
    suite_name = s1.selectbox("Suite", list(SUITES), index=list(SUITES).index("tiny") if "tiny" in SUITES else 0,
                              key="suite_name", help="docs/protocol.md")
    scales = list(SUITES[suite_name].scales)
    suite_scale = s2.selectbox("Scale", scales, index=scales.index("mini") if "mini" in scales else 0,
                               key="suite_scale")
    executor = s3.radio("Executor", ["local", "ray"], horizontal=True, key="suite_executor",
                        help="local: the steps one after another in the job; ray: every step and fine-tuning run as "
                             "a Ray task (docs/scale-out.md)")
    address = st.text_input("Ray address (HOST:PORT, or empty for a new Ray instance on this server)", "",
                            key="suite_address", disabled=executor != "ray",
                            help="What `ray start --head` printed; this store must be on a filesystem every Ray "
                                 "node sees at the same path")
    resume = st.checkbox("Resume an interrupted run of this suite", key="suite_resume")
    sspec = suite_jobs.SuiteJobSpec(suite_name, suite_scale, executor,
                            (address.strip() or None) if executor == "ray" else None, resume=resume)
    splan, confirmed = None, False
    try:
        scmd = suite_jobs.build_suite_command(sspec, root)
        sover = suite_jobs.suite_job_problem(sspec, limits) or limits.busy(jobs.active_jobs(root))
        sproblem = TalosError(sover) if sover else None
        splan = suite_jobs.suite_plan(sspec, root, gpu=gpu)
    except TalosError as exc:
        scmd, sproblem = [], exc
    if sproblem:
        ui.show_problem(sproblem)
    else:
        st.code(jobs.display_command(scmd), language="bash")
    if splan is not None:  # what `talos suite --plan` says it costs (training and evaluation, from measured cells)
        st.caption(ui.md(f"{splan.counts()['finetune_runs']} fine-tuning runs, {len(splan.steps)} steps. "
                         + " ".join(line.strip() for line in splan.cost_lines()[1:])))
        if not sproblem and suite_jobs.needs_confirmation(splan):
            confirmed = st.checkbox(f"I understand this suite takes up to {suite_jobs.plan_hours(splan):.2f} "
                                    "device-hours of training and evaluation here, plus what the estimate "
                                    "cannot include",
                                    key="suite_confirm")
    if st.button("Launch suite in background", disabled=sproblem is not None, key="suite_launch"):
        try:
            job = suite_jobs.start_suite_job(sspec, root, limits=limits, plan=splan, confirmed=confirmed)
            st.session_state["run_job"] = job.label
            st.success(f"Started job {job.id}; follow it below.")
        except (TalosError, OSError) as exc:
            st.error(ui.md(f"could not start the job: {exc}"))

st.subheader("Jobs in this store")


def finished(spec: dict) -> None:
    """Where a finished job's results are: the store, suite and model to pick, the pages that show them, and a
    link that opens them (Arithmetic, with the store, suite and model picked)."""
    suite, model = str(spec.get("suite") or ""), str(spec.get("model") or "")
    st.success(f"Finished: the results are in your store {ui.md(root)} under suite **{ui.md(suite)}**, model "
               f"**{ui.md(model)}**. Pick them in the sidebar (Store: your store) to see them on Arithmetic, "
               "Disentanglement, Localization, Masks and Efficiency, or open them with the link below.")
    st.page_link(ui.PAGES_DIR / "arithmetic.py", label=f"Open the results: {ui.md(suite)} · {ui.md(model)}",
                 icon=":material/calculate:", query_params={"store": str(root), "suite": suite, "model": model})


def _monitor() -> None:
    listed = jobs.list_jobs(root)
    if not listed:
        st.caption("No jobs yet.")
        return
    labels = [j.label for j in listed]
    if st.session_state.get("run_job") not in labels:
        st.session_state["run_job"] = labels[0]
    pick = st.selectbox("Job", labels, key="run_job")
    job = listed[labels.index(pick)]
    is_suite = job.spec.get("kind") == "suite"
    frac, label = (suite_jobs.suite_progress(jobs.tail_log(job.path, 20000), job.status) if is_suite
                   else jobs.current_progress(job))
    state = job.state
    st.progress(frac, text=ui.md(f"{state} · {label}"))
    cols = st.columns([1, 4])
    if state in ("queued", "running") and cols[0].button("Cancel", key="run_cancel"):
        jobs.cancel_job(job)
    if state == "done":
        with cols[1]:
            finished(job.spec)
    elif state in ("failed", "died"):
        cols[1].error(f"The job {state}; the log below says why.")
    if is_suite:  # per-step states from the suite record (both executors rewrite it on every change)
        from talos_core.schema import read_result

        try:
            steps = suite_jobs.steps_table(read_result(root, "suite", str(job.spec.get("suite"))))
        except (TalosError, OSError):
            steps = suite_jobs.steps_table(None)
        if not steps.empty:
            st.dataframe(steps, hide_index=True)
    st.code(jobs.tail_log(job.path, 6000) or "(log is empty)", language="text")


running = any(j.state in ("queued", "running") for j in jobs.list_jobs(root))
st.fragment(_monitor, run_every=2.0 if running else None)()
