"""What one dashboard server lets its visitors see and do (a workshop runs one server for a room).

* **Stores only under configured roots.** A visitor picks a store from a list; the URL's ``?store=``
  must name one of them. The list: the shipped results (``cached_results/`` of a source checkout),
  the user's own store (``$TALOS_STORE``, else ``./runs``) and, for every extra root
  (``talos dashboard --store-root DIR``, or ``$TALOS_DASHBOARD_ROOTS``, ``os.pathsep``-separated), the root
  itself when it is a store and its direct sub-folders that are stores (hold ``results/`` or ``runs/``).
  Anything else is refused with one sentence that is the same whether the path exists or not, and
  nothing is created.
* **The Run page writes into the user's store only**, never into the shipped results.
* **Read-only ("workshop") mode** (``--read-only`` / ``TALOS_DASHBOARD_READ_ONLY=1``): no Run page. A value of
  the variable other than 1/true/yes/on or 0/false/no/off is refused (a typo must not start a writable server).
* **Job caps** (:class:`dashboard.jobs.JobLimits`): concurrent jobs, steps, examples per split.
* **Upload caps** (:class:`dashboard.uploads.UploadLimits`): the Run page's uploads (size, unpacked size, files);
  uploads are saved in the user's store (``uploads/``) only.

Pure functions of an environment mapping (no Streamlit), so they are tested without a server:

    >>> cfg = ServerConfig.from_env({"TALOS_STORE": "/tmp/mine"})
    >>> str(cfg.user_store), cfg.read_only
    ('/tmp/mine', False)
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from dashboard.jobs import JobLimits
from dashboard.uploads import UploadLimits
from talos_core.errors import TalosError, check_flag
from talos_core.schema import STORE_ENV, USER_STORE, shipped_store

ROOTS_ENV = "TALOS_DASHBOARD_ROOTS"
READ_ONLY_ENV = "TALOS_DASHBOARD_READ_ONLY"


class StoreRefused(TalosError):
    """A store the server does not serve (one sentence; never says whether the path exists)."""

    level = "error"


@dataclass(frozen=True)
class StoreChoice:
    """One selectable store: its folder (absolute), what it is and how the picker shows it."""

    path: Path
    kind: str  # "shipped" | "user" | "extra"
    root: Path | None = None  # the extra root it was found under

    @property
    def key(self) -> str:
        """The value in the URL (``?store=``): the absolute folder."""
        return str(self.path)

    @property
    def label(self) -> str:
        if self.kind == "shipped":
            return f"Shipped results · {self.path.name}/ (read-only)"
        if self.kind == "user":
            return f"Your store · {self.path}"
        return f"{self.path.name} · under {self.root}"

    @property
    def description(self) -> str:
        if self.kind == "shipped":
            return "the shipped results (read-only: the Run page never writes here)"
        if self.kind == "user":
            return "your own store (the Run page writes here)"
        return f"a store under the configured root {self.root}"


#: a model hub name: ``name`` or ``org/name``, no path syntax (``..``, leading ``/``, ``~``)
_PART = r"[A-Za-z0-9][A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]+)*"
_HUB_NAME = re.compile(rf"{_PART}(?:/{_PART})?")


def _absolute(path: Path) -> Path:
    return Path(os.path.abspath(path.expanduser()))


def is_store(path: Path) -> bool:
    """A folder written by the ``talos`` CLI: it holds ``results/`` or ``runs/``."""
    try:
        return path.is_dir() and ((path / "results").is_dir() or (path / "runs").is_dir())
    except OSError:
        return False


def _inside(path: Path, root: Path) -> bool:
    try:
        return path.resolve().is_relative_to(root.resolve())
    except (OSError, RuntimeError):
        return False


@dataclass(frozen=True)
class ServerConfig:
    """The server's policy, read once from the environment the ``talos dashboard`` command sets."""

    shipped: Path | None
    user_store: Path
    roots: tuple[Path, ...] = ()
    read_only: bool = False
    limits: JobLimits = field(default_factory=JobLimits)
    uploads: UploadLimits = field(default_factory=UploadLimits)
    default: Path | None = None  # the store shown first ($TALOS_STORE, else the shipped results)
    store_given: bool = False  # $TALOS_STORE (`talos dashboard --store`) named the store to show first

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ServerConfig:
        env = os.environ if env is None else env
        shipped = shipped_store()
        shipped = _absolute(shipped) if shipped is not None else None
        given = env.get(STORE_ENV, "").strip()
        user = _absolute(Path(given)) if given else _absolute(Path(USER_STORE))
        default = user if given else (shipped or user)
        if shipped is not None and user.resolve() == shipped.resolve():
            # `talos dashboard --store cached_results`: shown first, but the Run page writes into ./runs
            user = _absolute(Path(USER_STORE))
        roots = tuple(_absolute(Path(p)) for p in env.get(ROOTS_ENV, "").split(os.pathsep) if p.strip())
        return cls(shipped=shipped, user_store=user, roots=roots,
                   read_only=check_flag(READ_ONLY_ENV, env.get(READ_ONLY_ENV)),
                   limits=JobLimits.from_env(env), uploads=UploadLimits.from_env(env), default=default,
                   store_given=bool(given))

    def stores(self) -> list[StoreChoice]:
        """The selectable stores, shipped first, then the user's, then those under extra roots (by name).

        The user's store is listed even before it exists (the Run page creates it), except in read-only mode.
        """
        out: list[StoreChoice] = []
        seen: set[Path] = set()

        def add(choice: StoreChoice) -> None:
            real = choice.path.resolve()
            if real not in seen:
                seen.add(real)
                out.append(choice)

        if self.shipped is not None:
            add(StoreChoice(self.shipped, "shipped"))
        if not self.read_only or is_store(self.user_store):
            add(StoreChoice(self.user_store, "user"))
        for root in self.roots:
            if is_store(root):
                add(StoreChoice(root, "extra", root))
            try:
                children = sorted(p for p in root.iterdir() if not p.name.startswith("."))
            except OSError:
                continue
            for child in children:
                if is_store(child) and _inside(child, root):
                    add(StoreChoice(child, "extra", root))
        return out

    def default_choice(self) -> StoreChoice:
        stores = self.stores()
        for c in stores:
            if self.default is not None and c.path == self.default:
                return c
        return stores[0] if stores else StoreChoice(self.user_store, "user")

    def resolve(self, text: str) -> StoreChoice:
        """The store a ``?store=`` value names: one of :meth:`stores` (by its key, or a path that resolves
        to it); else :class:`StoreRefused`, the same sentence whether ``text`` exists or not."""
        stores = self.stores()
        text = (text or "").strip()
        for c in stores:
            if text == c.key:
                return c
        if text:
            try:
                real = _absolute(Path(text)).resolve()
            except (OSError, RuntimeError, ValueError):
                real = None
            for c in stores:
                if real is not None and c.path.resolve() == real:
                    return c
        shown = text if len(text) <= 200 else text[:200] + "…"
        raise StoreRefused(f"The store {shown!r} is not one this dashboard serves; pick one of the stores listed "
                           f"in the sidebar (this server shows only stores under its configured folders).")

    def model_problem(self, name: str) -> str | None:
        """Why the Run page must not launch a typed model spec ``name`` (``None``: it may): a registered model, or
        ``clip:<arch>:<tag>``, ``t5:<id>``, ``hf-encoder:<id>`` whose parts are hub names (letters, digits, ``.``,
        ``_``, ``-``, one ``/`` for ``org/name``); a local folder only inside this server's stores or store roots —
        never another path of the server's filesystem (a model loader reads any folder it is given)."""
        from talos_core.models import MODELS

        if name in MODELS:
            return None
        kind, _, rest = name.partition(":")
        parts = rest.split(":") if kind == "clip" else [rest]
        allowed = "a registered model, clip:<arch>:<tag>, t5:<org/name> or hf-encoder:<org/name> with hub names"
        if kind not in ("clip", "t5", "hf-encoder") or not rest or (kind == "clip" and len(parts) > 2):
            return f"model {name!r} is not {allowed}"
        if all(_HUB_NAME.fullmatch(p) and not (Path(p).exists() and kind != "clip") for p in parts):
            return None
        path = _absolute(Path(rest))
        if kind != "clip" and path.is_dir() and any(_inside(path, r) for r in (self.user_store, *self.roots)):
            return None
        return (f"model {name!r} names a path outside this server's stores; give {allowed}, or a folder inside "
                f"{self.user_store}")

    def writable_store(self) -> Path:
        """Where the Run page writes: the user's store; never the shipped results, never in read-only mode."""
        if self.read_only:
            raise TalosError("this dashboard runs in read-only mode: it computes nothing and writes nothing")
        if self.shipped is not None and self.user_store.resolve() == self.shipped.resolve():
            raise TalosError(f"the Run page does not write into the shipped results {self.shipped}; "
                             f"set TALOS_STORE (or `talos dashboard --store DIR`) to your own folder")
        return self.user_store
