"""The torchvision CPU guard: registers the two missing op schemas once, is a no-op otherwise."""

import subprocess
import sys

from talos_core import _torchvision_guard


def test_guard_is_noop_once_torchvision_imported():
    import torchvision  # noqa: F401  (works because talos_core installed the guard)

    assert _torchvision_guard.install() == []
    assert _torchvision_guard.missing_ops() == []


def test_guard_in_fresh_interpreter():
    code = (
        "import torch\n"
        "from talos_core import _torchvision_guard as g\n"
        "missing_before = g.missing_ops()\n"
        "registered = g.install()\n"
        "assert sorted(registered) == sorted(missing_before), (registered, missing_before)\n"
        "assert g.install() == []\n"
        "import torchvision, open_clip\n"
        "print('ok', sorted(missing_before))\n"
    )
    # importing talos_core itself calls install(); run the module directly to see the raw state
    out = subprocess.run([sys.executable, "-c", code.replace("from talos_core import _torchvision_guard as g",
                                                            "import importlib.util, sys\n"
                                                            "spec = importlib.util.spec_from_file_location('g', "
                                                            f"{_torchvision_guard.__file__!r})\n"
                                                            "g = importlib.util.module_from_spec(spec); "
                                                            "spec.loader.exec_module(g)")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith("ok")


def test_guard_runs_lazily_before_torchvision():
    """``import talos_core`` imports no torch; the guard runs when torchvision is first looked up."""
    code = (
        "import sys\n"
        "import talos_core\n"
        "from talos_core import _torchvision_guard as g\n"
        "hooks = [f for f in sys.meta_path if isinstance(f, g._BeforeTorchvision)]\n"
        "assert len(hooks) == 1 and 'torch' not in sys.modules, (hooks, 'torch' in sys.modules)\n"
        "g.install_hook()\n"
        "assert sum(isinstance(f, g._BeforeTorchvision) for f in sys.meta_path) == 1, 'idempotent'\n"
        "import open_clip, torchvision\n"
        "assert not any(isinstance(f, g._BeforeTorchvision) for f in sys.meta_path), 'hook removed itself'\n"
        "assert g.missing_ops() == []\n"
        "g.install_hook()\n"
        "assert not any(isinstance(f, g._BeforeTorchvision) for f in sys.meta_path), 'no hook once imported'\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "ok"
