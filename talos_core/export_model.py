"""The edited model out of the store: ``θ0 + Σ α_t τ_t − Σ α_c τ_c`` as a standard checkpoint (``talos merge``).

A merge takes the store's runs of one model and method (found as the evaluation protocols find them,
:func:`talos_core.evaluation.runs.find_run`, never fine-tuning), adds ``α_t τ_t`` for every added task and
subtracts ``α_c τ_c`` for every negated one, and writes the edited weights in the format of the model's own
library, so that no TaLoS Studio code is needed to use them:

* sentence encoders (``minilm-l6``, ``tiny-text``, ``hf-encoder:…``): ``save_pretrained`` safetensors, config and
  tokenizer (``transformers.AutoModel.from_pretrained(DIR)``), plus the sentence-transformers files
  (``modules.json``, mean pooling, normalize) for ``SentenceTransformer(DIR)``;
* T5 (``t5-*``, ``tiny-t5``): ``save_pretrained`` of ``T5ForConditionalGeneration`` and its tokenizer;
* CLIP (``tiny-clip``, ``clip-vit-*``, ``clip:…``): the whole open_clip model's state dict
  ``open_clip_model.safetensors`` (edited image tower, pre-trained text tower) and ``open_clip_config.json``
  (``open_clip.create_model("local-dir:DIR")``, or ``create_model(arch)`` + ``load_state_dict``);
* CNNs (``efficientnet-lite0``, ``tiny-cnn``): the timm feature extractor's state dict ``model.safetensors``
  and ``config.json`` (``timm.create_model(arch, num_classes=0)`` + ``load_state_dict``).

Beside the weights: ``heads/<task>.safetensors`` (each task's frozen head, built from θ0 exactly as the evaluation
builds it, with the class names in its metadata), ``talos_merge.json`` (what was merged: model, method, tasks,
α's, run ids), ``README.md`` (a model card with the store's accuracies for this mix when the store has them) and
``SHA256SUMS`` (``sha256sum -c SHA256SUMS``). The folder is written under a temporary name beside ``out`` and
renamed into place, so ``out`` never holds half an export.

A post-hoc method (``--method tsv``, ``ties``, …) merges the store's ``nonlinear`` runs of the added tasks into one
vector (:func:`talos_core.methods.posthoc.posthoc_merged`) and adds ``α`` times it (one α for all tasks; task
addition only; tasks in the order given, which DARE's per-task seeds follow). Its hyperparameters are ``--hparam``
values, else those the store's addition result of exactly these tasks chose on validation, else the method's
defaults.

α is applied exactly as given. The evaluation protocols search α on the paper's grid ``{0, 0.05, …, 1}``, which
for sparse methods is stretched by ``1/(1 − k)`` (k = 0.9 → up to 10); that stretch is part of the grid, not of
α, so it does NOT apply here: to export the mix the store evaluated, pass the α the store selected (shown in the
model card, by ``talos report`` and on the Arithmetic page).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from talos_core.atomic import json_ready
from talos_core.errors import TalosError, check_range

FORMAT = "talos-merge/1"
CARD = "README.md"
SUMS = "SHA256SUMS"
META = "talos_merge.json"
HEADS_DIR = "heads"


# --------------------------------------------------------------------------------------------
# the request: pure, torch-free
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MergeRequest:
    """What to merge: ``θ0 + Σ_{t ∈ tasks} α_t τ_t − Σ_{c ∈ negate} α_c τ_c`` of ``model``'s ``method`` runs.

    ``alphas`` holds one non-negative coefficient per task of ``tasks`` and ``negate`` (the sign comes from the
    list a task is in). ``overrides`` select the runs as in the evaluation protocols (e.g. ``{"sparsity": 0.5}``,
    ``{"options": {"rank": 16}}``).
    """

    model: str
    tasks: tuple[str, ...]
    method: str
    alphas: Mapping[str, float]
    negate: tuple[str, ...] = ()
    overrides: Mapping[str, Any] = field(default_factory=dict)
    hyperparameters: Mapping[str, Any] | None = None  # post-hoc methods; None: the store's choice, else defaults

    @property
    def posthoc(self) -> bool:
        from talos_core.schema import METHODS

        return self.method in METHODS and METHODS[self.method].posthoc

    @property
    def run_method(self) -> str:
        """The fine-tuning method of the runs merged: ``method``, or a post-hoc method's base (``nonlinear``)."""
        from talos_core.schema import METHODS

        return str(METHODS[self.method].base_method) if self.posthoc else self.method

    def terms(self) -> list[tuple[str, float]]:
        """``[(task, signed coefficient)]``: ``+α_t`` for added tasks, ``−α_c`` for negated ones, in order."""
        return [(t, float(self.alphas[t])) for t in self.tasks] + [(c, -float(self.alphas[c])) for c in self.negate]


