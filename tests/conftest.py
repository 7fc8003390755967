"""Shared fixtures: tiny models with a task head, small real task splits, temporary stores."""

from __future__ import annotations

import os

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# evaluate in fp32 on every machine (and in the CLI subprocesses tests start): bf16 on AMX CPUs would make
# exact-value tests depend on the CPU; tests of bf16 evaluation ask for it explicitly
os.environ.setdefault("TALOS_EVAL_PRECISION", "fp32")

import pytest
import torch

import talos_core  # noqa: F401  (installs the torchvision guard)

torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))

# the synthetic dashboard store fixtures (fixture_store, dashboard_store), for every test module
pytest_plugins = ["dashboard_fixtures"]


@pytest.fixture(scope="module")
def one_thread():
    """One torch thread for the module's tests (``pytestmark = pytest.mark.usefixtures("one_thread")``): the
    tiny-model numbers they compare do not depend on how many threads a machine has."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


TINY_TASKS = {"tiny-clip": "digits", "tiny-text": "drug-reviews", "tiny-t5": "drug-reviews"}


@pytest.fixture(scope="session")
def tiny_setup():
    """``{model_name: (model_with_head, task_spec, task_data)}`` for the three tiny families."""
    from talos_core.models import load_model
    from talos_core.tasks import get_task, load_task

    out = {}
    for name, task_name in TINY_TASKS.items():
        model = load_model(name)
        task = get_task(task_name)
        model.set_head(model.build_head(task), task.name)
        data = load_task(task_name, max_train=64, max_val=32, max_test=32)
        out[name] = (model, task, data)
    return out
