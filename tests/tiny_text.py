"""The tiny-text protocol setting shared by the evaluation, selection and examples tests: two tasks, a control
task, and run overrides small enough that a fine-tuning takes a few seconds on one thread."""

MODEL = "tiny-text"
TASKS = ["drug-reviews", "wordnet-verbs"]
CONTROL = "tweets"
OVERRIDES = dict(steps=5, max_train=64, max_val=32, max_test=64, calib_samples=16, batch_size=8, rounds=1,
                 lr=5e-3)


def with_curves_scale(spec):
    """``spec`` (the ``tiny`` suite) with a scale ``curves``: the learning-curve protocol the ``full`` scales ran before
    the converged one (a step budget read off learning curves, an lr check that reports, a labelled lr row), which
    the code keeps for other scales; the tests of that path run it here."""
    from dataclasses import replace

    curves = replace(spec.scales["paper"], steps=4, eval_every=None, early_stopping_patience=0, lr=1e-3,
                     curve_steps=6, curve_every=2, curve_tolerance=0.01, lr_check=(1e-4, 1e-3), lr_choose=False,
                     one_rate_rows=(), alpha_rule="paper", alpha_extend=0.0)
    return replace(spec, scales={**spec.scales, "curves": curves})
