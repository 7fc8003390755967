"""Which code ran a suite session (``talos_core.provenance.code_version``): this checkout's commit, and none where the
package sits inside a repository that does not track it (a virtual environment inside a user's project)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from talos_core.provenance import code_version

REPO = Path(__file__).resolve().parent.parent


def test_this_checkout_gives_its_head():
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    info = code_version()
    assert info["commit"] == head and info["dirty"] in (True, False) and info["talos_core"]


def test_a_package_another_repository_does_not_track_has_no_commit(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q",
                    "--allow-empty", "-m", "user's project"], check=True)
    package = tmp_path / ".venv" / "site-packages" / "talos_core"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    assert code_version(package) == {"talos_core": code_version()["talos_core"], "commit": None, "dirty": None}
