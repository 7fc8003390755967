"""One fine-tuning run end to end: model → task → (mask) → train → vector → evaluate → store.

>>> from talos_core.pipeline import FinetuneRequest
>>> FinetuneRequest(model="tiny-clip", task="digits", method="talos", sparsity=0.9).method
'talos'
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace

from talos_core.atomic import atomic_write_json
from talos_core.errors import TalosError, check_int, check_range, check_seed
from talos_core.inference.runtime import prepared_model, resolve_device
from talos_core.masks import CalibrationConfig, mask_density, mask_moved
from talos_core.methods.finetuning import CALIBRATION, SPARSITY
from talos_core.models import get_model_spec
from talos_core.runners import get_method
from talos_core.runners.base import MethodContext
from talos_core.store import Run, RunManifest, Store, artifact_checksums, save_mask, versions
from talos_core.tasks import get_task, load_task
from talos_core.tasks.base import TaskData
from talos_core.tasks.files import is_file_task
from talos_core.training import TrainConfig

#: the largest batch (each step draws its examples' indices; the paper's largest batch is 1,024)
MAX_BATCH_SIZE = 2**16
#: the most training steps a run may ask for: 500 times the paper's 2,000, already weeks for a paper-scale model (a
#: larger number is a typo, and would be accepted only to run for ever)
MAX_STEPS = 1_000_000
#: the most TaLoS calibration rounds (the paper uses 4; each is a pass over the calibration examples)
MAX_ROUNDS = int(next(p.high for p in CALIBRATION if p.name == "rounds"))
#: the inputs of each model family (a model of one modality cannot run a task of the other)
FAMILY_MODALITY = {"clip": "image", "cnn": "image", "text-encoder": "text", "t5": "text"}


def model_modality(spec) -> str | None:
    """``"image"`` or ``"text"``: what a model spec's family takes (``None`` for a family not listed here)."""
    return FAMILY_MODALITY.get(spec.family)


def check_model_task(model: str, task: str) -> None:
    """``model`` and ``task`` must be known and take the same inputs (one :class:`TalosError` sentence each)."""
    spec = get_model_spec(model)
    task_spec = get_task(task)
    modality = model_modality(spec)
    if modality is not None and modality != task_spec.modality:
        raise TalosError(f"model {model!r} takes {modality} inputs but task {task!r} is a "
                         f"{task_spec.modality} task; choose a task with {modality} inputs (see `talos tasks`) or a "
                         f"model for {task_spec.modality} inputs (see `talos models`)")


_CALIBRATION = {p.name: p for p in CALIBRATION}

STORED_KEYS: dict[str, str] = {"calibration_ties": "ties"}
"""Request fields stored under another key (manifests, run ids): the key they had when the runs were written, so
every stored run id and manifest stays as it was."""


def request_fields(values: Mapping[str, object]) -> dict:
    """Request settings by field name, whichever key they are given under (stored results and manifests use the
    :data:`STORED_KEYS`).

    >>> request_fields({"ties": "random", "rounds": 2})
    {'calibration_ties': 'random', 'rounds': 2}
    """
    fields_of = {key: name for name, key in STORED_KEYS.items()}
    return {fields_of.get(k, k): v for k, v in values.items()}


def stored_request(req: FinetuneRequest) -> dict:
    """The request as a manifest records it (``options`` left out: the config holds them), its keys in field order.

    >>> stored_request(FinetuneRequest(model="tiny-clip", task="digits"))["ties"]
    'keep'
    """
    return {STORED_KEYS.get(k, k): v for k, v in req.flat().items() if k != "options"}


@dataclass(frozen=True)
class CalibrationSettings:
    """TaLoS's and LoTA's calibration settings, as a request gives them: the TaLoS declaration's calibration
    parameters (:data:`talos_core.methods.finetuning.CALIBRATION`: their defaults here, their checks in
    :meth:`validate`); ``None`` takes the model's default (:meth:`FinetuneRequest.calib_config` resolves them).

    >>> CalibrationSettings(rounds=0).validate()
    Traceback (most recent call last):
    ...
    talos_core.errors.TalosError: rounds must be an integer in [1, 100], got 0
    """

    rounds: int = _CALIBRATION["rounds"].default
    calib_samples: int | None = None
    soft_mask_value: float | None = None  # None: the model's default (CNNs 1 = none), else the paper's 0.01
    score_target: str = _CALIBRATION["score_target"].default
    param_set: str = _CALIBRATION["param_set"].default
    zero_scores: str = _CALIBRATION["zero_scores"].default  # entries with zero sensitivity
    # entries tied at a round's threshold; stored under its former key "ties" (STORED_KEYS)
    calibration_ties: str = _CALIBRATION["calibration_ties"].default

    def validate(self) -> None:
        """Each set value within its declared range (one :class:`TalosError` sentence for the first that is not)."""
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None:
                _CALIBRATION[f.name].check(value)