def parse_alphas(text: str | float, tasks: Sequence[str], negate: Sequence[str] = ()) -> dict[str, float]:
    """``"0.6"`` (one α for every task) or ``"a=0.5,b=0.3,c=1"`` (one per task, every task named once).

    >>> parse_alphas("0.6", ["a", "b"], ["c"])
    {'a': 0.6, 'b': 0.6, 'c': 0.6}
    >>> parse_alphas("a=0.5, c=1", ["a"], ["c"])
    {'a': 0.5, 'c': 1.0}
    """
    names = list(tasks) + list(negate)
    text = str(text).strip()

    def number(value: str, what: str) -> float:
        try:
            x = float(value)
        except ValueError:
            raise TalosError(f"{what} must be a number, got {value!r}") from None
        return check_alpha(what, x)

    if "=" not in text:
        a = number(text, "--alpha")
        return {t: a for t in names}
    out: dict[str, float] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or not key:
            raise TalosError(f"--alpha must be one number or TASK=NUMBER pairs separated by commas, got {text!r}")
        if key not in names:
            raise TalosError(f"--alpha names {key!r}, which is not among the merged tasks ({', '.join(names)})")
        if key in out:
            raise TalosError(f"--alpha names {key!r} twice")
        out[key] = number(value.strip(), f"--alpha for {key!r}")
    missing = [t for t in names if t not in out]
    if missing:
        raise TalosError(f"--alpha gives no coefficient for {', '.join(missing)}; give one per task or one number "
                         f"for all")
    return {t: out[t] for t in names}


def check_request(req: MergeRequest) -> None:
    """Every problem a request can have before the store is read, as one :class:`TalosError` sentence."""
    from talos_core.models import get_model_spec
    from talos_core.schema import METHODS, method_info
    from talos_core.tasks import get_task

    get_model_spec(req.model)
    if not req.tasks and not req.negate:
        raise TalosError("nothing to merge: give --tasks to add and/or --negate to subtract")
    names = list(req.tasks) + list(req.negate)
    for t in names:
        get_task(t)
    dup = sorted({t for t in names if names.count(t) > 1})
    if dup:
        raise TalosError(f"task {dup[0]!r} is named twice (in --tasks and/or --negate); name each task once")
    if req.method not in METHODS:
        from talos_core.errors import unknown

        raise unknown("method", req.method, list(METHODS))
    if req.hyperparameters is not None and not req.posthoc:
        raise TalosError(f"hyperparameters (--hparam) are a post-hoc method's; {req.method!r} is a fine-tuning method "
                         f"(choose its runs with --sparsity / --option)")
    if req.posthoc and req.negate:
        raise TalosError(f"{req.method!r} is a post-hoc merge: talos merge exports its task addition (--tasks) only; "
                         f"to subtract a task's vector, use the runs it merges (--method {req.run_method})")
    if req.posthoc and len({req.alphas.get(t) for t in req.tasks}) > 1:
        raise TalosError(f"{req.method!r} merges the tasks into one vector with one α; give one --alpha for all tasks")
    info = method_info(req.run_method)
    if info.eval_mode != "nonlinear":
        raise TalosError(f"method {req.method!r} is evaluated as a linearized model f(x,θ0) + τᵀ∇f(x,θ0), which no "
                         f"standard checkpoint represents; export a non-linear method (talos, nonlinear, lota, …)")
    missing = [t for t in names if t not in req.alphas]
    if missing:
        raise TalosError(f"no α for task {missing[0]!r}")
    for t in names:
        check_alpha(f"α for {t!r}", req.alphas[t])


