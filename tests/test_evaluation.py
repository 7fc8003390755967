"""Evaluation protocols: known-answer checks on tiny models and a tiny store.

A session fixture fine-tunes two tiny-text TaLoS runs (and two non-linear runs for cross-method
IoU) into a temporary store; everything else reuses them. Torch runs single-threaded here: on a
shared 2-core machine, two threads per process are several times slower.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pandas as pd
import pytest
import torch
from tiny_text import CONTROL, MODEL, OVERRIDES, TASKS
from torch import nn

from talos_core.errors import TalosError
from talos_core.evaluation import arithmetic as arith
from talos_core.evaluation.context import EvalContext, subset
from talos_core.evaluation.disentanglement import disentanglement_alphas, disentanglement_error
from talos_core.evaluation.linearization import linearization_table
from talos_core.evaluation.localization import function_localization
from talos_core.evaluation.maskstats import (
    block_indices,
    classify_layer,
    cross_method_iou,
    layer_info,
    mask_iou,
    mask_iou_matrix,
    mask_table,
)
from talos_core.evaluation.preview import build_preview, save_preview
from talos_core.evaluation.protocols import (
    AdditionSettings,
    DisentanglementSettings,
    MaskSettings,
    NegationSettings,
    PreviewSettings,
    evaluate,
)
from talos_core.evaluation.sharing import low_sensitivity_mask, sharing_edit, sharing_matrix
from talos_core.models.base import TaskModel
from talos_core.result_arrays import PreviewCache, load_preview, preview_accuracy, preview_logits
from talos_core.schema import result_name
from talos_core.store import Store
from talos_core.tasks.base import Split, TaskData, TaskSpec
from talos_core.vectors import TaskVector, apply_vectors

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="session")
def store(tmp_path_factory) -> Store:
    """Two TaLoS and two non-linear tiny-text runs, fine-tuned once."""
    from talos_core.evaluation.runs import resolve_runs

    st = Store(tmp_path_factory.mktemp("eval-store"))
    torch.set_num_threads(1)
    resolve_runs(st, MODEL, TASKS, "talos", overrides=OVERRIDES)
    resolve_runs(st, MODEL, TASKS, "nonlinear", overrides=OVERRIDES)
    return st


@pytest.fixture(scope="module")
def runs(store):
    from talos_core.evaluation.runs import resolve_runs

    return resolve_runs(store, MODEL, TASKS, "talos", overrides=OVERRIDES, train=False)


@pytest.fixture(scope="module")
def ctx(store) -> EvalContext:
    return EvalContext.for_model(MODEL, [*TASKS, CONTROL], max_val=32, max_test=64)


def _snapshot(model: nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def _assert_same(model: nn.Module, snap: dict[str, torch.Tensor]) -> None:
    now = dict(model.named_parameters())
    assert set(now) == set(snap)
    bad = [n for n in snap if not torch.equal(now[n].detach(), snap[n])]
    assert not bad, f"parameters changed: {bad[:3]}"


def _random_vector(model: nn.Module, names: list[str], scale: float, seed: int) -> TaskVector:
    g = torch.Generator().manual_seed(seed)
    params = dict(model.named_parameters())
    return TaskVector.from_dense({n: torch.randn(params[n].shape, generator=g) * scale for n in names})


# --------------------------------------------------------------------------------------------
# a model that is exactly linear in θ: the linearized preview must equal the exact model
# --------------------------------------------------------------------------------------------
class LinearTaskModel(TaskModel):
    """logits = head @ (W x + b): linear in θ = (W, b), so f_lin == f for every θ."""

    family = "linear-test"
    modality = "image"

    def __init__(self, d: int = 8, h: int = 6) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.proj = nn.Linear(d, h)
        self.h = h

    def prepare(self, inputs, task=None):
        return {"x": torch.as_tensor(np.asarray(inputs), dtype=torch.float32)}

    def build_head(self, task):
        g = torch.Generator().manual_seed(sum(map(ord, task.name)))
        return {"weight": torch.randn(task.num_classes, self.h, generator=g)}

    def forward(self, x):
        return self.proj(x) @ self.head_weight.T


def _linear_ctx(n_tasks: int = 2, n: int = 48) -> EvalContext:
    model = LinearTaskModel()
    rng = np.random.default_rng(0)
    specs, data, heads = {}, {}, {}
    for k in range(n_tasks):
        name = f"lin{k}"
        spec = TaskSpec(name, "image", tuple(f"c{i}" for i in range(3 + k)), ("{}",), "synthetic", loader=None,
                        source="synthetic")
        splits = [Split(rng.normal(size=(n, 8)).astype(np.float32), rng.integers(0, spec.num_classes, n))
                  for _ in range(3)]
        specs[name], data[name], heads[name] = spec, TaskData(*splits), model.build_head(spec)
    return EvalContext(model, specs, data, heads, model_name="linear")


# --------------------------------------------------------------------------------------------
# pure helpers
# --------------------------------------------------------------------------------------------
def test_alpha_grid_paper_and_sparse():
    g = arith.alpha_grid()
    assert len(g) == 21 and g[0] == 0.0 and g[-1] == 1.0 and g[1] == 0.05
    s = arith.alpha_grid(0.9, sparse=True)
    assert len(s) == 21 and s[-1] == pytest.approx(10.0) and s[1] == pytest.approx(0.5)
    assert arith.alpha_grid(0.9, sparse=False) == g
    assert disentanglement_alphas(20, 3.0)[0] == -3.0 and len(disentanglement_alphas(20, 3.0)) == 20
    with pytest.raises(TalosError, match="grid"):
        disentanglement_alphas(0)


def _fake_runs(sparsities: dict, sparse: bool = True) -> dict:
    from types import SimpleNamespace

    return {t: SimpleNamespace(manifest=SimpleNamespace(sparse_method=sparse, sparsity=k if sparse else None))
            for t, k in sparsities.items()}


def test_run_alpha_grid_mixed_sparsities_is_the_union_of_the_tasks_grids():
    from talos_core.evaluation.runs import run_alpha_grid, run_sparsities, task_alpha_grids

    same = _fake_runs({"a": 0.9, "b": 0.9})
    assert run_alpha_grid(same, 0.25) == ([0.0, 2.5, 5.0, 7.5, 10.0], 0.9)
    assert run_alpha_grid(_fake_runs({"a": None, "b": None}, sparse=False), 0.5) == ([0.0, 0.5, 1.0], None)
    mixed = _fake_runs({"a": 0.5, "b": 0.9, "c": 0.5})
    alphas, sparsity = run_alpha_grid(mixed, 0.25)
    assert sparsity is None and alphas == [0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 5.0, 7.5, 10.0]
    assert set(arith.alpha_grid(0.5, sparse=True, step=0.25)) <= set(alphas)  # every task's own grid is in it
    assert alphas[-1] == arith.alpha_grid(0.9, sparse=True, step=0.25)[-1]  # reaching 1/(1 - k_max)
    assert task_alpha_grids(mixed, 0.25) == {"a": [0.0, 0.5, 1.0, 1.5, 2.0], "b": [0.0, 2.5, 5.0, 7.5, 10.0],
                                             "c": [0.0, 0.5, 1.0, 1.5, 2.0]}
    assert run_sparsities(mixed) == {"a": 0.5, "b": 0.9, "c": 0.5}
    with pytest.raises(TalosError, match="mix sparse and dense"):
        run_alpha_grid({**same, "d": _fake_runs({"d": None}, sparse=False)["d"]})


def test_unit_alpha_rule_spreads_every_method_over_zero_to_one():
    """The official code's grid (0…1 for every method) as an ablation of the paper's stretched one."""
    from talos_core.evaluation.protocols import AdditionSettings, NegationSettings
    from talos_core.evaluation.runs import run_alpha_grid, task_alpha_grids

    mixed = _fake_runs({"a": 0.5, "b": 0.9})
    assert run_alpha_grid(mixed, 0.25, "unit") == ([0.0, 0.25, 0.5, 0.75, 1.0], None)
    assert run_alpha_grid(_fake_runs({"a": 0.9}), 0.25, "unit") == ([0.0, 0.25, 0.5, 0.75, 1.0], 0.9)
    assert task_alpha_grids(mixed, 0.5, "unit") == {"a": [0.0, 0.5, 1.0], "b": [0.0, 0.5, 1.0]}
    assert run_alpha_grid(mixed, 0.25, "paper") == run_alpha_grid(mixed, 0.25)
    for bad in ("stretched", None, 1):
        with pytest.raises(TalosError, match=r"alpha rule must be one of paper, unit, union, got"):
            run_alpha_grid(mixed, 0.25, bad)
        with pytest.raises(TalosError, match=r"alpha rule must be one of paper, unit, union"):
            AdditionSettings(alpha_rule=bad)
        with pytest.raises(TalosError, match=r"alpha rule must be one of paper, unit, union"):
            NegationSettings(alpha_rule=bad)


def test_union_alpha_rule_keeps_the_unit_grids_resolution_and_the_stretched_grids_reach():
    """The `full` scales' grid: a sparse run searches the 0…1 grid and its 1/(1 − k) stretch together, so no
    choice falls on the first non-zero point of a grid stepping by step/(1 − k); dense runs keep 0…1."""
    from talos_core.evaluation.runs import run_alpha_grid, task_alpha_grids

    grid, k = run_alpha_grid(_fake_runs({"a": 0.9}), 0.25, "union")
    assert k == 0.9 and grid == [0.0, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0]
    mixed = _fake_runs({"a": 0.5, "b": 0.9})
    assert set(run_alpha_grid(mixed, 0.25, "union")[0]) == {0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 5.0, 7.5, 10.0}
    assert task_alpha_grids(mixed, 0.5, "union") == {"a": [0.0, 0.5, 1.0, 2.0], "b": [0.0, 0.5, 1.0, 5.0, 10.0]}
    dense = _fake_runs({"d": None}, sparse=False)
    assert run_alpha_grid(dense, 0.5, "union") == run_alpha_grid(dense, 0.5, "paper") == ([0.0, 0.5, 1.0], None)


def test_task_negation_with_a_grid_per_target():
    ctx = _linear_ctx(n_tasks=3)
    vecs = {t: _random_vector(ctx.model, ["proj.weight"], 0.5, seed=i) for i, t in enumerate(["lin0", "lin1"])}
    grids = {"lin0": [0.0, 0.5, 1.0], "lin1": [0.0, 2.0, 4.0, 6.0]}
    res = arith.task_negation(ctx, vecs, "lin2", grids)
    for t, g in grids.items():
        for split in ("val", "test"):
            part = res.table[(res.table.target == t) & (res.table.split == split)]
            assert part["alpha"].tolist() == g
        assert res.selected[t] in g
        alone = arith.task_negation(ctx, {t: vecs[t]}, "lin2", g)  # the same as negating it on its own grid
        assert alone.selected[t] == res.selected[t]
        assert np.allclose(alone.table["target_acc"], res.table[res.table.target == t]["target_acc"])
    assert res.alphas == [0.0, 0.5, 1.0, 2.0, 4.0, 6.0]
    assert arith.task_negation(ctx, vecs, "lin2", [0.0, 1.0]).alphas == [0.0, 1.0]


def test_a_choice_at_the_last_point_extends_the_grid_until_it_is_inside():
    """Every α search extends a grid whose last point it chooses, by the grid's top step, until the choice is
    inside the grid or the cap (extend × the grid's largest value) is reached; the numbers are those of a plain
    search on the extended grid, the result records the added points and ``extended``."""
    ctx = _linear_ctx(n_tasks=3)
    vecs = {t: _random_vector(ctx.model, ["proj.weight"], 2.0, seed=i) for i, t in enumerate(["lin0", "lin1"])}
    ref = arith.finetuned_accuracies(ctx, vecs, "nonlinear")
    grid = [0.0, 0.25, 0.5]
    add = arith.task_addition(ctx, vecs, ref, grid, extend=4.0)
    assert add.extended and add.alphas[:3] == grid and add.alphas == [0.0, 0.25, 0.5, 0.75]
    assert add.selected_alpha < add.alphas[-1]  # inside the grid now
    plain = arith.task_addition(ctx, vecs, ref, add.alphas)
    assert plain.selected_alpha == add.selected_alpha and not plain.extended
    pd.testing.assert_frame_equal(plain.table, add.table)
    assert add.extra()["extended"] is True and add.extra()["alpha_extend"] == 4.0
    assert "extended" not in plain.extra()  # results of searches that do not extend stay as they were
    capped = arith.task_addition(ctx, vecs, ref, grid, extend=1.0)  # the cap: the grid's own largest value
    assert capped.alphas == grid and capped.selected_alpha == 0.5 and not capped.extended

    neg = arith.task_negation(ctx, vecs, "lin2", grid, extend=4.0, threshold=0.0)
    assert neg.extended == {"lin0": False, "lin1": True} and neg.grids["lin1"] == [0.0, 0.25, 0.5, 0.75]
    assert neg.grids["lin0"] == grid and neg.mixed and neg.alphas == [0.0, 0.25, 0.5, 0.75]
    assert neg.selected["lin1"] < 0.75
    again = arith.task_negation(ctx, vecs, "lin2", neg.grids, threshold=0.0)
    assert again.selected == neg.selected
    pd.testing.assert_frame_equal(again.table, neg.table)
    extra = neg.extra()
    assert extra["extended"] is True and extra["control_val_n"] == len(ctx.labels("lin2", "val")) == 48
    with pytest.raises(TalosError, match="alpha_extend must be 0"):
        arith.check_extend(0.5)


def test_layer_types_all_three_families():
    from talos_core.models import load_model

    expected = {
        "tiny-clip": {
            "visual.transformer.resblocks.1.attn.in_proj_weight": (1, "qkv"),
            "visual.transformer.resblocks.0.attn.out_proj.weight": (0, "attn_out"),
            "visual.transformer.resblocks.0.mlp.c_fc.weight": (0, "mlp_in"),
            "visual.transformer.resblocks.0.mlp.c_proj.weight": (0, "mlp_out"),
            "visual.transformer.resblocks.0.ln_1.weight": (0, "layernorm"),
            "visual.transformer.resblocks.0.mlp.c_fc.bias": (0, "bias"),
            "visual.conv1.weight": (-1, "conv"),
            "visual.positional_embedding": (-1, "embedding"),
            "visual.ln_post.bias": (-1, "layernorm"),
            "visual.proj": (-1, "other"),
        },
        "tiny-text": {
            "encoder.encoder.layer.1.attention.self.query.weight": (1, "q"),
            "encoder.encoder.layer.1.attention.self.key.weight": (1, "k"),
            "encoder.encoder.layer.1.attention.self.value.weight": (1, "v"),
            "encoder.encoder.layer.0.attention.output.dense.weight": (0, "attn_out"),
            "encoder.encoder.layer.0.intermediate.dense.weight": (0, "mlp_in"),
            "encoder.encoder.layer.0.output.dense.weight": (0, "mlp_out"),
            "encoder.encoder.layer.0.attention.output.LayerNorm.weight": (0, "layernorm"),
            "encoder.encoder.layer.0.output.dense.bias": (0, "bias"),
            "encoder.embeddings.word_embeddings.weight": (-1, "embedding"),
        },
        "tiny-t5": {
            "t5.encoder.block.0.layer.0.SelfAttention.q.weight": (0, "q"),
            "t5.encoder.block.1.layer.0.SelfAttention.o.weight": (1, "attn_out"),
            "t5.encoder.block.0.layer.1.DenseReluDense.wi.weight": (0, "mlp_in"),
            "t5.encoder.block.0.layer.1.DenseReluDense.wo.weight": (0, "mlp_out"),
            "t5.encoder.block.0.layer.0.layer_norm.weight": (0, "layernorm"),
            "t5.decoder.block.0.layer.1.EncDecAttention.k.weight": (2, "k"),
            "t5.decoder.block.1.layer.1.EncDecAttention.v.weight": (3, "v"),
            "t5.decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight": (2, "embedding"),
            "t5.decoder.final_layer_norm.weight": (-1, "layernorm"),
            "t5.shared.weight": (-1, "embedding"),
        },
    }
    for model_name, cases in expected.items():
        names = [n for n, _ in load_model(model_name).named_parameters()]
        blocks = block_indices(names)
        for name, (block, layer_type) in cases.items():
            assert name in names, name
            assert (blocks[name], classify_layer(name)) == (block, layer_type), name
        assert all(classify_layer(n) in ("q", "k", "v", "qkv", "attn_out", "mlp_in", "mlp_out", "layernorm",
                                         "bias", "conv", "embedding", "other") for n in names)
    assert layer_info("visual.transformer.resblocks.3.attn.in_proj_weight").index == 3


def test_mask_table_splits_fused_qkv_and_counts():
    name = "visual.transformer.resblocks.0.attn.in_proj_weight"
    m = torch.zeros(6, 2, dtype=torch.bool)
    m[0, 0] = True  # q third: 1 of 4
    m[4:] = True  # v third: 4 of 4
    table = mask_table({"t": {name: m, "visual.conv1.weight": torch.tensor([True, False])}})
    rows = table.set_index("param")
    assert list(table.columns) == ["task", "param", "block", "layer_type", "numel", "trainable", "density"]
    assert rows.loc[f"{name}[q]", "layer_type"] == "q" and rows.loc[f"{name}[q]", "density"] == 0.25
    assert rows.loc[f"{name}[k]", "trainable"] == 0 and rows.loc[f"{name}[v]", "density"] == 1.0
    assert rows.loc["visual.conv1.weight", "block"] == -1 and table["numel"].sum() == 14


def test_mask_iou_self_is_one_and_known_value():
    g = torch.Generator().manual_seed(0)
    a = {"w": torch.rand(10, 10, generator=g) > 0.5, "b": torch.rand(7, generator=g) > 0.3}
    assert mask_iou(a, a) == 1.0
    b = {"w": torch.zeros(10, 10, dtype=torch.bool), "b": a["b"]}
    assert mask_iou(a, b) == pytest.approx(int(a["b"].sum()) / int(a["w"].sum() + a["b"].sum()))
    tasks, mat = mask_iou_matrix({"x": a, "y": b})
    assert tasks == ["x", "y"] and np.allclose(np.diag(mat), 1) and mat[0, 1] == mat[1, 0]
    assert cross_method_iou({"x": a}, {"x": a})["iou"].tolist() == [1.0]


def test_negation_selection_respects_control_constraint():
    # the lowest target accuracy (alpha 1.0) breaks the control constraint: 0.70 < 0.95 * 0.80
    curve = pd.DataFrame({"alpha": [0.0, 0.5, 1.0], "target_acc": [0.9, 0.4, 0.1],
                          "control_acc": [0.80, 0.77, 0.70]})
    assert arith.select_negation_alpha(curve, 0.80) == 0.5
    assert arith.select_negation_alpha(curve, 0.80, threshold=0.5) == 1.0
    only_zero = curve.assign(control_acc=[0.80, 0.1, 0.1])
    assert arith.select_negation_alpha(only_zero, 0.80) == 0.0
    with pytest.raises(TalosError, match="control"):
        arith.select_negation_alpha(curve[curve.alpha > 0].assign(control_acc=0.1), 0.8)


def test_default_control_task_is_the_offline_text_control():
    assert arith.default_control_task(["drug-reviews"]) == "fortune-langs"


def test_preview_accuracy_pure_numpy_example():
    jvp = {("a", "a"): np.array([[1.0, 0], [0, 1], [1, 0]]), ("a", "b"): np.array([[0, 0], [0, 0], [0, 2.0]])}
    cache = PreviewCache(["a", "b"], ["a"], {"a": np.array([0, 1, 1])}, {"a": np.zeros((3, 2))}, jvp)
    assert preview_accuracy(cache, {"a": 1.0}) == {"a": pytest.approx(2 / 3)}
    assert preview_accuracy(cache, {"a": 1.0, "b": 1.0}) == {"a": 1.0}
    with pytest.raises(TalosError, match="no cached task vector"):
        preview_accuracy(cache, {"zzz": 1.0})


# --------------------------------------------------------------------------------------------
# exact-linear model: preview == exact, linearization check, addition normalization, localization
# --------------------------------------------------------------------------------------------
def test_linearized_preview_equals_exact_model_for_linear_model(tmp_path):
    ctx = _linear_ctx()
    names = ["proj.weight", "proj.bias"]
    vecs = {t: _random_vector(ctx.model, names, 0.7, seed=k) for k, t in enumerate(ctx.tasks)}
    snap = _snapshot(ctx.model)
    cache = build_preview(ctx, vecs, points=30, seed=3)
    st = Store(tmp_path / "s")
    save_preview(st, "default__linear__x", cache, method="x")
    loaded = load_preview(st.root, "default__linear__x")
    assert json.loads((st.result_path("preview", "default__linear__x")).read_text())["arrays"].endswith(".safetensors")
    for mix in ({"lin0": 0.0, "lin1": 0.0}, {"lin0": 1.0}, {"lin0": -2.5, "lin1": 1.7}, {"lin1": 3.0}):
        terms = [(vecs[t], a) for t, a in mix.items()]
        got = preview_accuracy(loaded, mix)
        for k, e in enumerate(ctx.tasks):
            part = subset(ctx.split(e, "test"), 30, 3 + k)
            exact = ctx.logits(e, part, terms).numpy()
            assert np.allclose(preview_logits(loaded, mix, e), exact, atol=1e-4)
            assert got[e] == pytest.approx(float((exact.argmax(-1) == part.labels).mean()))
    table = linearization_table(ctx, vecs, "x")
    assert np.allclose(table["finetuned_acc"], table["linearized_acc"])
    _assert_same(ctx.model, snap)


def test_addition_normalized_accuracy_is_one_for_single_task_at_alpha_one():
    ctx = _linear_ctx(1)
    vec = {"lin0": _random_vector(ctx.model, ["proj.weight"], 0.5, seed=1)}
    ref = arith.finetuned_accuracies(ctx, vec, "nonlinear")
    for mode in ("nonlinear", "linearized"):
        ref_m = arith.finetuned_accuracies(ctx, vec, mode)
        res = arith.task_addition(ctx, vec, ref_m, [0.0, 0.5, 1.0], mode=mode)
        at1 = res.table[res.table.alpha == 1.0]
        assert np.allclose(at1["normalized_accuracy"], 1.0)
        assert set(res.table["split"]) == {"val", "test"} and len(res.table) == 3 * 2
    assert ref[("lin0", "test")] == ctx.accuracy("lin0", "test", [(vec["lin0"], 1.0)])


def test_localization_matrix_normalization_and_diagonal():
    ctx = _linear_ctx(2)
    vecs = {"lin0": _random_vector(ctx.model, ["proj.weight"], 0.8, seed=5),
            "lin1": TaskVector.from_dense({"proj.weight": torch.zeros(6, 8)})}
    res = function_localization(ctx, vecs)
    zs = np.array([ctx.zero_shot(t, "test") for t in ctx.tasks])
    assert np.allclose(res.matrix, res.accuracy / zs[None, :])
    assert res.accuracy[0, 0] == ctx.accuracy("lin0", "test", [(vecs["lin0"], 1.0)])
    assert np.allclose(res.matrix[1], 1.0)  # a zero vector changes nothing
    payload = res.payload()
    assert set(payload) >= {"tasks", "matrix", "accuracy", "zero_shot"} and len(payload["matrix"]) == 2


def test_disentanglement_zero_at_origin_and_on_axes():
    ctx = _linear_ctx(2)
    tau1 = _random_vector(ctx.model, ["proj.weight"], 1.0, seed=11)
    tau2 = _random_vector(ctx.model, ["proj.bias", "proj.weight"], 1.0, seed=12)
    snap = _snapshot(ctx.model)
    alphas = disentanglement_alphas(5, 2.0)  # -2, -1, 0, 1, 2
    for mode in ("nonlinear", "linearized"):
        res = disentanglement_error(ctx, "lin0", "lin1", tau1, tau2, alphas1=alphas, points=40, mode=mode)
        z = alphas.index(0.0)
        assert res.xi.shape == (5, 5) and res.xi[z, z] == 0.0
        assert np.all(res.xi_task1[:, z] == 0.0) and np.all(res.xi_task2[z, :] == 0.0)
        assert np.allclose(res.xi, res.xi_task1 + res.xi_task2)
        assert res.xi.max() > 0  # random vectors do interfere
        # off-axis term = disagreement of θ0 + α1τ1 with θ0 on D2 (definition)
        d2 = subset(ctx.split("lin1", "test"), 40, 1)
        p0 = ctx.logits("lin1", d2, (), mode).argmax(-1)
        p1 = ctx.logits("lin1", d2, [(tau1, alphas[0])], mode).argmax(-1)
        assert res.xi_task2[0, z] == pytest.approx(float((p0 != p1).float().mean()))
    _assert_same(ctx.model, snap)
    with pytest.raises(TalosError, match="two different tasks"):
        disentanglement_error(ctx, "lin0", "lin0", tau1, tau1, alphas1=[0.0])


def test_an_interrupted_disentanglement_grid_computes_only_its_missing_rows(tmp_path):
    """Progress: the non-linear grid saves each finished row; a grid stopped after two rows computes only the
    rest and equals an uninterrupted one; another key, or a damaged file, starts over."""
    from talos_core.evaluation.progress import Progress

    ctx = _linear_ctx(2)
    tau1 = _random_vector(ctx.model, ["proj.weight"], 1.0, seed=11)
    tau2 = _random_vector(ctx.model, ["proj.bias", "proj.weight"], 1.0, seed=12)
    alphas = disentanglement_alphas(5, 2.0)
    kw = dict(alphas1=alphas, points=40)
    full = disentanglement_error(ctx, "lin0", "lin1", tau1, tau2, **kw)

    class Stop(Exception):
        pass

    class StopAfterTwoRows(Progress):
        def put(self, part, value):
            super().put(part, value)
            if part == "row 1":
                raise Stop

    path = tmp_path / "p.json"
    with pytest.raises(Stop):
        disentanglement_error(ctx, "lin0", "lin1", tau1, tau2, resume=StopAfterTwoRows(path, {"runs": ["a", "b"]}),
                              **kw)
    progress = Progress(path, {"runs": ["a", "b"]})
    assert sorted(progress.done()) == ["row 0", "row 1"]
    calls = []
    original = ctx.logits_many
    ctx.logits_many = lambda *a, **k: calls.append(1) or original(*a, **k)
    resumed = disentanglement_error(ctx, "lin0", "lin1", tau1, tau2, resume=progress, **kw)
    ctx.logits_many = original
    assert len(calls) == 3 * 5  # only the three unfinished rows
    assert np.array_equal(resumed.xi, full.xi) and np.array_equal(resumed.xi_task1, full.xi_task1)
    assert Progress(path, {"runs": ["a", "c"]}).done() == {}  # other runs: not theirs
    path.write_text("{garbled")
    assert progress.done() == {}
    progress.clear()
    assert not path.exists()


# --------------------------------------------------------------------------------------------
# tiny-text store: protocols end to end, schema, bitwise restore
# --------------------------------------------------------------------------------------------
def test_protocols_write_schema_and_restore_weights(store, ctx):
    snap = _snapshot(ctx.model)
    kw = dict(overrides=OVERRIDES, train=False)
    out = evaluate(store, "single", MODEL, TASKS, "talos", **kw)
    single = store.read_table("single", result_name("default", MODEL))
    assert list(single.columns) == ["method", "task", "zero_shot_acc", "finetuned_acc", "split"]
    assert set(single["split"]) == {"val", "test"} and len(single) == 4
    assert set(store.read_result("single", "default__tiny-text")["runs"]["talos"]) == set(TASKS)
    _assert_same(ctx.model, snap)

    out = evaluate(store, "addition", MODEL, TASKS, "talos", settings=AdditionSettings(alpha_step=0.25), **kw)
    payload = store.read_result("addition", "default__tiny-text__talos")
    assert payload["columns"] == ["alpha", "split", "task", "accuracy", "normalized_accuracy"]
    assert {"selected_alpha", "alpha_grid", "summary", "tasks", "sparsity", "eval_mode"} <= set(payload)
    assert payload["alpha_grid"][-1] == pytest.approx(10.0) and payload["sparsity"] == 0.9
    assert payload["selected_alpha"] in payload["alpha_grid"]
    assert set(payload["summary"]) == {"abs_acc", "norm_acc"}
    assert len(out.table) == 5 * 2 * len(TASKS)
    _assert_same(ctx.model, snap)

    evaluate(store, "negation", MODEL, TASKS, "talos", settings=NegationSettings(control_task=CONTROL, alpha_step=0.25),
             **kw)
    neg = store.read_result("negation", "default__tiny-text__talos")
    assert neg["columns"] == ["target", "alpha", "split", "target_acc", "control_acc"]
    table = store.read_table("negation", "default__tiny-text__talos")
    zs_val = neg["control_zero_shot_acc"]["val"]
    for target, alpha in neg["selected"].items():
        row = table[(table.target == target) & (table.split == "val") & np.isclose(table.alpha, alpha)]
        assert float(row["control_acc"].iloc[0]) >= 0.95 * zs_val - 1e-12
    assert {r["target"] for r in neg["per_task"]} == set(TASKS) and neg["control_task"] == CONTROL
    _assert_same(ctx.model, snap)

    out = evaluate(store, "disentanglement", MODEL, TASKS, "talos",
                   settings=DisentanglementSettings(grid=3, alpha_range=1.0, points=16, alpha_step=0.25), **kw)
    dis = store.read_result("disentanglement", f"default__tiny-text__talos__{TASKS[0]}__{TASKS[1]}")
    assert np.array(dis["xi"]).shape == (3, 3) and dis["xi"][1][1] == 0.0
    assert dis["search_region"] == [0.0, pytest.approx(10.0)] and dis["points_per_task"] == 16
    assert not list((store.root / "checkpoints").rglob("*.json"))  # the grid's progress file goes with the result
    _assert_same(ctx.model, snap)

    evaluate(store, "localization", MODEL, TASKS, "talos", **kw)
    loc = store.read_result("localization", "default__tiny-text__talos")
    acc, zs = np.array(loc["accuracy"]), np.array(loc["zero_shot"])
    assert np.allclose(np.array(loc["matrix"]), acc / zs[None, :])
    _assert_same(ctx.model, snap)

    evaluate(store, "linearization", MODEL, TASKS, "talos", **kw)
    lin = store.read_table("linearization", "default__tiny-text")
    assert list(lin.columns) == ["method", "task", "finetuned_acc", "linearized_acc"] and len(lin) == 2
    _assert_same(ctx.model, snap)

    evaluate(store, "preview", MODEL, TASKS, "talos", settings=PreviewSettings(points=16), **kw)
    cache = load_preview(store.root, "default__tiny-text__talos")
    assert cache.tasks == TASKS and cache.base[TASKS[0]].shape == (16, 3)
    assert set(preview_accuracy(cache, {TASKS[0]: 0.5})) == set(TASKS)
    _assert_same(ctx.model, snap)

    evaluate(store, "efficiency", MODEL, TASKS, "talos", **kw)
    evaluate(store, "efficiency", MODEL, TASKS, "nonlinear", **kw)
    eff = store.read_table("efficiency", "default__tiny-text")
    assert {"method", "task", "fwd_bwd_s_mean", "opt_s_mean", "calibration_s", "peak_memory_mb",
            "trainable_entries"} <= set(eff.columns)
    assert sorted(eff["method"].unique()) == ["nonlinear", "talos"] and len(eff) == 4

    out = evaluate(store, "comparison", MODEL, [], **kw)
    comp = store.read_table("comparison", "default__tiny-text")
    assert list(comp.columns)[:3] == ["method", "addition_abs", "addition_norm"]
    row = comp.set_index("method").loc["talos"]
    assert row["addition_abs"] == pytest.approx(payload["summary"]["abs_acc"])
    assert row["negation_target"] == pytest.approx(neg["summary"]["target_acc"])
    _assert_same(ctx.model, snap)


def test_masks_protocol_density_and_iou(store, runs):
    out = evaluate(store, "masks", MODEL, TASKS, "talos", overrides=OVERRIDES, train=False,
                   settings=MaskSettings(compare_method="nonlinear"))
    table = store.read_table("masks", "default__tiny-text__talos")
    for task, run in runs.items():
        part = table[table.task == task]
        assert part["trainable"].sum() / part["numel"].sum() == pytest.approx(run.manifest.metrics["mask_density"])
    assert set(table["layer_type"]) <= {"q", "k", "v", "attn_out", "mlp_in", "mlp_out", "layernorm", "bias"}
    iou = store.read_result("mask_iou", "default__tiny-text__talos")
    assert np.allclose(np.diag(iou["matrix"]), 1.0) and iou["tasks"] == TASKS
    cmp = store.read_table("mask_iou", "default__tiny-text__talos__vs__nonlinear")
    assert list(cmp.columns) == ["task", "iou"] and cmp["iou"].between(0, 1).all()
    assert len(out.table) == len(table)
    # a fixed-hyperparameter row (e.g. the suites' lota-k0.9) is named by its own label, not its method's
    evaluate(store, "masks", MODEL, TASKS, "talos", overrides=OVERRIDES, train=False,
             settings=MaskSettings(compare_method="nonlinear", compare_label="nonlinear-x"))
    labelled = store.read_result("mask_iou", "default__tiny-text__talos__vs__nonlinear-x")
    assert labelled["methods"] == ["talos", "nonlinear-x"]
    assert store.read_table("mask_iou", "default__tiny-text__talos__vs__nonlinear-x").equals(cmp)


def test_find_run_exact_then_compatible(store, runs):
    from talos_core.evaluation.runs import find_run

    assert find_run(store, MODEL, TASKS[0], "talos", OVERRIDES).id == runs[TASKS[0]].id
    assert find_run(store, MODEL, TASKS[0], "talos", {"steps": 5}).id == runs[TASKS[0]].id  # compatible
    assert find_run(store, MODEL, TASKS[0], "talos", {"steps": 6}) is None
    assert find_run(store, MODEL, TASKS[0], "talos", {**OVERRIDES, "sparsity": 0.5}) is None
    with pytest.raises(TalosError, match="unknown fine-tuning setting"):
        find_run(store, MODEL, TASKS[0], "talos", {"stepz": 5})


def test_sharing_prunes_exact_fraction_and_restores(ctx):
    snap = _snapshot(ctx.model)
    mask = low_sensitivity_mask(ctx, TASKS[0], 0.1, samples=8)
    total = sum(m.numel() for m in mask.values())
    assert sum(int(m.sum()) for m in mask.values()) == math.floor(0.1 * total)
    edit, stats = sharing_edit(ctx.model, mask, "prune")
    params = dict(ctx.model.named_parameters())
    with apply_vectors(ctx.model, [(edit, 1.0)]):
        for n, m in mask.items():
            assert torch.all(params[n].detach()[m] == 0)
    _assert_same(ctx.model, snap)
    edit, stats = sharing_edit(ctx.model, mask, "perturb", seed=1)
    assert stats["entries"] == math.floor(0.1 * total)
    res = sharing_matrix(ctx, TASKS, "perturb", masks={t: mask for t in TASKS})
    assert res.matrix.shape == (2, 2) and np.allclose(res.mask_iou, 1.0)
    _assert_same(ctx.model, snap)
    with pytest.raises(TalosError, match="sharing mode"):
        sharing_edit(ctx.model, mask, "shuffle")


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------
def _cli(argv):
    from talos_core.cli import main

    return main(argv)


def test_cli_errors(tmp_path, capsys):
    assert _cli(["evaluate", "addition-ish", "--model", MODEL, "--tasks", "tweets", "--store", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: unknown protocol 'addition-ish'")
    assert _cli(["evaluate", "addition", "--model", MODEL, "--tasks", "tweets,nope", "--store", str(tmp_path)]) == 2
    assert "unknown task 'nope'" in capsys.readouterr().err
    assert _cli(["evaluate", "addition", "--model", MODEL, "--store", str(tmp_path)]) == 2
    assert "--tasks is required" in capsys.readouterr().err
    assert _cli(["evaluate", "addition", "--model", MODEL, "--tasks", "tweets", "--suite", "a b",
                 "--store", str(tmp_path)]) == 2
    assert "suite name" in capsys.readouterr().err
    assert _cli(["evaluate", "disentanglement", "--model", MODEL, "--tasks", "tweets,drug-reviews", "--range", "0",
                 "--store", str(tmp_path)]) == 2
    assert "range must be in (0, 1000], got 0.0" in capsys.readouterr().err
    assert _cli(["evaluate", "negation", "--model", MODEL, "--tasks", "tweets", "--control-task", "tweets",
                 "--no-train", "--store", str(tmp_path)]) == 2
    assert "error:" in capsys.readouterr().err


def test_cli_localization_on_existing_runs(store, capsys):
    argv = ["evaluate", "localization", "--model", MODEL, "--tasks", ",".join(TASKS), "--method", "talos",
            "--suite", "cli", "--store", str(store.root), "--no-train", "--quiet"]
    for key, value in OVERRIDES.items():
        flag = {"calib_samples": "--calib-samples", "batch_size": "--batch-size"}.get(key, "--" + key.replace("_", "-"))
        argv += [flag, str(value)]
    assert _cli(argv) == 0
    out = capsys.readouterr().out
    assert "wrote" in out and "cli__tiny-text__talos" in out
    assert store.read_result("localization", "cli__tiny-text__talos")["tasks"] == TASKS


def _override_flags() -> list[str]:
    flags = []
    for key, value in OVERRIDES.items():
        flag = {"calib_samples": "--calib-samples", "batch_size": "--batch-size"}.get(key, "--" + key.replace("_", "-"))
        flags += [flag, str(value)]
    return flags


def test_cli_posthoc_and_sparsity_ablation_protocols(store, capsys):
    """Post-hoc evaluation and the sparsity ablation are protocols of ``talos evaluate`` too."""
    common = ["--model", MODEL, "--tasks", ",".join(TASKS), "--suite", "cli", "--store", str(store.root),
              "--control-task", CONTROL, "--alpha-step", "0.5", "--no-train", "--quiet", *_override_flags()]
    assert _cli(["evaluate", "posthoc", "--method", "ties", "--posthoc-points", "1", *common]) == 0
    out = capsys.readouterr().out
    assert "hyperparameters" in out and "cli__tiny-text__ties" in out
    add = store.read_result("addition", "cli__tiny-text__ties")
    assert add["base_method"] == "nonlinear" and add["alpha_grid"] == [0.0, 0.5, 1.0]
    assert set(add["runs"]) == set(TASKS)
    # the one point tried is recorded with its validation score, so the audit can see where the choice sits
    (point,) = add["search"]
    assert point["hyperparameters"] == add["hyperparameters"] and math.isfinite(point["val_norm_acc"])
    assert point["alpha"] in add["alpha_grid"]
    assert store.read_result("negation", "cli__tiny-text__ties")["control_task"] == CONTROL
    single = store.read_result("single", "cli__tiny-text")
    assert {r["method"] for r in single["records"]} == {"ties"} and set(single["runs"]) == {"ties"}
    assert single["data"]["max_test"] == OVERRIDES["max_test"]
    # the later merges: Iso-C searches α up to 3 as its authors, with their conventions recorded; LiNeS one β of
    # its grid, added at α = 1 as its authors, negated over the paper's 0…1
    assert _cli(["evaluate", "posthoc", "--method", "iso_c", *common]) == 0
    iso = store.read_result("addition", "cli__tiny-text__iso_c")
    assert iso["alpha_grid"] == [0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0]
    assert iso["hyperparameters"] == {"nonmatrix": "mean", "conv1x1": "other"}
    assert _cli(["evaluate", "posthoc", "--method", "lines", "--posthoc-points", "3", *common]) == 0
    lines = store.read_result("addition", "cli__tiny-text__lines")
    assert [p["hyperparameters"]["beta"] for p in lines["search"]] == [0.1, 0.5, 1.0]
    best = max(lines["search"], key=lambda p: p["val_abs_acc"])  # the first of equals, as the search keeps it
    assert lines["hyperparameters"] == best["hyperparameters"]
    assert _cli(["evaluate", "posthoc", "--method", "lines", "--posthoc-points", "1", *common]) == 0
    lines = store.read_result("addition", "cli__tiny-text__lines")
    assert lines["hyperparameters"] == {"beta": 0.6, "nonblock": "first"} and lines["alpha_grid"] == [1.0]
    assert store.read_result("negation", "cli__tiny-text__lines")["alpha_grid"] == [0.0, 0.5, 1.0]
    assert {r["method"] for r in store.read_result("single", "cli__tiny-text")["records"]} == {"ties", "iso_c",
                                                                                                "lines"}
    # a labelled option instead of the authors' convention, under its own suite
    one = [*common[:common.index("--suite")], "--suite", "cli1x1", *common[common.index("--suite") + 2:]]
    assert _cli(["evaluate", "posthoc", "--method", "iso_c", "--posthoc-option", "conv1x1=matrix,nonmatrix=sum",
                 *one]) == 0
    assert store.read_result("addition", "cli1x1__tiny-text__iso_c")["hyperparameters"] == {
        "nonmatrix": "sum", "conv1x1": "matrix"}
    capsys.readouterr()
    assert _cli(["evaluate", "posthoc", "--method", "tsv", "--posthoc-option", "conv1x1=yes", *one]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: option conv1x1 of post-hoc method 'tsv' must be one of 'other', 'matrix', got 'yes'"]
    assert _cli(["evaluate", "posthoc", "--method", "ties", "--posthoc-option", "conv1x1=matrix", *one]) == 2
    assert "'conv1x1' is not an option of post-hoc method 'ties' (its options: none)" in capsys.readouterr().err

    assert _cli(["evaluate", "sparsity-ablation", "--method", "talos", "--sparsities", "0.9", *common]) == 0
    table = store.read_table("sparsity_ablation", "cli__tiny-text__talos")
    assert table["sparsity"].tolist() == [0.9] and table["single_task_acc"].between(0, 1).all()
    capsys.readouterr()
    assert _cli(["evaluate", "posthoc", "--method", "talos", *common]) == 2  # not a post-hoc method
    assert "unknown post-hoc method 'talos'" in capsys.readouterr().err
    assert _cli(["evaluate", "sparsity-ablation", "--method", "nonlinear", *common]) == 2
    assert "does not train a sparse subset" in capsys.readouterr().err
    assert _cli(["evaluate", "sparsity-ablation", "--method", "talos", "--sparsities", "0.5,1", *common]) == 2
    assert "sparsity must be in [0, 1)" in capsys.readouterr().err


def test_protocol_registry_and_typed_settings():
    from dataclasses import FrozenInstanceError, fields, is_dataclass

    from talos_core.cli import build_parser
    from talos_core.evaluation.protocols import PROTOCOLS, SharingSettings, get_protocol

    for name, proto in PROTOCOLS.items():
        assert proto.name == name and proto.description
        assert is_dataclass(proto.settings) and proto.settings.__dataclass_params__.frozen
        defaults = proto.settings()  # every setting has a default
        if fields(defaults):
            with pytest.raises(FrozenInstanceError):
                setattr(defaults, fields(defaults)[0].name, None)
    assert {"posthoc", "sparsity-ablation"} <= set(PROTOCOLS)
    with pytest.raises(TalosError, match="unknown protocol 'nope'"):
        get_protocol("nope")
    sharing = get_protocol("sharing")
    assert sharing.make_settings({"mode": "both"}) == SharingSettings(mode="both")
    with pytest.raises(TalosError, match="protocol 'sharing' has no setting 'grid'"):
        sharing.make_settings({"grid": 3})
    with pytest.raises(TalosError, match="must be a SharingSettings or a dict"):
        sharing.make_settings(3)
    for proto, bad, needle in (("disentanglement", {"alpha_range": 0.0}, "range must be in (0, 1000]"),
                               ("disentanglement", {"grid": 0}, "grid must be a positive integer"),
                               ("sharing", {"mode": "shuffle"}, "sharing mode must be prune, perturb or both"),
                               ("sharing", {"fraction": 1.5}, "fraction must be in [0, 1]"),
                               ("addition", {"alpha_step": -1}, "alpha_step must be in [0.001, 1]"),
                               ("preview", {"points": 0}, "preview_points must be a positive integer"),
                               ("sparsity-ablation", {"sparsities": ()}, "sparsities must be a non-empty tuple")):
        with pytest.raises(TalosError, match=re.escape(needle)):
            get_protocol(proto).make_settings(bad)
    help_text = build_parser()._subparsers._group_actions[0].choices["evaluate"].format_help()
    assert all(f"  {name}: " in help_text for name in PROTOCOLS)  # the help lists the registry


def test_run_manifest_file_is_the_typed_manifest(runs):
    """A run's manifest.json has exactly RunManifest's fields, in order, and parses back to itself."""
    from dataclasses import fields

    from talos_core.store import RunManifest

    for run in runs.values():
        raw = json.loads((run.path / "manifest.json").read_text())
        assert list(raw) == [f.name for f in fields(RunManifest)]
        assert RunManifest.from_dict(raw, run.path).to_dict() == raw == run.manifest.to_dict()


def test_evaluation_layers_have_no_import_cycle():
    """Protocols sit above the pipeline and the store: neither imports talos_core.evaluation (function-local
    imports included), and there is no import cycle among evaluation/*, pipeline, store, suites/* and cli/*."""
    import ast
    from pathlib import Path

    import talos_core

    root = Path(talos_core.__file__).resolve().parent
    files = {"talos_core.pipeline": root / "pipeline.py", "talos_core.store": root / "store.py"}
    for sub in ("evaluation", "cli", "suites"):
        for f in (root / sub).glob("*.py"):
            files["talos_core." + sub + ("" if f.stem == "__init__" else "." + f.stem)] = f
    graph = {}
    for mod, f in files.items():
        deps = set()
        for node in ast.walk(ast.parse(f.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
                     if isinstance(node, ast.ImportFrom) and node.module else [])
            deps |= {n for n in names if n in files and n != mod}
        graph[mod] = deps
    for low in ("talos_core.pipeline", "talos_core.store"):
        assert not any(d.startswith("talos_core.evaluation") for d in graph[low]), low

    def visit(mod, path):
        assert mod not in path, "import cycle: " + " -> ".join([*path[path.index(mod):], mod])
        for dep in graph[mod]:
            visit(dep, [*path, mod])

    for mod in graph:
        visit(mod, [])


def test_zero_shot_is_shared_across_contexts_and_alpha_zero_uses_it(store, runs, monkeypatch):
    """α = 0 is θ0: the curve's α = 0 row equals a real evaluation with no edit, and a second context with
    the same model, data and batch size reuses the first one's zero-shot accuracies (no forward pass)."""
    from talos_core.inference import runtime as context_mod

    context_mod.clear_zero_shot_memo()
    first = EvalContext.for_model(MODEL, [*TASKS, CONTROL], max_val=32, max_test=64)
    tv = runs[TASKS[0]].task_vector()
    items = [(t, s) for s in ("val", "test") for t in TASKS]
    curve = arith.alpha_curve(first, items, tv, [0.0, 1.0])
    assert curve[0].tolist() == first.accuracies(items)  # the α = 0 row is exactly θ0's accuracy
    assert curve[1].tolist() == first.accuracies(items, [(tv, 1.0)])

    second = EvalContext.for_model(MODEL, [*TASKS, CONTROL], max_val=32, max_test=64)
    calls = []
    monkeypatch.setattr(EvalContext, "accuracies", lambda self, *a, **k: calls.append(a) or [0.0])
    assert [second.zero_shot(t, s) for t, s in items] == curve[0].tolist() and not calls
    other = EvalContext.for_model(MODEL, [*TASKS, CONTROL], max_val=16, max_test=64)  # other data: own values
    other.zero_shot(TASKS[0], "val")
    assert calls


def test_addition_on_validation_only_matches_the_full_curve(ctx, runs):
    vectors = {t: r.task_vector() for t, r in runs.items()}
    alphas = [0.0, 2.5, 5.0]
    full = arith.task_addition(ctx, vectors, arith.finetuned_accuracies(ctx, vectors, "nonlinear"), alphas)
    val = arith.task_addition(ctx, vectors, arith.finetuned_accuracies(ctx, vectors, "nonlinear", splits=("val",)),
                              alphas, splits=("val",))
    assert set(val.table["split"]) == {"val"} and val.selected_alpha == full.selected_alpha
    pd.testing.assert_frame_equal(val.table.reset_index(drop=True),
                                  full.table[full.table["split"] == "val"].reset_index(drop=True))
    assert math.isnan(val.summary["abs_acc"])
    with pytest.raises(TalosError, match="'val'"):
        arith.task_addition(ctx, vectors, {}, alphas, splits=("test",))


def test_runs_of_one_task_share_the_zero_shot_evaluation(tmp_path, monkeypatch):
    """A run's manifest zero-shot accuracies are computed once per task, data and batch size in a
    process: a second method on the same task reuses them (equal to a direct evaluation)."""
    from talos_core.inference import forward as core
    from talos_core.inference import runtime as context_mod
    from talos_core.pipeline import CalibrationSettings, FinetuneRequest, run_finetune

    context_mod.clear_zero_shot_memo()
    small = dict(steps=2, max_train=32, max_val=16, max_test=16, batch_size=8,
                 calibration=CalibrationSettings(calib_samples=8, rounds=1))
    first = run_finetune(FinetuneRequest(model=MODEL, task=TASKS[0], method="talos", **small), Store(tmp_path),
                         progress=False)
    real, plain_calls = core.accuracy, []

    def counting(model, task, split, terms=(), **kw):
        if not terms:
            plain_calls.append(task.name)
        return real(model, task, split, terms, **kw)

    monkeypatch.setattr(core, "accuracy", counting)
    second = run_finetune(FinetuneRequest(model=MODEL, task=TASKS[0], method="nonlinear", **small), Store(tmp_path),
                          progress=False)
    assert plain_calls == []
    for key in ("zero_shot_test_acc", "zero_shot_val_acc"):
        assert second.manifest.metrics[key] == first.manifest.metrics[key]


# --------------------------------------------------------------------------------------------
# per-example correctness and 95% bootstrap intervals (how sure a difference is)
# --------------------------------------------------------------------------------------------
def _decode(text: str) -> np.ndarray:
    from talos_core.evaluation.stats import decode_examples

    return decode_examples(text)


def _inside(interval, value) -> bool:
    lo, hi = interval
    return lo - 1e-12 <= value <= hi + 1e-12


@pytest.mark.parametrize("mode", ["nonlinear", "linearized"])
def test_addition_and_negation_keep_the_test_examples_behind_their_means(mode):
    """At the selected α the results keep the per-example test correctness whose means are exactly the
    reported accuracies, and 95% intervals around the summary means (both evaluation modes)."""
    ctx = _linear_ctx(3)
    vecs = {t: _random_vector(ctx.model, ["proj.weight", "proj.bias"], 0.6, seed=i)
            for i, t in enumerate(["lin0", "lin1"])}
    ref = arith.finetuned_accuracies(ctx, vecs, mode)
    for key, acc in ref.items():
        assert ref.correct[key].dtype == bool and ref.correct[key].mean() == acc
    res = arith.task_addition(ctx, vecs, ref, [0.0, 0.5, 1.0, 1.5], mode=mode)
    at = res.table[(res.table.split == "test") & np.isclose(res.table.alpha, res.selected_alpha)]
    for row in at.itertuples():
        assert res.examples[row.task].mean() == row.accuracy
        assert res.reference_examples[row.task].mean() == ref[(row.task, "test")]
    assert _inside(res.ci95["abs_acc"], res.summary["abs_acc"])
    assert _inside(res.ci95["norm_acc"], res.summary["norm_acc"])
    extra = res.extra()
    assert set(res.summary) == {"abs_acc", "norm_acc"}  # the summary itself is unchanged
    assert extra["ci95"] == res.ci95 and extra["bootstrap"]["resamples"] == 1000
    for t in vecs:
        np.testing.assert_array_equal(_decode(extra["examples"][t]), res.examples[t])
        np.testing.assert_array_equal(_decode(extra["reference_examples"][t]), ref.correct[(t, "test")])

    neg = arith.task_negation(ctx, vecs, "lin2", [0.0, 0.5, 1.0], mode=mode)
    for r in neg.per_task.itertuples():
        assert neg.examples[r.target]["target"].mean() == r.target_acc
        assert neg.examples[r.target]["control"].mean() == r.control_acc
    assert _inside(neg.ci95["target_acc"], neg.summary["target_acc"])
    assert _inside(neg.ci95["control_acc"], neg.summary["control_acc"])
    extra = neg.extra()
    assert set(extra["examples"]["lin0"]) == {"target", "control"} and set(neg.summary) == {"target_acc",
                                                                                           "control_acc"}


def test_alpha_zero_examples_come_from_the_zero_shot_pass():
    """α = 0 is read from the memoized zero-shot accuracy; its examples from the zero-shot pass (same mean)."""
    ctx = _linear_ctx(2)
    vecs = {"lin0": _random_vector(ctx.model, ["proj.weight"], 0.5, seed=3)}
    res = arith.task_addition(ctx, vecs, arith.finetuned_accuracies(ctx, vecs, "nonlinear"), [0.0])
    assert res.selected_alpha == 0.0
    assert res.examples["lin0"].mean() == ctx.zero_shot("lin0", "test") == res.summary["abs_acc"]
    neg = arith.task_negation(ctx, vecs, "lin1", [0.0])
    assert neg.examples["lin0"]["control"].mean() == ctx.zero_shot("lin1", "test")
    single = arith.single_task_result(ctx, vecs, "m", "nonlinear")
    row = single.table[(single.table.split == "test")].iloc[0]
    assert _decode(single.examples["lin0"]["zero_shot"]).mean() == row["zero_shot_acc"]
    assert _decode(single.examples["lin0"]["finetuned"]).mean() == row["finetuned_acc"]
    pd.testing.assert_frame_equal(single.table, arith.single_task_table(ctx, vecs, "m", "nonlinear"))
    # accuracies given without their per-example correctness: no fine-tuned examples, no normalized interval
    plain = dict(arith.finetuned_accuracies(ctx, vecs, "nonlinear"))
    assert "finetuned" not in arith.single_task_result(ctx, vecs, "m", finetuned=plain).examples["lin0"]
    assert set(arith.task_addition(ctx, vecs, plain, [0.0, 1.0]).ci95) == {"abs_acc"}


def test_upsert_keeps_examples_per_method(tmp_path):
    from talos_core.evaluation.request import upsert

    st = Store(tmp_path)
    rows = lambda m: pd.DataFrame([{"method": m, "task": "t", "zero_shot_acc": 0.5, "finetuned_acc": 1.0,  # noqa: E731
                                    "split": "test"}])
    data = {"max_val": 8, "max_test": 8, "eval_precision": "fp32"}
    upsert(st, "single", "s__m", rows("a"), "a", data=data, examples={"t": {"zero_shot": "01"}})
    upsert(st, "single", "s__m", rows("b"), "b", data=data, examples={"t": {"zero_shot": "10"}})
    assert st.read_result("single", "s__m")["examples"] == {"a": {"t": {"zero_shot": "01"}},
                                                            "b": {"t": {"zero_shot": "10"}}}
    upsert(st, "single", "s__m", rows("a"), "a", data=data)  # a's rows replaced without examples: a's go
    assert set(st.read_result("single", "s__m")["examples"]) == {"b"}
    upsert(st, "single", "s__m", rows("c"), "c", data={**data, "max_test": 16}, examples={"t": {"zero_shot": "1"}})
    assert st.read_result("single", "s__m")["examples"] == {"c": {"t": {"zero_shot": "1"}}}  # other data: dropped


def test_upsert_in_the_suites_row_order_whatever_order_the_writers_come_in(tmp_path):
    """Parallel writers of a per-model table (the post-hoc steps' `single` rows) leave the table a sequential run
    leaves: rows, `runs` and `examples` in the suite's row order; a method written again keeps its place."""
    import itertools

    from talos_core.evaluation.request import upsert

    order = ("talos", "talos-k0.9", "nonlinear", "ties", "tsv")
    rows = lambda m: pd.DataFrame([{"method": m, "task": t, "zero_shot_acc": 0.5, "finetuned_acc": 1.0,  # noqa: E731
                                    "split": "test"} for t in ("a", "b")])
    data = {"max_val": 8, "max_test": 8, "eval_precision": "fp32"}
    written = []
    for i, perm in enumerate(itertools.islice(itertools.permutations(order), 0, None, 17)):
        st = Store(tmp_path / str(i))
        for m in perm:
            upsert(st, "single", "s__m", rows(m), m, data=data, run_ids={"a": f"{m}-a"}, examples={"a": {"x": m}},
                   order=order)
        upsert(st, "single", "s__m", rows(perm[0]), perm[0], data=data, run_ids={"a": "again"}, order=order)
        payload = st.read_result("single", "s__m")
        assert list(dict.fromkeys(r["method"] for r in payload["records"])) == list(order)
        assert list(payload["runs"]) == list(order) and payload["runs"][perm[0]] == {"a": "again"}
        assert list(payload["examples"]) == [m for m in order if m != perm[0]]  # rewritten without examples
        written.append(json.dumps({k: v for k, v in payload.items() if k not in ("runs", "examples")}))
    assert len(set(written)) == 1 and len(written) > 5
    # without an order (a plain `talos evaluate`): the writers' order, as before
    st = Store(tmp_path / "plain")
    for m in ("b", "a"):
        upsert(st, "single", "s__m", rows(m), m, data=data)
    assert [r["method"] for r in st.read_result("single", "s__m")["records"]] == ["b", "b", "a", "a"]


def _write_comparison_inputs(st: Store, *, with_examples: bool) -> None:
    add = {"summary": {"abs_acc": 0.5, "norm_acc": 0.8}, "selected_alpha": 0.5, "alpha_grid": [0.0, 0.5]}
    neg = {"summary": {"target_acc": 0.2, "control_acc": 0.7}}
    single = pd.DataFrame([{"method": "talos", "task": t, "zero_shot_acc": 0.5, "finetuned_acc": 1.0, "split": s}
                           for t in ("a", "b") for s in ("val", "test")])
    extra = {}
    if with_examples:
        add["ci95"] = {"abs_acc": [0.4, 0.6], "norm_acc": [0.7, 0.9]}
        neg["ci95"] = {"target_acc": [0.1, 0.3], "control_acc": [0.6, 0.8]}
        extra["examples"] = {"talos": {t: {"zero_shot": "1100", "finetuned": "1111"} for t in ("a", "b")}}
    st.write_table("addition", "s__m__talos", pd.DataFrame([{"alpha": 0.5, "split": "test", "task": "a",
                                                            "accuracy": 0.5, "normalized_accuracy": 0.8}]), **add)
    st.write_table("negation", "s__m__talos", pd.DataFrame([{"target": "a", "alpha": 0.5, "split": "test",
                                                            "target_acc": 0.2, "control_acc": 0.7}]), **neg)
    st.write_table("single", "s__m", single, **extra)


def test_comparison_interval_columns_from_examples_and_nan_for_old_stores(tmp_path):
    from talos_core.evaluation.reports import COMPARISON_COLUMNS, INTERVAL_COLUMNS, comparison_table
    from talos_core.schema import KINDS

    old, new = Store(tmp_path / "old"), Store(tmp_path / "new")
    _write_comparison_inputs(old, with_examples=False)
    _write_comparison_inputs(new, with_examples=True)
    assert list(KINDS["comparison"].optional_columns) == INTERVAL_COLUMNS
    t_old = comparison_table(old, "s", "m")
    assert list(t_old.columns) == [*COMPARISON_COLUMNS, *INTERVAL_COLUMNS]
    assert t_old[INTERVAL_COLUMNS].isna().all().all() and t_old["addition_abs"].iloc[0] == 0.5
    row = comparison_table(new, "s", "m").iloc[0]
    assert (row["addition_abs_lo"], row["addition_abs_hi"], row["addition_norm_lo"]) == (0.4, 0.6, 0.7)
    assert (row["negation_target_lo"], row["negation_control_hi"]) == (0.1, 0.8)
    assert (row["single_task_acc_lo"], row["single_task_acc_hi"]) == (1.0, 1.0)  # every example right
    assert row["zero_shot_acc_lo"] < 0.5 < row["zero_shot_acc_hi"]
    pd.testing.assert_series_equal(t_old.iloc[0][COMPARISON_COLUMNS], row[COMPARISON_COLUMNS], check_names=False)


def test_protocols_write_examples_and_intervals(store):
    """single, addition, negation, post-hoc and the sparsity ablation write per-example correctness and
    intervals; the comparison table shows them."""
    kw = dict(overrides=OVERRIDES, train=False, suite="ci")
    evaluate(store, "single", MODEL, TASKS, "talos", **kw)
    evaluate(store, "addition", MODEL, TASKS, "talos", settings=AdditionSettings(alpha_step=0.5), **kw)
    evaluate(store, "negation", MODEL, TASKS, "talos", settings=NegationSettings(control_task=CONTROL, alpha_step=0.5),
             **kw)
    evaluate(store, "posthoc", MODEL, TASKS, "ties", settings={"control_task": CONTROL, "alpha_step": 0.5,
                                                               "max_points": 1}, **kw)
    single = store.read_result("single", "ci__tiny-text")
    assert set(single["examples"]) == {"talos", "ties"}
    test = store.read_table("single", "ci__tiny-text").query("split == 'test'")
    for r in test.itertuples():
        ex = single["examples"][r.method][r.task]
        assert len(ex["zero_shot"]) == OVERRIDES["max_test"]
        assert _decode(ex["zero_shot"]).mean() == pytest.approx(r.zero_shot_acc)
        assert _decode(ex["finetuned"]).mean() == pytest.approx(r.finetuned_acc)
    for method in ("talos", "ties"):
        add = store.read_result("addition", f"ci__tiny-text__{method}")
        assert set(add["examples"]) == set(TASKS) and set(add["ci95"]) == {"abs_acc", "norm_acc"}
        mean = np.mean([_decode(add["examples"][t]).mean() for t in TASKS])
        assert mean == pytest.approx(add["summary"]["abs_acc"]) and _inside(add["ci95"]["abs_acc"], mean)
        neg = store.read_result("negation", f"ci__tiny-text__{method}")
        assert set(neg["examples"]) == set(TASKS) and set(neg["ci95"]) == {"target_acc", "control_acc"}
    evaluate(store, "sparsity-ablation", MODEL, TASKS, "talos",
             settings={"sparsities": (0.9,), "control_task": CONTROL, "alpha_step": 0.5}, **kw)
    abl = store.read_result("sparsity_ablation", "ci__tiny-text__talos")
    assert set(abl["examples"]["0.9"]) == {"addition", "single", "negation"}
    row = store.read_table("sparsity_ablation", "ci__tiny-text__talos").iloc[0]
    assert row["addition_abs_lo"] <= row["addition_abs"] <= row["addition_abs_hi"]
    assert row["single_task_acc_lo"] <= row["single_task_acc"] <= row["single_task_acc_hi"]
    evaluate(store, "comparison", MODEL, [], **kw)
    comp = store.read_table("comparison", "ci__tiny-text").set_index("method")
    for m in ("talos", "ties"):
        for col in ("addition_abs", "negation_target", "single_task_acc", "zero_shot_acc"):
            assert comp.loc[m, f"{col}_lo"] <= comp.loc[m, col] <= comp.loc[m, f"{col}_hi"], (m, col)


def test_an_interrupted_sparsity_ablation_evaluates_only_its_missing_sparsities(tmp_path, monkeypatch):
    """The ablation keeps each finished sparsity (Progress); stopped after the first one, the step evaluates only
    the second, and writes the same table and per-example payload as an uninterrupted step."""
    import talos_core.evaluation.ablation as ablation_mod
    from talos_core.evaluation.progress import Progress

    st = Store(tmp_path / "s")
    kw = dict(overrides=OVERRIDES, train=True,
              settings={"sparsities": (0.5, 0.9), "control_task": CONTROL, "alpha_step": 0.5})
    evaluate(st, "sparsity-ablation", MODEL, TASKS, "talos", suite="whole", **kw)

    class Stop(Exception):
        pass

    put = Progress.put

    def put_then_stop(self, part, value):
        put(self, part, value)
        raise Stop

    monkeypatch.setattr(Progress, "put", put_then_stop)
    with pytest.raises(Stop):
        evaluate(st, "sparsity-ablation", MODEL, TASKS, "talos", suite="cut", **kw)
    monkeypatch.setattr(Progress, "put", put)
    searched = []
    addition = ablation_mod.arith.task_addition
    monkeypatch.setattr(ablation_mod.arith, "task_addition",
                        lambda *a, **k: searched.append(k.get("sparsity")) or addition(*a, **k))
    evaluate(st, "sparsity-ablation", MODEL, TASKS, "talos", suite="cut", **kw)
    assert searched == [0.9]  # 0.5 came from the progress file
    assert not list((st.root / "checkpoints").rglob("*.json"))
    pd.testing.assert_frame_equal(st.read_table("sparsity_ablation", "cut__tiny-text__talos"),
                                  st.read_table("sparsity_ablation", "whole__tiny-text__talos"))
    whole, cut = (st.read_result("sparsity_ablation", f"{s}__tiny-text__talos") for s in ("whole", "cut"))
    assert cut["examples"] == whole["examples"]


def test_efficiency_pools_the_steps_each_run_ran():
    """An early-stopped run times the steps it ran, not its schedule's: the pooled time per step weighs each run by
    those (paper App.: mean over all iterations of all tasks)."""
    from types import SimpleNamespace

    from talos_core.evaluation.reports import efficiency_summary, efficiency_table

    def run(task, mean, ran):
        timings = {"fwd_bwd_s_mean": mean, "fwd_bwd_s_std": 0.0, "opt_s_mean": 0.0, "opt_s_std": 0.0,
                   "train_s": mean * ran, "peak_memory_mb": 1.0, "steps_run": ran}
        manifest = SimpleNamespace(method="talos", task=task, device="cpu", timings=timings,
                                   config={"train": {"steps": 2000}})
        return SimpleNamespace(manifest=manifest)

    table = efficiency_table([run("a", 1.0, 300), run("b", 2.0, 900)])
    assert list(table["steps"]) == [300, 900]
    assert efficiency_summary(table)["talos"]["time_per_step_s"] == pytest.approx((300 + 1800) / 1200)


def test_efficiency_reads_runs_kept_as_manifests_alone(tmp_path):
    """The efficiency step reads only the runs' timings, so a store exported without weights (cached_results) is
    enough: it recomputes the shipped rows and trains nothing."""
    from pathlib import Path

    from talos_core.cli import main
    from talos_core.store import export_store

    shipped = Path(__file__).resolve().parents[1] / "cached_results"
    export_store(shipped, tmp_path / "store")
    before = json.loads((shipped / "results/efficiency/vision__efficientnet-lite0.json").read_text())
    assert main(["evaluate", "efficiency", "--suite", "vision", "--suite-row", "talos", "--model",
                 "efficientnet-lite0", "--store", str(tmp_path / "store"), "--no-train"]) == 0
    after = json.loads((tmp_path / "store/results/efficiency/vision__efficientnet-lite0.json").read_text())
    rows = {(r["method"], r["task"]): r for r in after["records"]}
    for r in before["records"]:
        assert rows[(r["method"], r["task"])]["fwd_bwd_s_mean"] == r["fwd_bwd_s_mean"]
    assert not any((tmp_path / "store" / "runs").glob("*/task_vector.safetensors"))


def test_efficiency_of_a_row_reads_the_runs_its_arithmetic_read(tmp_path):
    """A store can hold two trainings of one request: a run kept as a manifest alone (the CPU's, whose weights went
    with a machine) and the run that trained it again on a GPU in fp32 (another id), which the row's results read.
    The efficiency step times the runs the row's addition result names, not the manifest its request id finds first
    (the shipped text store's linearized FT, 2026-11-28)."""
    import shutil
    from pathlib import Path

    from talos_core.cli import main
    from talos_core.evaluation.runs import build_request, merge_overrides
    from talos_core.store import Store, export_store
    from talos_core.suites.steps import suite_row

    shipped = Path(__file__).resolve().parents[1] / "cached_results"
    export_store(shipped, tmp_path / "store")
    store = Store(tmp_path / "store")
    row = suite_row(store, "text", "linearized")
    used = store.read_result("addition", "text__minilm-l6__linearized")["runs"]["tweets"]
    decoy = build_request(row.model, "tweets", row.method,
                          merge_overrides(row.overrides, (row.task_overrides or {}).get("tweets"))).run_id()
    assert decoy != used and not store.has_run(decoy)
    shutil.copytree(store.root / "runs" / used, store.root / "runs" / decoy)
    manifest = json.loads((store.root / "runs" / decoy / "manifest.json").read_text())
    assert manifest["config"]["train"]["precision"] == "fp32"  # the GPU's fp32 is in its id; a CPU run's is not
    manifest["config"]["train"]["precision"] = "auto"
    manifest["run_id"], manifest["device"], manifest["timings"]["fwd_bwd_s_mean"] = decoy, "cpu", 99.0
    (store.root / "runs" / decoy / "manifest.json").write_text(json.dumps(manifest))
    assert Store(tmp_path / "store").get_run(decoy).manifest.timings["fwd_bwd_s_mean"] == 99.0
    assert main(["evaluate", "efficiency", "--suite", "text", "--suite-row", "linearized", "--model", "minilm-l6",
                 "--store", str(tmp_path / "store"), "--no-train"]) == 0
    after = json.loads((tmp_path / "store/results/efficiency/text__minilm-l6.json").read_text())
    tweets = next(r for r in after["records"] if r["method"] == "linearized" and r["task"] == "tweets")
    assert tweets["fwd_bwd_s_mean"] == pytest.approx(
        Store(tmp_path / "store").get_run(used).manifest.timings["fwd_bwd_s_mean"], rel=1e-6)