CALIBRATION_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(CalibrationSettings))
"""The calibration settings' names: flat request fields, grouped in :attr:`FinetuneRequest.calibration`."""


@dataclass(frozen=True)
class FinetuneRequest:
    """Everything that defines a run. ``None`` hyperparameters take the model's defaults."""

    model: str
    task: str
    method: str = "talos"
    sparsity: float = SPARSITY.default
    seed: int = 0
    steps: int | None = None
    batch_size: int | None = None
    lr: float | None = None
    weight_decay: float | None = None
    warmup_steps: int | None = None
    grad_clip: float = 1.0
    # TaLoS / LoTA calibration, stored flat in its place (stored_request)
    calibration: CalibrationSettings = CalibrationSettings()
    max_train: int | None = None
    max_val: int | None = None
    max_test: int | None = None
    eval_batch_size: int = 128
    device: str = "auto"
    checkpoint_every: int = 0
    options: tuple[tuple[str, object], ...] = ()  # method-specific options, e.g. (("rank", 16),)
    # auto/fp32/bf16; None = $TALOS_TRAIN_PRECISION, else auto (talos_core.inference.precision)
    train_precision: str | None = None
    eval_every: int = 0  # learning curve: validation accuracy every N steps and at the last (0 = off)
    # gradient accumulation: forward+backward in chunks of this many examples per step (None = the whole batch;
    # the gradient is the whole batch's, so it is not part of the run id)
    micro_batch_size: int | None = None
    early_stopping_patience: int = 0  # stop after N evaluations (eval_every) without a new best val acc (0 = off)
    schedule: str | None = None  # learning-rate schedule after warm-up: cosine or constant (None = the model's)
    batching: str = "random"  # how a step's examples are drawn: random, or length (grouped by input length)

    def __post_init__(self) -> None:
        # a file task (csv:PATH, images:DIR, hf:ID) is named canonically, with its content hash: the run id,
        # the manifest and every cache keyed by the task name then follow the data (talos_core.tasks.files)
        if is_file_task(self.task):
            object.__setattr__(self, "task", get_task(self.task).name)

    @classmethod
    def from_flat(cls, **settings: object) -> FinetuneRequest:
        """The request of flat settings, the calibration's among them (``rounds=2``), as manifests and overrides
        name them (:func:`request_fields`).

        >>> FinetuneRequest.from_flat(model="tiny-clip", task="digits", rounds=2).calibration.rounds
        2
        """
        flat = {k: settings.pop(k) for k in CALIBRATION_FIELDS if k in settings}
        base = settings.pop("calibration", CalibrationSettings())
        return cls(**settings, calibration=replace(base, **flat))

    @classmethod
    def flat_names(cls) -> tuple[str, ...]:
        """The settings' flat names (the calibration's in its place): what :meth:`from_flat` takes."""
        return tuple(n for f in fields(cls) for n in (CALIBRATION_FIELDS if f.name == "calibration" else (f.name,)))

    def flat(self) -> dict:
        """Every setting by flat field name, the calibration's in its place, in field order (:meth:`flat_names`)."""
        out: dict = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out.update({c: getattr(value, c) for c in CALIBRATION_FIELDS} if f.name == "calibration"
                       else {f.name: value})
        return out

    def validate(self) -> None:
        check_model_task(self.model, self.task)
        method = get_method(self.method)
        SPARSITY.check(self.sparsity)  # 0 = density 1: a sparse method trains every entry
        check_seed(self.seed)
        # every integer field refuses booleans (True is no step count): one sentence each
        for name in ("batch_size", "max_train", "max_val", "max_test"):
            check_int(name, getattr(self, name), low=1, optional=True)
        self.calibration.validate()
        check_int("steps", self.steps, low=1, high=MAX_STEPS, optional=True)
        check_int("warmup_steps", self.warmup_steps, low=0, optional=True)
        check_int("eval_batch_size", self.eval_batch_size, low=1)
        check_int("checkpoint_every", self.checkpoint_every, low=0)
        check_int("eval_every", self.eval_every, low=0, what="a non-negative integer (0 = no learning curve)")
        check_int("micro_batch_size", self.micro_batch_size, low=1, optional=True,
                  what="a positive integer (or unset for the whole batch)")
        check_int("early_stopping_patience", self.early_stopping_patience, low=0,
                  what="a non-negative integer (0 = off)")
        steps = self.steps if self.steps is not None else get_model_spec(self.model).defaults.get("steps", 2000)
        if self.warmup_steps is not None and self.warmup_steps > steps:
            raise TalosError(f"warmup_steps {self.warmup_steps} is longer than the run ({steps} steps); give at most "
                             f"as many warm-up steps as steps")
        if self.batch_size is not None and self.batch_size > min(MAX_BATCH_SIZE, self.max_train or MAX_BATCH_SIZE):
            raise TalosError(f"batch_size {self.batch_size} is larger than "
                             + (f"max_train ({self.max_train}), the whole training set; give at most that many"
                                if self.max_train is not None and self.max_train < MAX_BATCH_SIZE
                                else f"{MAX_BATCH_SIZE}, the largest batch allowed"))
        if self.lr is not None:
            check_range("lr", self.lr, 0.0, 1.0, low_open=True, high_open=False)
        if self.weight_decay is not None:
            check_range("weight_decay", self.weight_decay, 0.0, math.inf)
        keys = [k for k, _ in self.options]
        bad = sorted(k for k in keys if k not in method.options)
        if bad:
            allowed = ", ".join(method.options) if method.options else "none (it takes no --option)"
            raise TalosError(f"method {self.method!r} has no option {bad[0]!r}; its options: {allowed}")
        dup = sorted({k for k in keys if keys.count(k) > 1})
        if dup:
            raise TalosError(f"option {dup[0]!r} is given twice; give each --option once")
        if self.device not in ("auto", "cpu", "cuda") and not self.device.startswith("cuda:"):
            raise TalosError(f"device must be auto, cpu or cuda[:N], got {self.device!r}")
        if self.train_precision is not None:
            from talos_core.inference.precision import check_precision

            check_precision(self.train_precision, "training precision")
        p = self.early_stopping_patience
        if p and not self.eval_every:
            raise TalosError(f"early stopping (patience {p}) needs validation evaluations: set eval_every to a "
                             f"positive number of steps")
        if self.schedule is not None:
            from talos_core.training import SCHEDULES

            if self.schedule not in SCHEDULES:
                raise TalosError(f"schedule must be one of {', '.join(SCHEDULES)}, got {self.schedule!r}")

    def device_type(self) -> str:
        """``"cuda"`` or ``"cpu"``: the kind of device the run trains on (without failing when CUDA is absent)."""
        import torch

        if self.device == "auto":
            return "cuda" if torch.cuda.is_available() else "cpu"
        return "cuda" if self.device.startswith("cuda") else "cpu"

    def resolved_train_precision(self) -> str:
        """``"fp32"`` or ``"bf16"``: the training precision this run uses (the request's, else
        ``$TALOS_TRAIN_PRECISION``, else ``auto``, resolved for the model's family and the device; see
        :func:`talos_core.inference.precision.resolve_train_precision`)."""
        from talos_core.inference.precision import resolve_train_precision

        return resolve_train_precision(self.device_type(), self.train_precision,
                                       family=get_model_spec(self.model).family)

    def train_config(self) -> TrainConfig:
        d = get_model_spec(self.model).defaults

        def pick(key: str, fallback: float) -> float:  # the request's value, else the model's, else fallback
            for value in (getattr(self, key), d.get(key)):
                if value is not None:
                    return value
            return fallback

        # a given 0 stays 0 (TrainConfig refuses lr 0 and steps 0 with one sentence), never a silent fallback
        return TrainConfig(steps=pick("steps", 2000), batch_size=pick("batch_size", 128),
                           lr=pick("lr", 1e-5), weight_decay=pick("weight_decay", 0.0),
                           warmup_steps=pick("warmup_steps", 0), grad_clip=self.grad_clip, seed=self.seed,
                           precision=self.resolved_train_precision(), checkpoint_every=self.checkpoint_every,
                           eval_every=self.eval_every, micro_batch_size=self.micro_batch_size or 0,
                           early_stopping_patience=self.early_stopping_patience,
                           schedule=self.schedule or d.get("schedule", "cosine"), batching=self.batching)

    def calib_config(self) -> CalibrationConfig:
        """The calibration settings, for methods that calibrate (``method.calibrates``)."""
        d = get_model_spec(self.model).defaults
        c = self.calibration
        return CalibrationConfig(sparsity=self.sparsity, rounds=c.rounds,
                                 soft_mask_value=c.soft_mask_value if c.soft_mask_value is not None
                                 else d.get("soft_mask_value", 0.01),
                                 samples=c.calib_samples or d.get("calib_samples", 1280),
                                 target=c.score_target, param_set=c.param_set, seed=self.seed,
                                 zero_scores=c.zero_scores, ties=c.calibration_ties)

    def config_dict(self) -> dict:
        """The resolved configuration (what the run id hashes).

        ``checkpoint_every``, ``eval_every`` and ``micro_batch_size`` are left out (none changes the task vector;
        ``eval_every`` stays when early stopping uses it), and so are ``early_stopping_patience`` and ``schedule``
        at their defaults (off, cosine: what runs were before they existed). The training
        precision enters as :func:`~talos_core.inference.precision.hashed_train_precision`: ``"auto"`` when the
        resolved precision is what ``auto`` always meant before it could be chosen (fp32 on CPU, bf16 on CUDA)
        — so every earlier run id stays valid — and the resolved ``"fp32"``/``"bf16"`` when it differs (bf16 on
        a CPU, fp32 on a GPU).
        """
        from talos_core.inference.precision import hashed_train_precision

        method = get_method(self.method)
        out = {"model": self.model, "task": self.task, "method": self.method, "seed": self.seed,
               "train": self.train_config().identity_dict(),
               "data": {"max_train": self.max_train, "max_val": self.max_val, "max_test": self.max_test},
               "options": dict(self.options)}
        out["train"].pop("checkpoint_every")
        if not self.early_stopping_patience:
            out["train"].pop("eval_every")
        out["train"]["precision"] = hashed_train_precision(self.device_type(), out["train"]["precision"])
        if method.sparse:
            out["sparsity"] = self.sparsity
        if method.calibrates:
            out["calibration"] = self.calib_config().to_dict()
        return out

    def run_id(self) -> str:
        from talos_core.store import run_id

        return run_id(self.model, self.task, self.method, self.config_dict())