def check_alpha(what: str, value: object) -> float:
    """``value`` must be a number in [0, ``MAX_ALPHA``] (negation is ``--negate``, not a negative α)."""
    from talos_core.evaluation.request import MAX_ALPHA

    try:
        return check_range(what, value, 0.0, MAX_ALPHA, high_open=False)
    except TalosError as exc:
        raise TalosError(f"{exc} (negation is --negate, not a negative α)") from None


def check_out(out: str | Path) -> Path:
    """``out`` must not exist, or be an empty folder; returns it as a :class:`Path`."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise TalosError(f"--out {out} already exists and is not an empty folder; choose a new folder "
                         f"(nothing was written)")
    return out


# --------------------------------------------------------------------------------------------
# finding the runs and the store's accuracies for the mix
# --------------------------------------------------------------------------------------------
def find_merge_runs(store, req: MergeRequest, run_ids: Mapping[str, str] | None = None) -> dict:
    """``{task: Run}`` for every task of the mix, from the store only (no fine-tuning); a missing run, or one
    exported without its task vector, is one sentence. ``run_ids`` (``{task: run id}``, e.g. the runs a stored
    result evaluated) name the runs instead of the search."""
    from talos_core.evaluation.runs import find_run

    runs = {}
    for t in list(req.tasks) + list(req.negate):
        if run_ids is not None:
            rid = run_ids.get(t)
            if not rid or not store.has_run(rid):
                raise TalosError(f"store {store.root} does not hold the run {rid!r} of {t!r} that this result "
                                 f"evaluated; export from the store that holds the runs")
            run = store.get_run(rid)
            run.require_artifacts()
            if (run.manifest.model, run.manifest.task, run.manifest.method) != (req.model, t, req.run_method):
                raise TalosError(f"run {rid} is a {run.manifest.method!r} run of {run.manifest.model!r} on "
                                 f"{run.manifest.task!r}, not {req.run_method!r} of {req.model!r} on {t!r}")
        else:
            run = find_run(store, req.model, t, req.run_method, dict(req.overrides), weights=False)
        if run is None:
            flags = "".join(f" --{k} {v}" for k, v in req.overrides.items() if k != "options") + "".join(
                f" --option {k}={v}" for k, v in dict(req.overrides.get("options") or {}).items())
            raise TalosError(f"store {store.root} has no {req.run_method!r} run of {req.model!r} on {t!r}; fine-tune "
                             f"it first: talos finetune --model {req.model} --task {t} --method {req.run_method}"
                             f"{flags} --store {store.root}")
        if not (run.path / "task_vector.safetensors").exists():
            raise TalosError(f"run {run.id} in {store.root} has no task vector (a manifest exported without its "
                             f"weights, like cached_results/); fine-tune it into your own store first")
        runs[t] = run
    return runs


def _records(payload: Mapping) -> list[dict]:
    recs = payload.get("records")
    return [r for r in recs if isinstance(r, dict)] if isinstance(recs, list) else []


def _same(a: float, b: float) -> bool:
    return abs(float(a) - float(b)) <= 1e-9 * max(1.0, abs(float(b)))


def store_accuracies(root: str | Path, req: MergeRequest, run_ids: Mapping[str, str]) -> list[dict]:
    """The store's evaluated accuracies of exactly this mix, as rows ``{source, suite, split, task, role,
    accuracy}``; ``[]`` when the store has none.

    Task addition results count when they merged the same tasks with the same runs (when they record their runs)
    at one α equal to every α of the request (no negated tasks; a post-hoc method's with the request's
    hyperparameters); negation results when the request negates one
    task with nothing added and the result evaluated that run at that α (target and control task). Torch-free.
    """
    from talos_core.schema import iter_results, read_result, stored_hyperparameters

    rows: list[dict] = []
    alphas = {float(req.alphas[t]) for t in list(req.tasks) + list(req.negate)}
    for kind, name, fields in iter_results(root):
        if kind not in ("addition", "negation") or fields.get("method") != req.method:
            continue
        try:
            payload = read_result(root, kind, name)
        except TalosError:
            continue
        if payload.get("model") not in (None, req.model) or len(alphas) != 1:
            continue
        if payload.get("model") is None and fields.get("model") != req.model:
            continue
        alpha = next(iter(alphas))
        recorded_runs = payload.get("runs") if isinstance(payload.get("runs"), dict) else None
        suite = fields.get("suite")
        if kind == "addition" and req.tasks and not req.negate:
            tasks = payload.get("tasks")
            if not isinstance(tasks, list) or sorted(tasks) != sorted(req.tasks):
                continue
            if req.posthoc and stored_hyperparameters(req.method, payload.get("hyperparameters") or {}) != \
                    dict(req.hyperparameters or {}):
                continue
            if recorded_runs is not None and any(recorded_runs.get(t) != run_ids[t] for t in req.tasks):
                continue
            for r in _records(payload):
                if _same(r.get("alpha", math.nan), alpha) and r.get("task") in req.tasks:
                    rows.append(dict(source=f"addition/{name}", suite=suite, split=r.get("split"), task=r["task"],
                                     role="added", accuracy=r.get("accuracy"),
                                     normalized_accuracy=r.get("normalized_accuracy")))
        elif kind == "negation" and len(req.negate) == 1 and not req.tasks:
            target = req.negate[0]
            if recorded_runs is not None and recorded_runs.get(target) != run_ids[target]:
                continue
            control = payload.get("control_task")
            for r in _records(payload):
                if r.get("target") == target and _same(r.get("alpha", math.nan), alpha):
                    rows.append(dict(source=f"negation/{name}", suite=suite, split=r.get("split"), task=target,
                                     role="negated", accuracy=r.get("target_acc")))
                    rows.append(dict(source=f"negation/{name}", suite=suite, split=r.get("split"), task=control,
                                     role="control", accuracy=r.get("control_acc")))
    return rows


def store_hyperparameters(root: str | Path, req: MergeRequest, run_ids: Mapping[str, str]) -> dict | None:
    """The hyperparameters the store's addition result of post-hoc ``req.method`` on exactly ``req.tasks`` (with
    these runs, when it records them) chose on validation; ``None`` when the store has none. Torch-free."""
    from talos_core.schema import iter_results, read_result, stored_hyperparameters

    for kind, name, fields in iter_results(root):
        if kind != "addition" or fields.get("method") != req.method:
            continue
        try:
            payload = read_result(root, kind, name)
        except TalosError:
            continue
        runs = payload.get("runs") if isinstance(payload.get("runs"), dict) else {}
        if (payload.get("model") == req.model and sorted(payload.get("tasks") or []) == sorted(req.tasks)
                and all(runs.get(t, run_ids[t]) == run_ids[t] for t in req.tasks)
                and isinstance(payload.get("hyperparameters"), dict)):
            # merged as it was computed: a result written before an option existed lacks it
            return stored_hyperparameters(req.method, payload["hyperparameters"])
    return None


def store_selected_alpha(root: str | Path, req: MergeRequest) -> list[dict]:
    """The α the store's addition/negation results selected for these tasks (for the model card)."""
    from talos_core.schema import iter_results, read_result

    out = []
    for kind, name, fields in iter_results(root):
        if kind not in ("addition", "negation") or fields.get("method") != req.method:
            continue
        if fields.get("model") is None:
            continue
        try:
            payload = read_result(root, kind, name)
        except TalosError:
            continue
        if payload.get("model") not in (None, req.model):
            continue
        if kind == "addition" and req.tasks and sorted(payload.get("tasks") or []) == sorted(req.tasks):
            out.append(dict(source=f"addition/{name}", alpha=payload.get("selected_alpha")))
        if kind == "negation" and isinstance(payload.get("selected"), dict):
            for c in req.negate:
                if c in payload["selected"]:
                    out.append(dict(source=f"negation/{name}", task=c, alpha=payload["selected"][c]))
    return out


