"""Which code produced a result: the package's version and, when it runs from a git checkout, the commit and whether
the checkout's tracked files differ from it. A suite records it in each session of its record, so a suite resumed
across machines and sessions says which code ran which steps (a run continued from a worktree at a fixed commit, a
part on a lent GPU at another one).

>>> sorted(code_version(Path("/nonexistent")))
['commit', 'dirty', 'talos_core']
"""

from __future__ import annotations

import subprocess
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def _git(root: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def code_version(package: Path = _PACKAGE) -> dict:
    """``{"talos_core": version, "commit": sha or None, "dirty": bool or None}`` of the code in ``package`` (this
    package by default): ``commit`` is the checkout's HEAD when the package sits in a git work tree (None from a
    wheel, without git, or inside a repository that does not track it), ``dirty`` whether the package's tracked
    files differ from it."""
    from talos_core import __version__

    root = _git(package, "rev-parse", "--show-toplevel") if package.is_dir() else None
    if root and _git(Path(root), "ls-files", "--error-unmatch", "--", str(package / "__init__.py")) is None:
        root = None  # installed inside some other repository (a venv in a user's project): not this code's commit
    commit = _git(Path(root), "rev-parse", "HEAD") if root else None
    status = _git(Path(root), "status", "--porcelain", "--untracked-files=no", "--", str(package)) if commit else None
    return {"talos_core": __version__, "commit": commit, "dirty": None if status is None else bool(status)}


__all__ = ["code_version"]
