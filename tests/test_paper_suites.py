"""The paper suites (settings, --model), gradient accumulation, early stopping, and ``talos suite --plan``."""

from __future__ import annotations

import inspect
import socket

import pytest
import torch

from talos_core.cli import main
from talos_core.errors import TalosError
from talos_core.pipeline import FinetuneRequest
from talos_core.store import Store
from talos_core.suites import SUITES, get_suite, suite_steps, with_model
from talos_core.suites.costs import arch, cell, estimate
from talos_core.suites.plan import plan_suite
from talos_core.tasks import get_task


# ------------------------------------------------------------------------------------------------
# gradient accumulation and early stopping (talos_core.training), on a tiny model
# ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny():
    from talos_core.inference.runtime import prepared_model
    from talos_core.tasks import load_task

    task = get_task("drug-reviews")
    data = load_task("drug-reviews", max_train=40, max_val=12, max_test=8)
    return prepared_model("tiny-text", task, torch.device("cpu")), task, data


def _grads_per_step(monkeypatch, model, task, data, config) -> list[dict]:
    """Every step's gradients as the optimizer receives them (before clipping)."""
    from talos_core import training

    seen = []
    original = training.MaskedAdamW.step

    def spy(self, grad_clip=0.0):
        seen.append({n: g.clone() for n, g in self._grads().items()})
        return original(self, grad_clip)

    monkeypatch.setattr(training.MaskedAdamW, "step", spy)
    plan = {n: None for n, _ in model.named_parameters()}
    training.finetune(model, data.train, task, plan, config, progress=False)
    return seen


def test_gradient_accumulation_gives_the_whole_batch_gradient(tiny, monkeypatch):
    from talos_core.training import TrainConfig

    model, task, data = tiny
    base = dict(steps=3, batch_size=8, lr=1e-3, weight_decay=0.0, warmup_steps=0, grad_clip=0.0, precision="fp32")
    whole = _grads_per_step(monkeypatch, model, task, data, TrainConfig(**base))
    monkeypatch.undo()
    accumulated = _grads_per_step(monkeypatch, model, task, data, TrainConfig(**base, micro_batch_size=3))  # 3+3+2
    assert len(whole) == len(accumulated) == 3
    for a, b in zip(whole, accumulated):
        assert a.keys() == b.keys()
        for n in a:
            # equal up to float32 rounding (the micro-batch sums add in another order)
            torch.testing.assert_close(b[n], a[n], rtol=1e-4, atol=1e-6)


def test_micro_batches_change_memory_not_the_run():
    a = FinetuneRequest(model="tiny-text", task="drug-reviews", method="nonlinear", batch_size=8)
    b = FinetuneRequest(model="tiny-text", task="drug-reviews", method="nonlinear", batch_size=8, micro_batch_size=2)
    assert a.run_id() == b.run_id()
    assert b.train_config().micro_batch_size == 2
    train = a.config_dict()["train"]  # opt-in fields at their defaults stay out of run ids (old ids stay valid)
    assert not {"micro_batch_size", "early_stopping_patience", "schedule", "eval_every"} & set(train)
    c = FinetuneRequest(model="tiny-text", task="drug-reviews", method="nonlinear", batch_size=8, eval_every=5,
                        early_stopping_patience=3)
    assert c.run_id() != a.run_id()
    assert c.config_dict()["train"]["eval_every"] == 5 and c.config_dict()["train"]["early_stopping_patience"] == 3
    d = FinetuneRequest(model="tiny-text", task="drug-reviews", method="nonlinear", batch_size=8, schedule="constant")
    assert d.run_id() != a.run_id() and d.train_config().schedule == "constant"


@pytest.mark.parametrize("kwargs, match", [
    ({"early_stopping_patience": 2}, "needs validation evaluations"),
    ({"micro_batch_size": 0}, "micro_batch_size"),
    ({"early_stopping_patience": -1, "eval_every": 2}, "early_stopping_patience"),
    ({"schedule": "linear"}, "schedule must be one of cosine, constant"),
])
def test_bad_training_options_are_one_sentence(kwargs, match):
    with pytest.raises(TalosError, match=match):
        FinetuneRequest(model="tiny-text", task="drug-reviews", method="nonlinear", **kwargs).validate()


def test_early_stopping_returns_the_best_evaluation(tiny, monkeypatch):
    """Scripted validation accuracies: the best is at step 2 (a tie later is no improvement); with patience 2
    training stops after step 4 and the vector is the one a 2-step run gives (constant schedule: same path)."""
    from talos_core import training
    from talos_core.training import TrainConfig, finetune

    model, task, data = tiny
    accs = iter([0.1, 0.3, 0.2, 0.3, 0.9, 0.9])
    monkeypatch.setattr(training, "validation_accuracy", lambda *a, **k: next(accs))
    plan = {n: None for n, _ in model.named_parameters()}
    base = dict(batch_size=8, lr=1e-3, weight_decay=0.0, warmup_steps=0, precision="fp32", schedule="constant")
    res = finetune(model, data.train, task, plan, TrainConfig(steps=20, eval_every=1, early_stopping_patience=2,
                                                              **base), progress=False, val=data.val)
    assert [c["step"] for c in res.curve] == [1, 2, 3, 4]
    assert res.timings["steps_run"] == 4 and res.timings["best_step"] == 2 and res.timings["best_val_acc"] == 0.3
    short = finetune(model, data.train, task, plan, TrainConfig(steps=2, **base), progress=False)
    for n in short.vector.names():
        assert torch.equal(res.vector.dense(n), short.vector.dense(n)), n