# --------------------------------------------------------------------------------------------
# writing
# --------------------------------------------------------------------------------------------
@dataclass
class MergeResult:
    """What :func:`export_merge` wrote."""

    out: Path
    files: dict[str, str]  # relative path → SHA-256
    runs: dict[str, str]  # task → run id
    accuracies: list[dict]
    family: str
    loader: str  # how to load it with the model's own library (one line of Python)


def export_merge(store_root: str | Path, req: MergeRequest, out: str | Path, *, model=None,
                 run_ids: Mapping[str, str] | None = None) -> MergeResult:
    """Write the edited model of ``req`` (see the module docstring) into ``out``, atomically.

    ``model``: an already loaded :class:`~talos_core.models.base.TaskModel` of ``req.model`` at θ0 (its weights are
    edited in place and restored bitwise); by default a fresh one is loaded. ``run_ids``: the runs to merge
    (``{task: run id}``), instead of searching the store as the evaluation does (:func:`find_merge_runs`).
    """
    from talos_core.store import Store

    check_request(req)
    out = check_out(out)
    store = Store(store_root)
    if not store.root.is_dir():
        raise TalosError(f"store {store.root} does not exist; give --store the folder that holds your runs")
    runs = find_merge_runs(store, req, run_ids)
    vectors = {t: run.task_vector() for t, run in runs.items()}
    run_ids = {t: r.id for t, r in runs.items()}
    if req.posthoc:
        from dataclasses import replace

        from talos_core.methods.posthoc import posthoc_merged

        hp = req.hyperparameters
        req = replace(req, hyperparameters=dict(hp) if hp is not None else
                      store_hyperparameters(store.root, req, run_ids) or {})
        merged = posthoc_merged(req.method, {t: vectors[t] for t in req.tasks}, **req.hyperparameters)
        terms = [(merged, float(req.alphas[req.tasks[0]]))]
    else:
        terms = [(vectors[t], a) for t, a in req.terms()]
    accuracies = store_accuracies(store.root, req, run_ids)
    selected = store_selected_alpha(store.root, req)

    import torch

    from talos_core.models import get_model_spec, load_model
    from talos_core.tasks import get_task
    from talos_core.vectors import apply_vectors

    if model is None:
        model = load_model(req.model)
    family = get_model_spec(req.model).family
    writer = _WRITERS.get(family)
    if writer is None:
        raise TalosError(f"talos merge cannot write models of family {family!r}; families it writes: "
                         f"{', '.join(sorted(_WRITERS))}")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
    tmp.mkdir()
    try:
        # heads at θ0, exactly as the evaluation builds them (before the weights are edited)
        heads_dir = tmp / HEADS_DIR
        heads_dir.mkdir()
        for t in runs:
            spec = get_task(t)
            head = model.build_head(spec)
            _save_safetensors({k: v.detach().cpu().contiguous() for k, v in head.items()},
                              heads_dir / f"{t}.safetensors",
                              {"task": t, "classes": json.dumps(list(spec.classes)), "family": family})
        was_training = model.training
        model.eval()
        with torch.no_grad(), apply_vectors(model, terms):
            loader = writer(model, tmp)
        model.train(was_training)
        meta = dict(format=FORMAT, model=req.model, family=family, method=req.method,
                    tasks=list(req.tasks), negate=list(req.negate),
                    alphas={t: float(req.alphas[t]) for t in runs}, terms=[[t, a] for t, a in req.terms()],
                    overrides=json_ready(dict(req.overrides)), runs=run_ids, run_method=req.run_method,
                    hyperparameters=json_ready(dict(req.hyperparameters)) if req.posthoc else None,
                    sparsity={t: r.manifest.sparsity for t, r in runs.items()},
                    store=str(store.root.resolve()), accuracies=accuracies, store_selected_alpha=selected,
                    loader=loader)
        (tmp / META).write_text(json.dumps(meta, indent=1) + "\n")
        (tmp / CARD).write_text(model_card(req, family, runs, accuracies, selected, loader))
        files = _checksums(tmp)
        (tmp / SUMS).write_text("".join(f"{h}  {p}\n" for p, h in sorted(files.items())))
        _fsync_tree(tmp)
        if out.exists():
            out.rmdir()  # an empty folder (checked above)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return MergeResult(out, files, run_ids, accuracies, family, loader)


