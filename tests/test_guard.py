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