def test_early_stopping_resumes_from_a_checkpoint(tiny, monkeypatch, tmp_path):
    """A run interrupted after its checkpoint continues with the same best evaluation and patience count."""
    from talos_core import training
    from talos_core.training import TrainConfig, finetune

    model, task, data = tiny
    script = [0.5, 0.2, 0.1, 0.1, 0.1]
    plan = {n: None for n, _ in model.named_parameters()}
    cfg = TrainConfig(steps=10, batch_size=8, lr=1e-3, weight_decay=0.0, warmup_steps=0, precision="fp32",
                      schedule="constant", eval_every=1, early_stopping_patience=3, checkpoint_every=2)
    accs = iter(script)
    monkeypatch.setattr(training, "validation_accuracy", lambda *a, **k: next(accs))
    full = finetune(model, data.train, task, plan, cfg, progress=False, val=data.val)
    assert full.timings["steps_run"] == 4 and full.timings["best_step"] == 1

    class Stop(Exception):
        pass

    accs = iter(script)

    def interrupt(step, record):
        if step == 3:
            raise Stop

    theta0 = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(Stop):
        finetune(model, data.train, task, plan, cfg, progress=False, val=data.val, checkpoint_dir=tmp_path,
                 on_step=interrupt)
    model.load_state_dict(theta0)  # an interrupted finetune did not restore θ0 (a new process would start from it)
    accs = iter(script[2:])  # steps 3 and 4 (the checkpoint is at step 2)
    resumed = finetune(model, data.train, task, plan, cfg, progress=False, val=data.val, checkpoint_dir=tmp_path)
    assert resumed.timings["steps_run"] == 4 and resumed.timings["best_step"] == 1
    for n in full.vector.names():
        assert torch.equal(resumed.vector.dense(n), full.vector.dense(n)), n
    # stopped early at step 4, the finished state is kept: computed again, it neither trains nor evaluates further
    monkeypatch.setattr(training, "validation_accuracy", lambda *a, **k: pytest.fail("evaluated again"))
    again = finetune(model, data.train, task, plan, cfg, progress=False, val=data.val, checkpoint_dir=tmp_path)
    assert again.timings["steps_run"] == 4 and again.timings["best_step"] == 1 and len(again.curve) == 4
    for n in full.vector.names():
        assert torch.equal(again.vector.dense(n), full.vector.dense(n)), n


# ------------------------------------------------------------------------------------------------
# the paper suites
# ------------------------------------------------------------------------------------------------
def test_paper_vision_has_the_papers_settings():
    spec = get_suite("paper-vision")
    assert spec.model == "clip-vit-b-32" and spec.control_task == "imagenet"
    assert spec.tasks == ("cars", "dtd", "eurosat", "gtsrb", "mnist", "resisc45", "sun397", "svhn")
    assert set(spec.methods) == {"talos", "nonlinear", "linearized", "llora", "lota"}
    assert set(spec.posthoc) == {"ties", "dare", "breadcrumbs", "tall_consensus"}
    sc = spec.scales["full"]
    assert sc.curve_steps is None  # fixed iterations: no learning-curve step
    assert (sc.max_train, sc.max_val, sc.max_test, sc.posthoc_points) == (None, None, None, None)
    steps = suite_steps(spec, "full", spec.methods, spec.posthoc, seed=0, device="auto")
    nl = next(s for s in steps if s.label == "nonlinear: fine-tune + single")
    from talos_core.evaluation.runs import build_request

    cfg = build_request(spec.model, "dtd", "nonlinear", nl.overrides).train_config()
    assert (cfg.steps, cfg.batch_size, cfg.lr, cfg.weight_decay, cfg.warmup_steps, cfg.grad_clip, cfg.schedule) == \
        (2000, 128, 1e-5, 0.1, 200, 1.0, "cosine")
    assert cfg.precision == ("bf16" if torch.cuda.is_available() else "fp32")  # auto: bf16 on GPU
    _check_common(spec, steps)


def test_paper_nlp_has_the_papers_settings():
    from talos_core.evaluation.runs import build_request
    from talos_core.models.t5 import load_t5

    spec = get_suite("paper-nlp")
    assert spec.model == "t5-base" and spec.control_task == "rte"
    assert spec.tasks == ("qasc", "wikiqa", "quartz", "paws", "story_cloze", "winogrande", "wsc")
    steps = suite_steps(spec, "full", spec.methods, spec.posthoc, seed=0, device="auto")
    nl = next(s for s in steps if s.label == "nonlinear: fine-tune + single")
    req = build_request(spec.model, "paws", "nonlinear", nl.overrides)
    cfg = req.train_config()
    assert (cfg.batch_size, cfg.micro_batch_size, cfg.lr, cfg.weight_decay, cfg.warmup_steps, cfg.grad_clip) == \
        (1024, 256, 1e-4, 0.0, 0, 0.0)
    assert (cfg.steps, cfg.eval_every, cfg.early_stopping_patience, cfg.schedule) == (75000, 100, 5, "constant")
    assert inspect.signature(load_t5).parameters["max_length"].default == 128
    large = with_model(spec, "t5-large")  # the official t5-large config: 64 × 16 (memory only: same run ids)
    ov = next(s for s in suite_steps(large, "full", ["nonlinear"], [], seed=0, device="auto")).overrides
    assert ov["micro_batch_size"] == 64 and ov["batch_size"] == 1024
    _check_common(spec, steps)


