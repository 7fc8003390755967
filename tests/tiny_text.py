"""The tiny-text protocol setting shared by the evaluation, selection and examples tests: two tasks, a control
task, and run overrides small enough that a fine-tuning takes a few seconds on one thread."""

MODEL = "tiny-text"
TASKS = ["drug-reviews", "wordnet-verbs"]
CONTROL = "tweets"
OVERRIDES = dict(steps=5, max_train=64, max_val=32, max_test=64, calib_samples=16, batch_size=8, rounds=1,
                 lr=5e-3)
