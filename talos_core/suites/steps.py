"""Suite steps: the table of :class:`Step` s a suite run executes (:func:`suite_steps`), each one evaluation
protocol of :mod:`talos_core.evaluation.protocols` (post-hoc methods and the sparsity ablation included), and what
the steps resolve: from the store when a step runs (:func:`curve_budget`, :func:`checked_lr`, a selection step's
per-task choices), from the spec when the table is built (:func:`lr_check_tasks`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from talos_core.errors import TalosError, is_int, is_number
from talos_core.store import Store
from talos_core.suites.specs import SuiteSpec

Resolved = Callable[[Store], Any]
"""A value computed from the store when its step runs (budgets and choices of earlier steps)."""


@dataclass(frozen=True)
class Step:
    """One step of a suite run: ``evaluate(store, protocol, model, tasks, method, settings=..., overrides=...,
    task_overrides=..., result_method=...)``.

    ``label`` names the step in the suite record (``step_times_s``) and is what ``--resume`` skips;
    ``always`` steps run even then (the comparison gathers every stored result). ``overrides`` and
    ``task_overrides`` may be functions of the store, called when the step runs: under the paper's
    protocol they read the step budget of the learning-curve step or the learning rate the lr check chose, and
    the per-task choices of the selection step, which earlier steps of the same suite wrote. ``result_method``
    may be one too: a row whose id depends on an earlier result (TaLoS at the dense baseline's chosen rate);
    ``None`` from it means the row is not needed this time, and the step writes nothing.
    """

    label: str
    protocol: str
    method: str
    tasks: tuple[str, ...]
    settings: Any  # a protocol's settings, or a function of the store returning them
    overrides: Mapping[str, Any] | Resolved
    always: bool = False
    task_overrides: Mapping[str, Mapping[str, Any]] | Resolved | None = None
    result_method: str | Resolved | None = None
    trains: bool = False  # fine-tunes the runs later steps use (``--stage train`` runs only these)
    uses: tuple[str, ...] = ()  # other fine-tuning methods whose runs it reads (talos_core.suites.executors.step_graph)
    # later steps of its method wait for it (a ``trains`` step whose runs or results they read); False: an lr
    # check that only reports (the runs later steps share with it are found or trained by them as usual)
    feeds: bool = True
    after: tuple[str, ...] = ()  # labels of earlier steps whose results it reads (talos_core.suites.executors)
    # the suite's row ids in table order: per-model tables (``single``, ...) keep their rows in this order whatever
    # order parallel writers come in (talos_core.evaluation.request.upsert)
    row_order: tuple[str, ...] = ()

    def resolve(self, store: Store) -> tuple[Any, dict, dict | None]:
        """``(settings, overrides, task_overrides)`` for this run of the step."""
        tov = _resolved(self.task_overrides, store)
        return (_resolved(self.settings, store), dict(_resolved(self.overrides, store)),
                None if tov is None else dict(tov))

    @property
    def row_key(self) -> str:
        """The id its results are written under, or (a row whose id an earlier result decides) its label's row."""
        if callable(self.result_method):
            return self.label.split(":")[0]
        return self.result_method or self.method

    def run(self, store: Store, model: str, suite: str, *, progress: bool = False) -> Any:
        """Resolve the step against ``store`` and evaluate it (its protocol writes its results), with the store's
        logits cache (:func:`logits_cache_dir`): a step cut off and run again, or a later step evaluating the same
        edit on the same split, reads what was computed. A row not needed this time (``result_method`` resolved to
        ``None``) writes nothing and returns ``None``."""
        from talos_core.evaluation.protocols import evaluate
        from talos_core.inference.cache import logits_cache

        result_method = _resolved(self.result_method, store)
        if callable(self.result_method) and result_method is None:
            return None
        settings, ov, per_task = self.resolve(store)
        with logits_cache(logits_cache_dir(store)):
            return evaluate(store, self.protocol, model, self.tasks, self.method, suite=suite, settings=settings,
                            overrides=ov, task_overrides=per_task, result_method=result_method,
                            progress=progress, row_order=self.row_order)


def logits_cache_dir(store: Store) -> Path:
    """The folder of a suite run's logits cache (:mod:`talos_core.inference.cache`) in ``store``; the suite removes
    it once complete."""
    return store.root / "checkpoints" / "logits"


def _resolved(value: Any, store: Store) -> Any:
    """``value(store)`` for a :data:`Resolved` function (settings dataclasses are not callable), else ``value``."""
    return value(store) if callable(value) else value


def _earlier(store: Store, kind: str, suite: str, model: str, method: str, what: str, step: str) -> tuple[str, dict]:
    """``(name, payload)`` of the ``kind`` result an earlier step of the suite wrote for ``method``; a store without it
    is one sentence naming ``what`` it was read for and the ``step`` that writes it."""
    from talos_core.schema import result_name

    name = result_name(suite, model, method)
    if name not in store.results(kind):
        raise TalosError(f"store {store.root} has no {kind.replace('_', ' ')} {name!r} to take {method!r}'s {what} "
                         f"from; run the suite's {step} step first")
    return name, store.read_result(kind, name)


def curve_budget(store: Store, suite: str, model: str, method: str) -> int:
    """The step budget the suite's learning-curve step chose for ``method`` (``results/learning_curve``)."""
    name, payload = _earlier(store, "learning_curve", suite, model, method, "step budget", "learning-curve")
    budget = payload.get("budget")
    if not is_int(budget) or budget < 1:
        raise TalosError(f"the learning curve {name!r} in {store.root} has no valid budget ({budget!r}); recompute it")
    return budget


def checked_lr(store: Store, suite: str, model: str, method: str) -> float:
    """The learning rate the suite's lr check chose for ``method`` (``results/lr_check``, written with
    ``chooses: true``)."""
    name, payload = _earlier(store, "lr_check", suite, model, method, "learning rate", "lr-check")
    lr = payload.get("best_lr")
    if not payload.get("chooses") or not is_number(lr) or not 0 < lr <= 1:
        raise TalosError(f"the lr check {name!r} in {store.root} did not choose a learning rate ({lr!r}); run it "
                         f"again with the suite")
    return float(lr)


def lr_check_tasks(spec: SuiteSpec, scale: str) -> tuple[str, ...]:
    """The tasks of the scale's lr check: its ``lr_check_tasks``, else the suite's first ξ pair (else its first two
    tasks); ``()`` without a check. A task the suite does not run is one :class:`TalosError` sentence.

    >>> from talos_core.suites.specs import get_suite
    >>> lr_check_tasks(get_suite("text"), "full"), lr_check_tasks(get_suite("text"), "mini")
    (('tweets', 'wordnet-verbs'), ())
    """
    sc = spec.scales[scale]
    if not sc.lr_check:
        return ()
    chosen = tuple(sc.lr_check_tasks) or (tuple(spec.xi_pairs[0]) if spec.xi_pairs else tuple(spec.tasks[:2]))
    for t in chosen:
        if t not in spec.tasks:
            raise TalosError(f"lr-check task {t!r} of suite {spec.name!r} is not one of its tasks; choose among: "
                             f"{', '.join(spec.tasks)}")
    if len(set(chosen)) != len(chosen):
        raise TalosError(f"lr-check task {next(t for t in chosen if chosen.count(t) > 1)!r} of suite "
                         f"{spec.name!r} is listed twice")
    return chosen


def suite_steps(spec: SuiteSpec, scale: str, ft_methods: Sequence[str], ph_methods: Sequence[str], *, seed: int,
                device: str, checkpoint_every: int = 0) -> list[Step]:
    """The steps of suite ``spec`` at ``scale`` for these fine-tuning and post-hoc methods, in order.

    Every fine-tuning method gets single, efficiency, masks, addition, negation, localization,
    linearization, preview and one disentanglement grid per ξ pair; then TaLoS vs LoTA masks (when
    both run), sharing on TaLoS's Fisher, the post-hoc methods on the ``nonlinear`` runs, the TaLoS
    sparsity ablation and the comparison table.

    Under the paper's protocol (a scale with ``curve_steps``, ``selection``, ``variants``), each method
    first gets its learning-curve step (its budget replaces ``steps`` from then on), its lr check (a scale with
    ``lr_check``: the method's runs at each learning rate, the fixed variant's where it has one, so the run at its
    own lr is that row's run) and, when it has a selected hyperparameter, its selection step (its main rows use
    the chosen run per task); each ``variants`` entry adds a fixed-hyperparameter row (e.g. ``talos-k0.9``) after
    its method's steps.

    The converged protocol of the ``full`` scales has no learning-curve step: every run trains up to ``steps`` with
    early stopping (the scale's ``eval_every``, ``early_stopping_patience``), so its curve is its own. With
    ``lr_choose`` the lr check comes first and chooses the method's learning rate, which every later step of the
    method reads from the store (:func:`checked_lr`); each ``one_rate_rows`` method then gets its fixed variant at
    the rate ``nonlinear``'s check chose (single, addition, negation; e.g. ``talos-k0.9-lr0.0001``), after every
    method's steps, written only where that rate differs from the method's own.
    """
    from talos_core.methods.posthoc import BASE_METHOD

    plan = _Plan(spec, scale, tuple(ft_methods), seed, _base_overrides(spec, scale, seed, device, checkpoint_every))
    check_tasks = lr_check_tasks(spec, scale)
    steps = []
    for m in ft_methods:
        steps += _lead_steps(plan, m, check_tasks) + _row_steps(plan, m) + _variant_steps(plan, m)
    if plan.sc.lr_chosen and BASE_METHOD in ft_methods:  # the one-rate rows: at the dense baseline's chosen rate
        steps += _one_rate_steps(plan)
    steps += _study_steps(plan, ph_methods)
    order = _row_order(steps, plan.sc.lr_check)
    return [replace(st, row_order=order) for st in steps]


def _base_overrides(spec: SuiteSpec, scale: str, seed: int, device: str, checkpoint_every: int) -> dict:
    """The fine-tuning settings every run of the suite at ``scale`` shares."""
    sc = spec.scales[scale]
    base = {"steps": sc.steps, "max_train": sc.max_train, "max_val": sc.max_val, "max_test": sc.max_test,
            "calib_samples": sc.calib_samples, "batch_size": sc.batch_size, "seed": seed, "device": device}
    if checkpoint_every:  # like ``device``: how the runs are made, not what they are (no run id includes it)
        base["checkpoint_every"] = int(checkpoint_every)
    if sc.train_precision is not None:
        base["train_precision"] = sc.train_precision
    base.update(sc.finetune_settings(spec.model))  # the paper suites' pinned settings (none for the shipped ones)
    return base


@dataclass(frozen=True)
class _Plan:
    """What the steps of one suite run share: the spec at its scale, its fine-tuning methods and their settings."""

    spec: SuiteSpec
    scale: str
    ft_methods: tuple[str, ...]
    seed: int
    base: Mapping[str, Any]

    @property
    def sc(self) -> Any:
        return self.spec.scales[self.scale]

    @property
    def tasks(self) -> tuple[str, ...]:
        return tuple(self.spec.tasks)

    @property
    def search(self) -> dict:
        """Every α search's grid rule."""
        return {"alpha_rule": self.sc.alpha_rule, "alpha_extend": self.sc.alpha_extend}

    def fixed(self, method: str) -> dict:
        lr = self.sc.lr_for(method)
        if lr is None and self.sc.lr_check:  # the model's default lr, named: with the lr check's other-lr runs in the
            from talos_core.evaluation.lr_check import own_lr  # store, a request without lr would find one of

            lr = own_lr(self.spec.model, self.tasks[0], method, self.base)  # them as compatible (find_run)
        return {**self.base, "lr": lr} if lr is not None else dict(self.base)

    def overrides(self, method: str, extra: Mapping[str, Any] | None = None, *, lr_of: str | None = None,
                  checked: bool = True) -> Mapping[str, Any] | Resolved:
        """The method's fine-tuning overrides: fixed, or with what earlier steps chose read when the step runs — the
        learning-curve budget, the learning rate the lr check of ``lr_of`` (default: the method) chose (``checked``:
        not for the check itself, which sets each candidate)."""
        sc, spec = self.sc, self.spec
        checked = checked and sc.lr_chosen
        if sc.curve_steps is None and not checked:
            return {**self.fixed(method), **(extra or {})}
        stopping = ({"eval_every": sc.curve_every, "early_stopping_patience": sc.budget_patience}
                    if sc.budget_patience else {})

        def resolved(store: Store) -> dict:
            out = dict(self.fixed(method))
            if sc.curve_steps is not None:
                out.update(steps=curve_budget(store, spec.name, spec.model, method), **stopping)
            if checked:
                out["lr"] = checked_lr(store, spec.name, spec.model, lr_of or method)
            return {**out, **(extra or {})}

        return resolved

    def chosen(self, method: str) -> Resolved | None:
        from talos_core.evaluation.selection import selected_overrides

        if self.sc.selection_for(method) is None:
            return None
        spec, tasks = self.spec, self.tasks
        return lambda store: selected_overrides(store, spec.name, spec.model, method, tasks)

    def variant(self, method: str) -> tuple[str, dict] | None:
        from talos_core.schema import variant_id

        found = self.sc.variant_for(method) if method in self.ft_methods else None
        if found is None:
            return None
        param, value = found
        return variant_id(method, **{param: value}), {param: value}


def _shared_rows(plan: _Plan) -> tuple[tuple[str, str, Any], ...]:
    """The rows every method's main row and its fixed variant share, after their single-task step."""
    from talos_core.evaluation.protocols import AdditionSettings, MaskSettings, NegationSettings, NoSettings

    sc, control = plan.sc, plan.spec.control_task
    return (("efficiency", "efficiency", NoSettings()),
            ("masks", "masks", MaskSettings()),
            ("addition", "addition", AdditionSettings(alpha_step=sc.alpha_step, **plan.search)),
            ("negation", "negation", NegationSettings(control_task=control, alpha_step=sc.alpha_step, **plan.search)))


def _lead_steps(plan: _Plan, m: str, check_tasks: tuple[str, ...]) -> list[Step]:
    """Method ``m``'s learning curve, lr check and hyperparameter selection, before its rows."""
    from talos_core.evaluation.learning_curve import LearningCurveSettings
    from talos_core.evaluation.lr_check import LrCheckSettings
    from talos_core.evaluation.selection import SelectionSettings

    sc, tasks, steps = plan.sc, plan.tasks, []
    if sc.curve_steps is not None:
        steps.append(Step(f"{m}: learning curve", "learning-curve", m, tasks,
                          LearningCurveSettings(eval_every=sc.curve_every, steps=sc.curve_steps,
                                                tolerance=sc.curve_tolerance), plan.fixed(m), trains=True))
    if sc.lr_check:  # the runs of its other rows (the fixed variant's where it has one) at each lr
        var = plan.variant(m)
        steps.append(Step(f"{m}: lr check", "lr-check", m, check_tasks,
                          LrCheckSettings(values=tuple(sc.lr_check), row=var[0] if var else None,
                                          choose=sc.lr_chosen),
                          plan.overrides(m, var[1] if var else None, checked=False), trains=True, feeds=sc.lr_chosen))
    sel = sc.selection_for(m)
    if sel is not None:
        steps.append(Step(f"{m}: selection ({sel[0]})", "selection", m, tasks,
                          SelectionSettings(param=sel[0], values=sel[1], control_task=plan.spec.control_task,
                                            alpha_step=sc.alpha_step, **plan.search), plan.overrides(m), trains=True))
    return steps


def _row_steps(plan: _Plan, m: str) -> list[Step]:
    """Method ``m``'s main row: single, the shared rows, localization, linearization, preview, examples and one
    disentanglement grid per ξ pair (each task with its selected run where the method has a selection)."""
    from talos_core.evaluation.protocols import (
        DisentanglementSettings,
        EvalSettings,
        ExamplesSettings,
        PreviewSettings,
    )

    sc, tasks, control, seed, per_task = plan.sc, plan.tasks, plan.spec.control_task, plan.seed, plan.chosen(m)
    steps = [Step(f"{m}: {what}", protocol, m, tasks, settings, plan.overrides(m), task_overrides=per_task,
                  trains=protocol == "single")
             for what, protocol, settings in (
        ("fine-tune + single", "single", EvalSettings()),
        *_shared_rows(plan),
        ("localization", "localization", EvalSettings()),
        ("linearization", "linearization", EvalSettings()),
        ("preview", "preview", PreviewSettings(points=sc.preview_points, seed=seed)),
    )]
    if sc.examples:  # at the α its addition and negation searched (an extended grid included): after them
        steps.append(Step(f"{m}: examples", "examples", m, tasks,
                          ExamplesSettings(points=sc.examples, seed=seed, control_task=control,
                                           alpha_step=sc.alpha_step, alpha_rule=sc.alpha_rule), plan.overrides(m),
                          task_overrides=per_task, after=(f"{m}: addition", f"{m}: negation")))
    steps += [Step(f"{m}: disentanglement {a}/{b}", "disentanglement", m, (a, b),
                   DisentanglementSettings(grid=sc.xi_grid, points=sc.xi_points, seed=seed,
                                           alpha_step=sc.alpha_step), plan.overrides(m), task_overrides=per_task)
              for a, b in plan.spec.xi_pairs]
    return steps


def _variant_steps(plan: _Plan, m: str) -> list[Step]:
    """Method ``m``'s fixed-hyperparameter row (e.g. ``talos-k0.9``) and its labelled learning-rate rows."""
    from talos_core.evaluation.protocols import AdditionSettings, EvalSettings, NegationSettings
    from talos_core.schema import variant_id

    sc, tasks, control, steps = plan.sc, plan.tasks, plan.spec.control_task, []
    var = plan.variant(m)
    if var is not None:
        vid, extra = var
        steps += [Step(f"{vid}: {what}", protocol, m, tasks, settings, plan.overrides(m, extra), result_method=vid,
                       trains=protocol == "single")
                  for what, protocol, settings in (("single", "single", EvalSettings()), *_shared_rows(plan))]
    for row_method, row_lr in sc.lr_rows:  # the labelled per-method learning-rate rows
        if row_method != m or sc.lr_chosen:
            continue
        extra = {**(var[1] if var is not None else {}), "lr": row_lr}
        rid = variant_id(m, **extra)
        steps += [Step(f"{rid}: {what}", protocol, m, tasks, settings, plan.overrides(m, extra), result_method=rid,
                       trains=protocol == "single")
                  for what, protocol, settings in (
            ("single", "single", EvalSettings()),
            ("addition", "addition", AdditionSettings(alpha_step=sc.alpha_step)),
            ("negation", "negation", NegationSettings(control_task=control, alpha_step=sc.alpha_step)),
        )]
    return steps


def _one_rate_steps(plan: _Plan) -> list[Step]:
    """Each ``one_rate_rows`` method's fixed variant at the rate the dense baseline's lr check chose."""
    from talos_core.evaluation.protocols import AdditionSettings, EvalSettings, NegationSettings
    from talos_core.methods.posthoc import BASE_METHOD

    sc, spec, control, steps = plan.sc, plan.spec, plan.spec.control_task, []
    for m in (m for m in sc.one_rate_rows if m in plan.ft_methods):
        var = plan.variant(m)
        extra = var[1] if var is not None else {}
        label = f"{var[0] if var is not None else m} at {BASE_METHOD}'s lr"
        rid = _one_rate_id(spec.name, spec.model, m, extra)
        steps += [Step(f"{label}: {what}", protocol, m, plan.tasks, settings,
                       plan.overrides(m, extra, lr_of=BASE_METHOD), result_method=rid, trains=protocol == "single",
                       after=(f"{BASE_METHOD}: lr check",))
                  for what, protocol, settings in (
            ("single", "single", EvalSettings()),
            ("addition", "addition", AdditionSettings(alpha_step=sc.alpha_step, **plan.search)),
            ("negation", "negation", NegationSettings(control_task=control, alpha_step=sc.alpha_step, **plan.search)),
        )]
    return steps


def _study_steps(plan: _Plan, ph_methods: Sequence[str]) -> list[Step]:
    """The studies of the method the suite is about (the declaration with ``studied``: its masks against its rival's
    at equal sparsity, sharing on its Fisher, its sparsity ablation, the comparison table) and the post-hoc merges
    of the dense baseline's runs."""
    from talos_core.evaluation.ablation import AblationSettings
    from talos_core.evaluation.posthoc import PosthocSettings
    from talos_core.evaluation.protocols import MaskSettings, NoSettings, SharingSettings
    from talos_core.methods.posthoc import BASE_METHOD
    from talos_core.schema import METHODS

    sc, tasks, control, seed, ft = plan.sc, plan.tasks, plan.spec.control_task, plan.seed, plan.ft_methods
    m = next(name for name, info in METHODS.items() if info.studied)
    rival, steps = METHODS[m].mask_rival, []
    if rival is not None and m in ft and rival in ft:  # both are fine-tuned by now
        own_var, rival_var = plan.variant(m), plan.variant(rival)
        if own_var is not None and rival_var is not None:  # the fixed-hyperparameter rows: masks of equal sparsity
            rival_ov = plan.overrides(rival, rival_var[1])
            compare = lambda store: MaskSettings(compare_method=rival,  # noqa: E731
                                                 compare_overrides=_resolved(rival_ov, store),
                                                 compare_label=rival_var[0])
            steps.append(Step(f"{m} vs {rival} masks", "masks", m, tasks, compare,
                              plan.overrides(m, own_var[1]), result_method=own_var[0], uses=(rival,)))
        elif sc.curve_steps is None and not sc.selection:
            steps.append(Step(f"{m} vs {rival} masks", "masks", m, tasks,
                              MaskSettings(compare_method=rival, compare_overrides=plan.overrides(rival)),
                              plan.overrides(m), uses=(rival,)))
    own_var = plan.variant(m)
    steps += [Step(f"sharing ({mode})", "sharing", m, tasks,
                   SharingSettings(mode=mode, samples=sc.sharing_samples, seed=seed),
                   plan.overrides(m, own_var[1] if own_var else None))
              for mode in ("prune", "perturb")]
    if BASE_METHOD in ft:  # post-hoc methods merge its runs
        steps += [Step(f"{ph}: post-hoc addition + negation", "posthoc", ph, tasks,
                       PosthocSettings(control_task=control, alpha_step=sc.alpha_step, max_points=sc.posthoc_points,
                                       alpha_extend=sc.alpha_extend), plan.overrides(BASE_METHOD))
                  for ph in ph_methods]
    if m in ft and sc.ablation:
        steps.append(Step(f"{m} sparsity ablation", "sparsity-ablation", m, tasks,
                          AblationSettings(sparsities=tuple(sc.ablation), control_task=control,
                                           alpha_step=sc.alpha_step, **plan.search), plan.overrides(m)))
    steps.append(Step("comparison", "comparison", m, tasks, NoSettings(), {}, always=True))
    return steps


def _one_rate_id(suite: str, model: str, method: str, extra: Mapping[str, Any]) -> Resolved:
    """The id of ``method``'s one-rate row (its fixed variant ``extra`` at the rate ``nonlinear``'s lr check chose),
    or ``None`` when that is the rate the method's own check chose (the row would repeat its variant)."""
    from talos_core.evaluation.lr_check import same_lr
    from talos_core.methods.posthoc import BASE_METHOD
    from talos_core.schema import variant_id

    def rid(store: Store) -> str | None:
        dense = checked_lr(store, suite, model, BASE_METHOD)
        if same_lr(dense, checked_lr(store, suite, model, method)):
            return None
        return variant_id(method, **{**extra, "lr": dense})

    return rid


def _row_order(steps: Sequence[Step], lr_values: Sequence[float]) -> tuple[str, ...]:
    """Every row id the steps write under, in table order; a row whose id a store result decides (a one-rate row)
    stands for each id it may take (one per checked learning rate)."""
    from talos_core.schema import parse_variant, variant_id

    out: dict[str, None] = {}
    for st in steps:
        if st.always:
            continue
        if callable(st.result_method):  # its label names the fixed variant: "talos-k0.9 at nonlinear's lr"
            parsed = parse_variant(st.row_key.split(" ")[0])
            params = parsed[1] if parsed else {}
            out.update(dict.fromkeys(variant_id(st.method, **{**params, "lr": v}) for v in lr_values))
        else:
            out[st.row_key] = None
    return tuple(out)


@dataclass(frozen=True)
class SuiteRow:
    """How a suite evaluated one of its rows (:func:`suite_row`): what ``evaluate`` needs to evaluate the same runs
    again under another protocol."""

    model: str
    method: str
    tasks: tuple[str, ...]
    overrides: dict
    task_overrides: dict | None
    result_method: str | None
    settings: dict  # the suite's evaluation settings of the row (``alpha_step``, ``control_task``)


def suite_row(store: Store, suite: str, row: str) -> SuiteRow:
    """Row ``row`` (``talos``, ``talos-k0.9``, …) of the suite whose record ``store`` holds, as the suite's own
    ``<row>: addition`` step resolves it from the store (its runs' settings, per-task choices and result id), so a
    protocol run with it (``talos evaluate PROTOCOL --suite S --suite-row R``) finds the suite's runs. A suite the
    store has no record of, or a row it did not evaluate, is one :class:`TalosError` sentence."""
    from talos_core.errors import unknown
    from talos_core.suites.specs import get_suite, with_model

    if suite not in store.results("suite"):
        raise TalosError(f"no record of suite {suite!r} in {store.root}; --suite-row needs the store a suite ran into")
    meta = store.read_result("suite", suite)
    spec = get_suite(suite)
    spec = with_model(spec, meta.get("model") if meta.get("model") != spec.model else None)
    scale = str(meta.get("scale"))
    if scale not in spec.scales:
        raise unknown(f"scale of suite {suite!r} (its record)", scale, spec.scales)
    steps = suite_steps(spec, scale, list(meta.get("methods") or spec.methods),
                        list(spec.posthoc if meta.get("posthoc") is None else meta["posthoc"]),
                        seed=int(meta.get("seed", 0)), device="auto")
    rows = {}
    for st in (st for st in steps if st.label.endswith(": addition")):
        try:
            rid = _resolved(st.result_method, store)
        except TalosError:  # a row whose id an lr check the store lacks decides
            continue
        if rid is not None or not callable(st.result_method):
            rows[rid or st.method] = st
    if row not in rows:
        raise unknown(f"row of suite {suite!r}", row, rows)
    st = rows[row]
    settings, ov, per_task = st.resolve(store)
    return SuiteRow(spec.model, st.method, tuple(st.tasks), ov, per_task, None if row == st.method else row,
                    {"alpha_step": settings.alpha_step, "control_task": spec.control_task})