def _check_common(spec, steps):
    from talos_core.evaluation.arithmetic import alpha_grid

    sc = spec.scales["full"]
    assert len(alpha_grid(step=sc.alpha_step)) == 21
    assert (sc.xi_grid, sc.xi_points) == (20, 2048)
    assert sc.selection_for("talos") == ("sparsity", (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99))
    assert sc.selection_for("llora") == ("rank", (512, 256, 128, 64, 32, 16, 8))
    assert sc.eval_precision == "auto" and sc.train_precision is None
    for t in (*spec.tasks, spec.control_task):
        assert get_task(t).source in ("huggingface", "offline")
    assert get_task(spec.control_task).control
    protocols = {s.protocol for s in steps}
    assert {"selection", "single", "efficiency", "masks", "addition", "negation", "localization", "linearization",
            "preview", "disentanglement", "sharing", "posthoc", "sparsity-ablation", "comparison"} <= protocols


def test_with_model():
    assert with_model(get_suite("paper-vision"), "clip-vit-l-14").model == "clip-vit-l-14"
    assert with_model(get_suite("paper-vision"), "clip:ViT-B-16:laion2b_s34b_b88k").model.startswith("clip:")
    assert with_model(get_suite("paper-nlp"), "t5:google/flan-t5-base").model == "t5:google/flan-t5-base"
    assert with_model(get_suite("paper-nlp"), None).model == "t5-base"
    with pytest.raises(TalosError, match="choose among: t5-base, t5-small, t5-large, t5:<id>"):
        with_model(get_suite("paper-nlp"), "clip-vit-b-32")
    with pytest.raises(TalosError, match="runs only model 'minilm-l6'"):
        with_model(get_suite("text"), "t5-base")


def test_cli_bad_model_is_one_sentence_and_writes_nothing(capsys, tmp_path):
    store = tmp_path / "s"
    assert main(["suite", "paper-vision", "--model", "resnet-50", "--store", str(store)]) == 2
    err = capsys.readouterr().err
    assert "no model 'resnet-50'" in err and "clip-vit-l-14" in err and "Traceback" not in err
    assert not store.exists()
    assert main(["suite", "paper-vision", "--plan", "--plan-device", "tpu", "--store", str(store)]) == 2
    assert "unknown plan device 'tpu'" in capsys.readouterr().err
    assert not store.exists()