def not_trained(method: str, model: str, task: str, store: Store, label: object = None) -> TalosError:
    """The sentence for a missing run of a method that never fine-tunes (``imported``): how to import one."""
    which = f" labelled {label!r}" if label is not None else ""
    return TalosError(f"store {store.root} has no {method!r} run{which} of {model!r} on {task!r}, and {method!r} runs "
                      f"are not fine-tuned here; import one first: talos import --model {model} --task {task} PATH "
                      f"--store {store.root}")


def load_request_data(req: FinetuneRequest) -> TaskData:
    return load_task(req.task, max_train=req.max_train, max_val=req.max_val, max_test=req.max_test)


def run_finetune(req: FinetuneRequest, store: Store, *, force: bool = False, progress: bool = True,
                 on_step: Callable[[int, dict], None] | None = None) -> Run:
    """Fine-tune (or reuse) the run ``req`` and return it from ``store``.

    The request and the store are checked before any work (one :class:`TalosError` each; nothing written).
    Fine-tuning and publishing hold the store's lock on the run id (:meth:`Store.run_lock`): a second process
    asking for the same run waits, then finds the first one's run and reuses it (``force`` re-runs it). The
    manifest records the SHA-256 of every artifact (``RunManifest.artifacts``).

    A run whose manifest is in the store without its weights (a store carried as JSON, ``talos export``) is
    trained again: the new manifest's ``info["retrained"]`` keeps the old one's date and artifact SHA-256 and
    says whether the new artifacts are the same bytes (training is deterministic on one kind of machine; another
    CPU or GPU rounds differently). Results computed earlier from the old weights stay as they were."""
    req.validate()
    store.check_folder()
    if not get_method(req.method).trains:
        raise not_trained(req.method, req.model, req.task, store)
    rid = req.run_id()
    if not force and (found := _stored_run(store, rid)) is not None and found.has_weights:
        return found
    preflight(req)
    store.ensure()
    with store.run_lock(rid):
        found = None if force else _stored_run(store, rid)
        if found is not None and found.has_weights:
            return found  # another process published it while this one waited
        return _finetune_and_publish(req, store, rid, progress=progress, on_step=on_step,
                                     previous=found.manifest if found is not None else None)