def _save_safetensors(tensors: dict, path: Path, metadata: dict[str, str] | None = None) -> None:
    from safetensors.torch import save_file

    save_file({k: v.detach().cpu().contiguous() for k, v in tensors.items()}, str(path),
              metadata=dict(metadata) if metadata else None)


def _checksums(folder: Path) -> dict[str, str]:
    from talos_core.atomic import file_sha256

    return {p.relative_to(folder).as_posix(): file_sha256(p) for p in sorted(folder.rglob("*")) if p.is_file()}


def _fsync_tree(folder: Path) -> None:
    for p in folder.rglob("*"):
        if p.is_file():
            with open(p, "rb") as fh:
                os.fsync(fh.fileno())


def verify_export(folder: str | Path) -> list[str]:
    """The files of an export whose SHA-256 differs from ``SHA256SUMS`` (or that are missing); ``[]`` when intact."""
    from talos_core.atomic import file_sha256

    folder = Path(folder)
    bad = []
    for line in (folder / SUMS).read_text().splitlines():
        digest, _, rel = line.partition("  ")
        p = folder / rel
        if not p.is_file() or file_sha256(p) != digest:
            bad.append(rel)
    return bad


# --------------------------------------------------------------------------------------------
# per family: the edited backbone in its library's own format; returns how to load it
# --------------------------------------------------------------------------------------------
def _write_text_encoder(model, out: Path) -> str:
    encoder = model.encoder
    pooler = getattr(model, "_pooler", {}).get("module")
    if pooler is not None:
        encoder.pooler = pooler  # the unused final projection, back in place so the checkpoint is complete
    try:
        encoder.save_pretrained(out, safe_serialization=True)
    finally:
        if pooler is not None:
            encoder.pooler = None
    model.tokenizer.save_pretrained(out)
    dim = int(encoder.config.hidden_size)
    # sentence-transformers layout of the same model: Transformer → mean pooling → normalize (our forward)
    (out / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ], indent=1) + "\n")
    (out / "sentence_bert_config.json").write_text(
        json.dumps({"max_seq_length": int(model.max_length), "do_lower_case": False}, indent=1) + "\n")
    (out / "1_Pooling").mkdir()
    (out / "1_Pooling" / "config.json").write_text(json.dumps({
        "word_embedding_dimension": dim, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True,
        "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False}, indent=1) + "\n")
    (out / "2_Normalize").mkdir()
    (out / "2_Normalize" / "config.json").write_text("{}\n")
    return "transformers.AutoModel.from_pretrained(DIR) (mean-pool last_hidden_state over the attention mask, " \
           "L2-normalize); or sentence_transformers.SentenceTransformer(DIR)"


def _write_t5(model, out: Path) -> str:
    model.t5.save_pretrained(out, safe_serialization=True)
    model.tokenizer.save_pretrained(out)
    return "transformers.T5ForConditionalGeneration.from_pretrained(DIR), transformers.AutoTokenizer." \
           "from_pretrained(DIR)"


def _write_clip(model, out: Path) -> str:
    clip = model._text["clip"]  # the whole open_clip model; its .visual is the (edited) model.visual
    if model.model_cfg is None:
        raise TalosError("this CLIP model does not record its open_clip config; it cannot be written for open_clip")
    _save_safetensors(dict(clip.state_dict()), out / "open_clip_model.safetensors")
    (out / "open_clip_config.json").write_text(json.dumps({
        "model_cfg": model.model_cfg,
        "preprocess_cfg": {"mean": list(model.mean), "std": list(model.std), "image_size": model.image_size},
    }, indent=1) + "\n")
    return "open_clip.create_model_and_transforms('local-dir:DIR') (or open_clip.create_model(arch) + " \
           "load_state_dict(safetensors.torch.load_file('DIR/open_clip_model.safetensors')))"


def _write_cnn(model, out: Path) -> str:
    backbone = model.backbone
    _save_safetensors(dict(backbone.state_dict()), out / "model.safetensors")
    cfg = getattr(backbone, "pretrained_cfg", None) or {}
    arch = cfg.get("architecture")  # None for an architecture timm has no name for (tiny-cnn)
    (out / "config.json").write_text(json.dumps({
        "architecture": arch, "num_classes": 0, "num_features": int(getattr(backbone, "num_features", 0)),
        "pretrained_cfg": {"input_size": [3, model.image_size, model.image_size], "mean": list(model.mean),
                           "std": list(model.std)},
    }, indent=1) + "\n")
    if arch is None:
        return "build the same timm EfficientNet (num_classes=0) and load_state_dict(safetensors.torch.load_file(" \
               "'DIR/model.safetensors'))"
    return f"timm.create_model({arch!r}, num_classes=0).load_state_dict(safetensors.torch.load_file(" \
           "'DIR/model.safetensors'))"


_WRITERS = {"text-encoder": _write_text_encoder, "t5": _write_t5, "clip": _write_clip, "cnn": _write_cnn}


# --------------------------------------------------------------------------------------------
# model card
# --------------------------------------------------------------------------------------------
def _pct(x: Any) -> str:
    try:
        return f"{100 * float(x):.2f}"
    except (TypeError, ValueError):
        return "–"


def model_card(req: MergeRequest, family: str, runs: Mapping, accuracies: Sequence[Mapping],
               selected: Sequence[Mapping], loader: str) -> str:
    """The export's README.md (pure: text from the request, the runs and the store's numbers)."""
    from talos_core.schema import method_label

    formula = " ".join([f"+ {req.alphas[t]:g}·τ_{t}" for t in req.tasks]
                       + [f"− {req.alphas[c]:g}·τ_{c}" for c in req.negate])
    if req.posthoc:
        formula = f"+ {req.alphas[req.tasks[0]]:g}·{req.method}({', '.join(f'τ_{t}' for t in req.tasks)})"
    lines = [f"# {req.model} edited by task arithmetic ({method_label(req.method)})", "",
             f"θ = θ0 {formula}", "",
             "Written by `talos merge` (TaLoS Studio). The weights load with the model's own library; no TaLoS "
             "Studio code is needed.", "",
             "| | |", "|---|---|",
             f"| base model | `{req.model}` ({family}) |",
             f"| method | `{req.method}` ({method_label(req.method)}) |"]
    if req.posthoc:
        lines += [f"| merges | the `{req.run_method}` runs below, hyperparameters "
                  f"`{json.dumps(dict(req.hyperparameters or {}), sort_keys=True)}` |"]
    lines += [f"| tasks added | {', '.join(f'`{t}` (α = {req.alphas[t]:g})' for t in req.tasks) or '–'} |",
              f"| tasks negated | {', '.join(f'`{c}` (α = {req.alphas[c]:g})' for c in req.negate) or '–'} |"]
    for t, run in runs.items():
        k = run.manifest.sparsity
        lines.append(f"| run of `{t}` | `{run.id}`" + (f" (sparsity {k:g})" if k is not None else "") + " |")
    lines += ["", "## Load it", "", f"`{loader}` — DIR is this folder.", "",
              "Each task's frozen classification head (built from the *pre-trained* model, as in the evaluation) "
              "is in `heads/<task>.safetensors` (class names in its metadata `classes`): logits = "
              + {"text-encoder": "`normalize(mean_pool(last_hidden_state)) @ heads[task]['weight'].T`.",
                 "clip": "`normalize(model.encode_image(x)) @ heads[task]['weight'].T`.",
                 "cnn": "`features @ heads[task]['weight'].T + heads[task]['bias']`.",
                 "t5": "rank classification: the summed log-likelihood of each label string "
                       "(`heads[task]['label_ids']`)."}.get(family, "see the head's keys."),
              "",
              "## α", "",
              "α is applied as given. The evaluation protocols search α on the grid {0, 0.05, …, 1}, stretched by "
              "1/(1 − k) for sparse methods (k = 0.9: up to 10); that stretch belongs to the grid, not to a given "
              "α, so it is not applied here.", ""]
    if selected:
        lines.append("α the store selected on validation for these tasks: " + "; ".join(
            f"{s['source']}" + (f" ({s['task']})" if "task" in s else "") + f": {s['alpha']}" for s in selected)
            + ".")
        lines.append("")
    lines += ["## Accuracy (from the store)", ""]
    if accuracies:
        lines += ["| result | suite | split | task | role | accuracy % |", "|---|---|---|---|---|---|"]
        for r in accuracies:
            lines.append(f"| {r['source']} | {r.get('suite')} | {r.get('split')} | {r.get('task')} | {r['role']} | "
                         f"{_pct(r.get('accuracy'))} |")
    else:
        lines.append("The store holds no evaluation of exactly this mix (these runs at these α's), so no accuracy "
                     "is reported; `talos evaluate addition` / `negation` evaluate the α grid.")
    lines += ["", "## Files", "", "`SHA256SUMS` lists every other file's SHA-256 (`sha256sum -c SHA256SUMS`); "
              "`talos_merge.json` records the merge (model, method, α's, run ids, store).", ""]
    return "\n".join(lines)