# ------------------------------------------------------------------------------------------------
# the plan
# ------------------------------------------------------------------------------------------------
@pytest.fixture
def offline(monkeypatch):
    """No network: any connection attempt fails the test."""
    def refuse(*args, **kwargs):
        raise AssertionError("the plan tried to use the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def test_plan_paper_vision_offline(offline, tmp_path):
    plan = plan_suite("paper-vision", "full", tmp_path / "empty")
    c = plan.counts()
    # runs by hand: TaLoS and LoTA 8 tasks × 11 sparsities, L-LoRA 8 × 7 ranks, non-linear and linearized FT 8 each;
    # every other step (variants at k = 0.9, the chosen runs, the ablation) reuses them
    assert c["finetune_runs"] == 88 + 88 + 56 + 8 + 8 == 248
    assert c["iterations_to_run"] == 248 * 2000
    assert c["finetune_runs_in_store"] == 0 and c["steps_done"] == 0
    # steps by hand: per method 8 analyses + 2 ξ pairs (+ selection); variants 5 each for TaLoS and LoTA;
    # masks comparison, 2 sharing, 4 post-hoc, ablation, comparison
    assert c["steps"] == (10 + 1) * 3 + 10 * 2 + 5 * 2 + 1 + 2 + 4 + 1 + 1 == 72
    by = {s.label: s for s in plan.steps}
    assert by["talos: fine-tune + single"].needs == ("talos: selection (sparsity)",)
    assert by["talos: fine-tune + single"].chosen_by == "talos: selection (sparsity)"
    assert by["talos-k0.9: single"].needs == ("talos: selection (sparsity)",)  # k = 0.9 is one of the candidates
    assert by["ties: post-hoc addition + negation"].needs == ("nonlinear: fine-tune + single",)
    assert set(by["talos vs lota masks"].needs) == {"talos: selection (sparsity)", "lota: selection (sparsity)"}
    assert len(by["talos sparsity ablation"].runs) == 88 and not by["talos sparsity ablation"].trains
    assert len(by["comparison"].needs) == 71
    assert ("comparison", "talos: selection (sparsity)") in plan.edges
    # cost by hand from the H100 cells (s/iter): 176,000 × .032 + 16,000 × .047 + 16,000 × .126 + 112,000 × .155
    # + 176,000 × .047 seconds
    hours = (176000 * .032 + 16000 * .047 + 16000 * .126 + 112000 * .155 + 176000 * .047) / 3600
    assert plan.cost["hours"] == pytest.approx(hours) and plan.cost["unmeasured_runs"] == 0
    text = plan.text()
    assert "248 (0 in the store, 248 to train: 496,000 iterations)" in text
    assert f"{hours:.2f} device-hours" in text and "plan_costs.json" in text
    assert not (tmp_path / "empty").exists()  # nothing written


def test_plan_paper_nlp_and_models_offline(offline, tmp_path, capsys):
    plan = plan_suite("paper-nlp", "full", None)
    c = plan.counts()
    assert c["finetune_runs"] == 77 + 77 + 49 + 7 + 7 == 217
    assert c["iterations_to_run"] == 217 * 75000  # early stopping: a maximum
    assert plan.cost["hours"] == 0 and plan.cost["unmeasured_runs"] == 217  # T5 has no measured cell
    assert "not measured" in plan.text() and "a maximum" in plan.text()
    large = plan_suite("paper-vision", "full", None, model="clip-vit-l-14")
    assert large.model == "clip-vit-l-14" and large.counts()["finetune_runs"] == 248
    nl = next(g for g in large.cost["groups"] if g["method"] == "nonlinear")
    assert nl["s_per_iter"] == 0.227 and large.cost["unmeasured_runs"] == 240
    assert main(["suite", "paper-nlp", "--plan", "--model", "t5-small", "--store", str(tmp_path / "s")]) == 0
    out = capsys.readouterr().out
    assert "model t5-small" in out and "fine-tuning runs: 217" in out and "micro_batch_size 256" in out
    assert not (tmp_path / "s").exists()  # the plan writes nothing


def test_shipped_scales_keep_their_fingerprint():
    """Fine-tuning fields at their defaults stay out of a suite record's settings (resume of old records works)."""
    from dataclasses import MISSING, asdict, fields

    from talos_core.suites.specs import Scale

    default = {f.name: f.default for f in fields(Scale) if f.default is not MISSING}
    # fields added since the first suite records: out of it at their defaults, so an old record still resumes
    optional = {"weight_decay", "warmup_steps", "grad_clip", "schedule", "micro_batch_size", "eval_every",
                "early_stopping_patience", "micro_batch_by_model", "examples", "lr_rows", "batching",
                "budget_patience", "lr_choose", "one_rate_rows", "alpha_rule", "alpha_extend"}
    for name in ("text", "vision", "tiny"):
        for scale, sc in get_suite(name).scales.items():
            # the lr check: part of the fingerprint only where it chooses the learning rate (it then sets every run)
            check = set() if sc.lr_choose else {"lr_check", "lr_check_tasks"}
            assert sc.settings_dict() == {k: v for k, v in asdict(sc).items()
                                          if k not in check and not (k in optional and v == default[k])}
            # the converged scales run to a maximum with validation and early stopping; text `full` groups its
            # batches by length; the mini scales pin no fine-tuning setting
            expected = {}
            if sc.lr_choose:
                expected = {"eval_every": sc.eval_every, "early_stopping_patience": sc.early_stopping_patience}
            if (name, scale) == ("text", "full"):
                expected["batching"] = "length"
            assert sc.finetune_settings() == expected, (name, scale)
    assert get_suite("paper-nlp").scales["full"].settings_dict()["early_stopping_patience"] == 5


def test_full_scales_train_every_run_to_its_maximum_with_early_stopping(tmp_path):
    """The converged protocol: no learning-curve step; every fine-tuning run of text and vision `full` (lr checks,
    selection candidates, rows, variants, the one-rate row, the ablation) trains up to 2,000 steps with validation
    every 50 steps, patience 5 and the best evaluation's weights, at the rate its method's lr check chose."""
    from talos_core.store import Store

    for name in ("text", "vision"):
        spec = get_suite(name)
        sc = spec.scales["full"]
        assert sc.steps == 2000 and sc.max_val == 500 and sc.curve_steps is None
        assert (sc.eval_every, sc.early_stopping_patience) == (50, 5)
        store = Store(tmp_path / name)
        for m in spec.methods:  # what the lr checks chose (a hand-made store)
            store.write_result("lr_check", f"{name}__{spec.model}__{m}", {"best_lr": 1e-3, "chooses": True})
        steps = suite_steps(spec, "full", list(spec.methods), list(spec.posthoc), seed=0, device="cpu")
        assert not [st for st in steps if st.protocol == "learning-curve"]
        seen = 0
        for st in steps:
            if st.protocol in ("comparison",) or (st.task_overrides is not None and st.protocol != "selection"):
                continue
            ov = st.resolve(store)[1]
            assert (ov["steps"], ov["eval_every"], ov["early_stopping_patience"], ov["max_val"]) == (2000, 50, 5, 500)
            assert st.protocol == "lr-check" or ov["lr"] == 1e-3, st.label
            seen += 1
        assert seen > 30


def test_cost_table():
    assert arch("clip-vit-l-14-random") == "clip-vit-l-14" and arch("t5:t5-small") == "t5-small"
    assert cell("clip-vit-b-32-random", "llora", "h100", 128)["s_per_iter"] == 0.155
    assert cell("clip-vit-b-32", "talos", "h100", 64) is None  # a batch size without a measurement
    assert cell("minilm-l6", "talos", "h100-shared", 32)["s_per_iter"] == 0.0512
    from talos_core.suites.plan import PlannedRun

    runs = [PlannedRun("a", "clip-vit-b-32", "dtd", "talos", 100, 128),
            PlannedRun("b", "clip-vit-b-32", "dtd", "talos", 300, 128),
            PlannedRun("c", "t5-base", "rte", "talos", 10, 1024)]
    est = estimate(runs, "h100")
    assert est["hours"] == pytest.approx(400 * 0.032 / 3600) and est["unmeasured_runs"] == 1
    later = [PlannedRun("d", "clip-vit-b-32", "dtd", "talos", None, 128, max_steps=2000),
             PlannedRun("e", "clip-vit-b-32", "dtd", "nonlinear", None, 128)]  # no bound: not priced
    est = estimate(later, "h100")
    assert est["max_hours"] == pytest.approx(2000 * 0.032 / 3600) and est["hours"] == 0
    assert est["unmeasured_runs"] == 1
    table = __import__("talos_core.suites.costs", fromlist=["table"]).table()
    for c in table["cells"]:
        assert c["s_per_iter"] > 0 and c["source"] and c["device"] in table["devices"]
    # the text suite's full scale is priced on both CPU kinds it ran on, for every method it trains
    for device in ("cpu-2core", "cpu-2core-xeon"):
        assert all(cell("minilm-l6", m, device, 32) for m in ("talos", "nonlinear", "linearized", "llora", "lota"))


def test_plan_prices_with_the_cpu_it_runs_on(monkeypatch, capsys, tmp_path):
    """``--plan`` detects this machine's CPU model and prices with the cells measured on it, and says so; a CPU no
    cell was measured on is priced with cpu-2core's cells, saying that too; ``--jobs`` sets the workers of the wall
    time."""
    from talos_core.cli import main
    from talos_core.suites import costs

    assert costs.cpu_device("AMD EPYC 7B13") == "cpu-2core"
    assert costs.cpu_device("Intel(R) Xeon(R) Platinum 8480+") == "cpu-2core-xeon"
    assert costs.cpu_device("Apple M2") is None
    assert costs.cpu_model()  # this machine's, from /proc/cpuinfo or lscpu
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    for name, device, said in (("Intel(R) Xeon(R) Processor", "cpu-2core-xeon", "detected: this machine's CPU is "
                                                                                 "Intel(R) Xeon(R) Processor"),
                               ("Apple M2", "cpu-2core", "no cells measured on this machine's CPU (Apple M2): "
                                                         "priced with another CPU's")):
        monkeypatch.setattr(costs, "cpu_model", lambda name=name: name)
        assert costs.detect_device() == (device, said)
        assert main(["suite", "tiny", "--scale", "mini", "--plan", "--store", str(tmp_path / "s"), "--jobs", "3"]) == 0
        out = capsys.readouterr().out
        assert f"(device '{device}'; {said})" in out and "wall time with 3 workers" in out
    assert main(["suite", "tiny", "--plan", "--plan-device", "h100", "--store", str(tmp_path / "s")]) == 0
    assert "(device 'h100'; given with --plan-device)" in capsys.readouterr().out
    assert not (tmp_path / "s").exists()


def test_plan_schedules_the_units_on_its_workers(tmp_path):
    """The wall time: the step graph's units (each fine-tuning run, each step's evaluation) on N workers, in table
    order as the processes executor takes them: never less than the longest chain or worker-hours / N, never more
    than worker-hours."""
    plans = {n: plan_suite("tiny", "paper", tmp_path, device="cpu-2core", workers=n) for n in (1, 2, 8)}
    one, two, many = (plans[n].cost["schedule"] for n in (1, 2, 8))
    assert one["wall_hours"] == pytest.approx(one["worker_hours"]) == pytest.approx(two["worker_hours"])
    for s, n in ((two, 2), (many, 8)):
        assert max(s["critical_hours"], s["worker_hours"] / n) - 1e-9 <= s["wall_hours"] <= s["worker_hours"] + 1e-9
    assert many["wall_hours"] <= two["wall_hours"] <= one["wall_hours"]
    assert "wall time with 2 workers" in plans[2].text()


def test_plan_projects_where_this_stores_runs_stopped(tmp_path):
    """Beside the bound (every run to its maximum), ``--plan`` prices each run that stops early at the share of its
    maximum where the store's early-stopped runs of its method stopped (their median), else every method's: a known
    answer on constructed manifests; a share of 1 gives the bound back, and a method without a share of its own keeps
    its bound when no ``"*"`` is given."""
    import json

    from talos_core.suites import plan as P
    from talos_core.suites.workload import load_sizes, plan_views

    store = Store(tmp_path / "s")
    store.ensure()
    for i, (method, ran, most, patience) in enumerate((("talos", 2, 8, 5), ("talos", 4, 8, 5), ("talos", 8, 8, 5),
                                                       ("nonlinear", 6, 8, 5), ("nonlinear", 3, 8, 0),
                                                       ("talos", 1, 8, 5))):
        folder = store.root / "runs" / f"r{i}"
        folder.mkdir(parents=True)
        model = "tiny-text" if i < 5 else "other-model"  # another model's runs say nothing of this one's
        (folder / "manifest.json").write_text(json.dumps({
            "model": model, "method": method, "timings": {"steps_run": ran},
            "config": {"train": {"steps": most, "early_stopping_patience": patience}}}))
    for i, junk in enumerate(("[1, 2]", "{garbled", json.dumps({"model": "tiny-text", "config": [],
                                                                 "timings": {"steps_run": True}}))):
        (store.root / "runs" / f"junk{i}").mkdir()
        (store.root / "runs" / f"junk{i}" / "manifest.json").write_text(junk)  # skipped, never an error
    assert P.stop_fractions(store, "tiny-text") == {"talos": (0.5, 3), "nonlinear": (0.75, 1), "*": (0.625, 4)}
    assert P.stop_fractions(Store(tmp_path / "empty"), "tiny-text") == {}

    spec = get_suite("tiny")
    kw = dict(methods=["talos", "nonlinear"], posthoc=[])
    plan = plan_suite("tiny", "paper", store, device="cpu-2core", **kw)
    proj, bound = plan.cost["projected"], plan.cost["schedule"]
    assert proj["shares"] == {"nonlinear": {"share": 0.75, "runs": 1, "own": True},
                              "talos": {"share": 0.5, "runs": 3, "own": True}}
    assert proj["worker_hours"] < bound["worker_hours"] and proj["wall_hours"] <= bound["wall_hours"]
    assert "talos 0.50 (median of 3 runs of its own)" in plan.text()

    steps = suite_steps(spec, "paper", kw["methods"], [], seed=0, device="auto")
    views = plan_views(plan, steps, spec.control_task)
    sizes = load_sizes([*spec.tasks, spec.control_task], spec.scales["paper"].max_val,
                       spec.scales["paper"].max_test)[0]
    full, _ = P.unit_seconds(plan, steps, views, sizes)
    same, _ = P.unit_seconds(plan, steps, views, sizes, {"*": (1.0, 9)})
    half, _ = P.unit_seconds(plan, steps, views, sizes, {"talos": (0.5, 3)})
    assert same == pytest.approx(full)
    trained = [u for u in full if " [" in u]
    assert any("__talos__" in u for u in trained) and any("__nonlinear__" in u for u in trained)
    for unit in trained:
        if "__talos__" in unit:
            assert half[unit] < full[unit]
        else:
            assert half[unit] == pytest.approx(full[unit])
    assert {u: half[u] for u in full if u not in trained} == pytest.approx({u: full[u] for u in full
                                                                             if u not in trained})


def test_plan_projects_the_forward_passes_the_logits_cache_served(tmp_path, monkeypatch):
    """``cache_shares`` pools, per protocol, the share of edited forward passes the store's done steps got from the
    logits cache (their recorded ``step_work``), and ``unit_seconds`` prices a step of that protocol's forward
    passes less it: known answers on a constructed suite record; a share of 0 gives the bound back; a step whose
    protocol has no done step keeps its bound."""
    import json

    from talos_core.suites import plan as P
    from talos_core.suites.workload import load_sizes, plan_views

    spec = get_suite("tiny")
    kw = dict(methods=["talos", "nonlinear"], posthoc=["ties"])
    steps = suite_steps(spec, "paper", kw["methods"], kw["posthoc"], seed=0, device="auto")
    label = {st.protocol: st.label for st in steps}
    store = Store(tmp_path / "s")
    store.ensure()
    (store.root / "results" / "suite").mkdir(parents=True)
    work = {label["posthoc"]: {"forward": 300, "cached": 100}, label["negation"]: {"forward": 10, "cached": 0},
            "a step of another table": {"forward": 0, "cached": 50}, label["addition"]: {"forward": "x", "cached": 1}}
    record = {"model": spec.model, "scale": "paper", "step_work": work}
    (store.root / "results" / "suite" / "tiny.json").write_text(json.dumps(record))
    assert P.cache_shares(work, steps) == {"posthoc": (0.25, 1), "negation": (0.0, 1)}
    assert P.cache_shares({}, steps) == {}
    # read through the plan's listing, as --resume reads the record: only a record of the same settings counts
    assert P.listing(store, "tiny", {"model": spec.model, "scale": "paper"}).step_work == work
    assert P.listing(store, "tiny", {"model": spec.model, "scale": "mini"}).step_work == {}

    import talos_core.suites.costs as costs

    cell = {"s_per_example": 0.01, "ref": "test", "source": "test"}  # tiny-text's evaluation is not measured
    monkeypatch.setattr(costs, "eval_cell", lambda model, device, kind: cell)
    plan = plan_suite("tiny", "paper", None, device="cpu-2core", **kw)
    views = plan_views(plan, steps, spec.control_task)
    sizes = load_sizes([*spec.tasks, spec.control_task], spec.scales["paper"].max_val,
                       spec.scales["paper"].max_test)[0]
    full, _ = P.unit_seconds(plan, steps, views, sizes)
    none, _ = P.unit_seconds(plan, steps, views, sizes, cache={"posthoc": (0.0, 1)})
    quarter, _ = P.unit_seconds(plan, steps, views, sizes, cache={"posthoc": (0.25, 1)})
    assert none == pytest.approx(full)
    ph = label["posthoc"]
    assert 0 < quarter[ph] < full[ph]
    assert {u: quarter[u] for u in full if u != ph} == pytest.approx({u: full[u] for u in full if u != ph})

    projected = plan_suite("tiny", "paper", store, device="cpu-2core", **kw)
    assert projected.cost["projected"]["cache"] == {"negation": {"share": 0.0, "steps": 1},
                                                    "posthoc": {"share": 0.25, "steps": 1}}
    assert "logits cache served in this store's done steps of its protocol (negation 0.00 (1 step), posthoc 0.25 " \
           "(1 step))" in projected.text()


def test_plan_check_leaves_out_the_other_machines_steps(tmp_path, monkeypatch):
    """``bench.bench_plan_check --skip-device cuda`` (a suite run in parts on a GPU and a CPU): the steps the record's
    cuda sessions ran are done for the plan and absent from the measured step times; the CPU's are priced and
    measured. Known answers on a constructed record of the tiny suite."""
    import json

    import talos_core.suites.costs as costs
    from bench.bench_plan_check import check, markdown, steps_run_on

    spec = get_suite("tiny")
    methods, posthoc = ["talos", "nonlinear"], ["ties"]
    steps = suite_steps(spec, "paper", methods, posthoc, seed=0, device="auto")
    gpu = [st.label for st in steps if st.method == "talos" and st.label != "comparison"]
    cpu = [st.label for st in steps if st.method == "nonlinear"][:2]
    store = Store(tmp_path / "s")
    store.ensure()
    (store.root / "results" / "suite").mkdir(parents=True)
    record = {"model": spec.model, "scale": "paper", "methods": methods, "posthoc": posthoc, "seed": 0,
              "step_times_s": {**{label: 36.0 for label in gpu}, **{label: 360.0 for label in cpu}},
              "sessions": [{"device": "cuda", "steps_run": [*gpu, "comparison"]},
                           {"device": "cpu", "steps_run": [*cpu, "comparison"]}]}
    (store.root / "results" / "suite" / "tiny.json").write_text(json.dumps(record))
    assert steps_run_on(record, "cuda") == frozenset(gpu)
    cell = {"s_per_example": 0.01, "ref": "test", "source": "test"}  # tiny-text's evaluation is not measured
    monkeypatch.setattr(costs, "eval_cell", lambda model, device, kind: cell)
    whole, part = check(store.root, "tiny", "cpu-2core"), check(store.root, "tiny", "cpu-2core", "cuda")
    assert whole["measured_worker_hours"] == pytest.approx((36 * len(gpu) + 360 * len(cpu)) / 3600)
    assert part["measured_worker_hours"] == pytest.approx(360 * len(cpu) / 3600)
    assert part["skipped"] == {"device": "cuda", "steps": sorted(gpu)}
    for kind in ("without_cache", "with_cache"):
        assert 0 < part["projected"][kind]["worker_hours"] < whole["projected"][kind]["worker_hours"]
    assert f"the {len(gpu)} steps its sessions on `cuda` ran" in markdown(part, None)


@pytest.mark.slow
def test_plan_sees_what_the_store_has(tmp_path):
    """The tiny suite's plan before and after running it: every run and step is then in the store."""
    from talos_core.suites import run_suite

    store = tmp_path / "s"
    kw = dict(methods=["talos", "nonlinear"], posthoc=["ties"])
    before = plan_suite("tiny", "mini", store, device="cpu-2core", **kw)
    n = before.counts()["finetune_runs"]
    assert n == 2 * 3 + 3 * 1  # talos at k 0.9 and 0.5 (ablation), non-linear FT; 3 tasks
    assert before.counts()["finetune_runs_in_store"] == 0
    assert before.cost["unmeasured_runs"] == 0 and before.cost["hours"] > 0  # tiny-text cells (CPU, batch 8)
    run_suite("tiny", store, scale="mini", log=lambda s: None, **kw)
    after = plan_suite("tiny", "mini", store, device="cpu-2core", **kw)
    c = after.counts()
    assert c["finetune_runs"] == n and c["finetune_runs_in_store"] == n and c["steps_done"] == c["steps"]
    assert after.cost["hours"] == 0 and "0 to train" in after.text()
    assert [s.label for s in after.steps] == [s.label for s in before.steps]


def test_plan_lists_the_work_interrupted_runs_kept(tmp_path):
    """``--plan`` names what ``--resume`` will continue: run checkpoints (their step) and the finished parts of
    long evaluation steps; an unreadable checkpoint says it will be discarded."""
    from talos_core.atomic import atomic_write_json
    from talos_core.evaluation.progress import Progress

    store = Store(tmp_path / "s")
    store.ensure()
    atomic_write_json(store.checkpoint_dir("tiny-text__tweets__talos__0123456789") / "checkpoint.json", {"step": 50})
    (store.checkpoint_dir("tiny-text__tweets__lota__0123456789") / "checkpoint.json").write_text("{garbled")
    grid = Progress(store.progress_path("disentanglement", "tiny__tiny-text__talos__a__b"), {"runs": ["x", "y"]})
    grid.put("row 0", [0.0])
    grid.put("row 1", [0.5])
    plan = plan_suite("tiny", "mini", store, device="cpu-2core", methods=["talos"], posthoc=[])
    text = plan.text()
    assert "kept from interrupted runs (--resume continues from here):" in text
    assert "  run tiny-text__tweets__talos__0123456789: step 50" in text
    assert "  run tiny-text__tweets__lota__0123456789: unreadable (it will be discarded)" in text
    assert "  disentanglement tiny__tiny-text__talos__a__b: 2 finished parts" in text
    assert plan.to_dict()["kept"] == store.kept_work() and len(store.kept_work()) == 3
    assert "kept from" not in plan_suite("tiny", "mini", tmp_path / "empty", device="cpu-2core").text()


def test_plan_of_a_learning_curve_suite_waits_for_budgets(tmp_path):
    """Under the learning-curve protocol (kept for other scales: tiny's curves scale) runs wait for their budget:
    counted, not priced."""
    from tiny_text import with_curves_scale

    plan = plan_suite(with_curves_scale(get_suite("tiny")), "curves", tmp_path, methods=["talos"], posthoc=[],
                      device="cpu-2core")
    by = {s.label: s for s in plan.steps}
    assert by["talos: selection (sparsity)"].needs == ("talos: learning curve",)
    assert len(by["talos: learning curve"].trains) == 3
    unknown = [r for r in plan.runs.values() if r.steps is None]
    # the selection's 2 candidates × 3 tasks wait for the curve's budget, and the lr check's 2 runs at its other lr
    # (its runs at the suite's lr are the selection's k = 0.9 candidates)
    assert len(unknown) == 3 * 2 + 2 and {r.max_steps for r in unknown} == {6}  # the curves' length
    # priced at that length, an upper bound, beside the runs whose steps are known
    assert plan.cost["unmeasured_runs"] == 0
    assert plan.cost["max_hours"] == pytest.approx(8 * 6 * 0.6801 / 3600)
    assert "at most" in plan.text() and "learning curve chooses" in plan.text()


def test_plan_of_the_converged_protocol_waits_for_the_lr_checks(tmp_path):
    """Under the converged protocol (tiny, scale paper) every run's length is known (its maximum, early stopping ends
    it sooner); the steps after a method's lr check wait for it, and TaLoS at the dense baseline's rate is planned as
    if the two checks disagree (its larger cost)."""
    plan = plan_suite("tiny", "paper", tmp_path, methods=["talos", "nonlinear"], posthoc=["ties"],
                      device="cpu-2core")
    by = {s.label: s for s in plan.steps}
    assert by["talos: lr check"].needs == () and by["talos: selection (sparsity)"].needs == ("talos: lr check",)
    assert "nonlinear: lr check" in by["ties: post-hoc addition + negation"].needs
    assert {"nonlinear: lr check", "talos: lr check"} <= set(by["talos-k0.9 at nonlinear's lr: single"].needs)
    assert all(r.steps == 8 and r.early_stopping for r in plan.runs.values())
    assert plan.cost["max_hours"] == 0 and plan.cost["unmeasured_runs"] == 0
    # lr check 2 × 2 and selection 2 × 3 (its 2 k = 0.9 runs at TaLoS's rate are the check's), nonlinear's check
    # 2 × 2 and its third task, TaLoS at nonlinear's rate on the third task (the check trained the other two)
    assert len(plan.runs) == 4 + 4 + 4 + 1 + 1
    assert "a maximum: early stopping ends runs sooner" in plan.text()
    assert "lr chosen per method by its lr check among 0.001, 0.03" in plan.text()


def test_all_registered_suites_plan_offline(offline):
    for name, spec in SUITES.items():
        for scale in spec.scales:
            assert plan_suite(name, scale, None).steps


def test_text_full_meets_the_shipping_floors():
    """text `full` evaluates at least 400 test examples per task (fewer only where the data has fewer), a 21-point α
    grid and 20×20 ξ grids on at least 128 points per task; runs may train at least 200 steps."""
    from talos_core.evaluation.arithmetic import alpha_grid
    from talos_core.suites.workload import load_sizes

    spec = get_suite("text")
    sc = spec.scales["full"]
    assert sc.max_test >= 400 and sc.xi_grid == 20 and sc.xi_points >= 128 and sc.steps >= 200
    assert len(alpha_grid(None, step=sc.alpha_step)) == 21 == len(alpha_grid(0.9, sparse=True, step=sc.alpha_step))
    sizes, why = load_sizes([*spec.tasks, spec.control_task], sc.max_val, sc.max_test)
    assert why is None
    unlimited, _ = load_sizes([*spec.tasks, spec.control_task], sc.max_val, None)
    for task, n in sizes.test.items():
        assert n == min(sc.max_test, unlimited.test[task]) and n >= min(400, unlimited.test[task]), task
        assert n >= sc.xi_points, task  # every ξ point a distinct test example