def _stored_run(store: Store, rid: str) -> Run | None:
    """The run ``rid`` in the store (with its weights or as a manifest alone), else ``None``."""
    return store.get_run(rid) if store.has_run(rid) else None


def retrained_info(previous: RunManifest, artifacts: dict[str, str]) -> dict:
    """What a run's manifest records when the run was trained again because only its manifest was here: the
    earlier manifest's date and artifact SHA-256, and whether the new artifacts have the same bytes."""
    before = dict(previous.artifacts or {})
    return {"previous_created": previous.created, "previous_artifacts": before,
            "same_artifacts": bool(before) and all(artifacts.get(k) == v for k, v in before.items())}


def preflight(req: FinetuneRequest) -> None:
    """What can only be checked against this machine or the model, before anything is written: the device exists,
    the model loads (offline models, a local folder) with a usable head for the task, and the method's options fit
    the model (an L-LoRA rank above its projections' size)."""
    from talos_core.inference.runtime import cached_model

    device = resolve_device(req.device)
    prepared_model(req.model, get_task(req.task), device)
    method = get_method(req.method)
    if method.check_options is not None:
        method.check_options(cached_model(req.model), dict(req.options))


def _finetune_and_publish(req: FinetuneRequest, store: Store, rid: str, *, progress: bool,
                          on_step: Callable[[int, dict], None] | None, previous: RunManifest | None = None) -> Run:
    from talos_core.inference.forward import accuracy  # looked up per call (tests count its calls)
    from talos_core.inference.precision import model_precision
    from talos_core.inference.runtime import memoized_zero_shot

    t_start = time.perf_counter()
    task = get_task(req.task)
    data = load_request_data(req)
    device = resolve_device(req.device)
    model = prepared_model(req.model, task, device)
    method = get_method(req.method)
    train_config = req.train_config()
    ctx = MethodContext(model, task, data, train_config, sparsity=req.sparsity, seed=req.seed,
                        calib_config=req.calib_config() if method.calibrates else None, options=dict(req.options),
                        progress=progress, checkpoint_dir=store.checkpoint_dir(rid), on_step=on_step)
    out = method.run(ctx)
    bs = req.eval_batch_size
    t_eval = time.perf_counter()
    precision = model_precision(model)
    same_data = dict(model=req.model, device=device, precision=precision, max_val=req.max_val,
                     max_test=req.max_test, batch_size=bs, task=req.task)  # θ0 is restored by now
    metrics = {
        "zero_shot_test_acc": memoized_zero_shot(lambda: accuracy(model, task, data.test, batch_size=bs),
                                                 split="test", **same_data),
        "zero_shot_val_acc": memoized_zero_shot(lambda: accuracy(model, task, data.val, batch_size=bs),
                                                split="val", **same_data),
        "finetuned_test_acc": accuracy(model, task, data.test, [(out.vector, 1.0)], mode=method.eval_mode,
                                       batch_size=bs),
        "finetuned_val_acc": accuracy(model, task, data.val, [(out.vector, 1.0)], mode=method.eval_mode,
                                      batch_size=bs),
        "eval_precision": precision,
        "vector_nnz": out.vector.nnz(),
        "vector_norm": out.vector.norm(),
        "theta_numel": model.num_parameters(),
    }
    if out.mask is not None:
        metrics["mask_density"] = mask_density(out.mask)
        metrics["maskable_numel"] = sum(m.numel() for m in out.mask.values())
        dense = {n: out.vector.dense(n) for n in out.mask if n in out.vector.values}
        metrics["mask_moved"] = mask_moved(out.mask, dense)
        if "mask_zero_sensitivity" in out.info:
            metrics["mask_zero_sensitivity"] = out.info["mask_zero_sensitivity"]
    timings = {**out.timings, "eval_s": time.perf_counter() - t_eval, "total_s": time.perf_counter() - t_start}
    staging = store.staging(rid)
    if out.mask is not None:
        save_mask(out.mask, staging / "mask.safetensors")
    out.vector.save(staging / "task_vector.safetensors")
    artifacts = artifact_checksums(staging)
    info = dict(out.info)
    if previous is not None:
        info["retrained"] = retrained_info(previous, artifacts)
        if not info["retrained"]["same_artifacts"]:
            print(f"run {rid} was trained again (its store held only its manifest) and its task vector differs from "
                  f"the one recorded on {previous.created}: results computed from that one stay as they were",
                  file=sys.stderr)
    every = max(1, len(out.history) // 200)
    manifest = RunManifest(
        run_id=rid, model=req.model, task=req.task, method=req.method, family=model.family,
        sparsity=req.sparsity if method.sparse else None, seed=req.seed, eval_mode=method.eval_mode,
        sparse_method=method.sparse, config=req.config_dict(),
        request=stored_request(req),
        data_sizes={"train": len(data.train), "val": len(data.val), "test": len(data.test)},
        metrics=metrics, timings=timings, info=info, history=out.history[::every], device=str(device),
        versions=versions(), created=time.strftime("%Y-%m-%dT%H:%M:%S%z"), train_precision=train_config.precision,
        curve=out.curve, artifacts=artifacts)
    atomic_write_json(staging / "manifest.json", manifest.to_dict())
    return store.commit(staging, rid)
