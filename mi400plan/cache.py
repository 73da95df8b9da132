"""Content-addressed cache of parsed and validated profiles.

Reading a profile means parsing its TOML and validating it against its spec model; both are pure
functions of the file's text. The catalog therefore keeps, in the user cache directory, the parsed
dict and the validated spec of every profile file it has read, keyed by the SHA-256 of the file's
text. An edited file has a new hash, so edits are always seen. The cache file is tied to the
planner's version, the spec modules' source, Python's minor version and pydantic's version (any
change starts a new cache file), carries a SHA-256 of its own payload, and is ignored when it does
not check out (truncated, corrupted, wrong types): it is never trusted over the profile files.

Where: ``$MI400PLAN_CACHE_DIR``, else ``$XDG_CACHE_HOME/mi400plan``, else ``~/.cache/mi400plan``.
``MI400PLAN_NO_CACHE=1`` turns it off. Like Python's own ``__pycache__``, the cache directory is
trusted as much as the user's profile directories (it holds pickled data written by the planner).
A cache that cannot be read or written is skipped silently: it only saves time.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

CACHE_ENV = "MI400PLAN_CACHE_DIR"
OFF_ENV = "MI400PLAN_NO_CACHE"
_MAGIC = b"mi4pc\x00\x02\n"  # 2: each value pickled on its own, unpickled when first asked for
_DIGEST = 32
# Past this many texts, a write keeps only the ones this process used (edited files leave old hashes).
MAX_ENTRIES = 1000


def cache_dir() -> Path | None:
    """The cache directory from the environment, or None when caching is off."""
    if os.environ.get(OFF_ENV, "").strip() not in ("", "0"):
        return None
    explicit = os.environ.get(CACHE_ENV, "").strip()
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "mi400plan"


def package_dir(name: str) -> Any:
    """A directory shipped inside the installed package. A plain path when the package is installed
    as files (any pip install), or the checkout's own folder when the source tree runs in place
    (``python -m mi400plan`` in a clone: the wheel maps ``profiles/`` into the package);
    ``importlib.resources`` (whose import and first lookup cost about 4 ms of every start-up) only
    for a package imported from a zip archive."""
    here = Path(__file__).parent / name
    if here.is_dir():
        return here
    checkout = Path(__file__).parent.parent / name  # run in place from a source checkout, where the
    if checkout.is_dir() and (checkout.parent / "pyproject.toml").is_file():  # wheel's map is not applied
        return checkout
    from importlib import resources

    return resources.files("mi400plan") / name


def _fingerprint() -> str:
    """What the cached objects depend on besides the profile text."""
    import pydantic

    from mi400plan import __version__

    h = hashlib.sha256(f"{__version__}|{sys.version_info[:2]}|{pydantic.VERSION}".encode())
    specs = package_dir("specs")
    for f in sorted((f for f in specs.iterdir() if f.name.endswith(".py")), key=lambda f: f.name):
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class ProfileCache:
    """Parsed TOML dicts and validated specs by profile text hash; one pickle file on disk.

    Each value is stored as its own pickle inside the file, so a run unpickles only the profiles it
    uses (unpickling a validated spec imports its model's module and restores a pydantic object)."""

    def __init__(self, root: Path | None) -> None:
        self._root = root
        self._entries: dict[str, dict[str, Any]] | None = None
        self._dirty = False
        self._path: Path | None = None
        self._used: set[str] = set()

    @classmethod
    def default(cls) -> "ProfileCache":
        return cls(cache_dir())

    @property
    def path(self) -> Path | None:
        if self._root is not None and self._path is None:
            self._path = self._root / f"profiles-{_fingerprint()}.pickle"
        return self._path

    def _load(self) -> dict[str, dict[str, Any]]:
        if self._entries is None:
            self._entries = _read(self.path) if self._root is not None else {}
        return self._entries

    def _entry(self, text: str) -> dict[str, Any]:
        key = text_key(text)
        self._used.add(key)
        return self._load().setdefault(key, {})

    def _memo(self, text: str, slot: str, cls: type, compute: Callable[[], Any]) -> Any:
        """``slot`` of ``text``'s entry when the cache holds a ``cls`` there, else ``compute()``, remembered.
        An exception from ``compute`` (a parse or validation error) is never cached."""
        entry = self._entry(text)
        value = _unpickle(entry.get(slot))
        if isinstance(value, cls):
            return value
        value = compute()
        entry[slot] = _pickle(value)
        self._dirty = True
        return value

    def parsed(self, text: str, parse: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """The parsed TOML of ``text``: from the cache, or ``parse()`` (then remembered)."""
        return self._memo(text, "raw", dict, parse)

    def head(self, text: str, compute: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """The catalog index's few fields of ``text`` (name, aliases, top-level strings): from the cache,
        or ``compute()``. Unpickling this small dict instead of the whole parsed file keeps indexing a
        kind of profiles cheap."""
        return self._memo(text, "head", dict, compute)

    def validated(self, kind: str, text: str, cls: type, validate: Callable[[], Any]) -> Any:
        """The validated spec of ``text`` as ``kind``: from the cache if it is a ``cls``, else
        ``validate()`` (then remembered). Validation errors are never cached."""
        return self._memo(text, f"spec:{kind}", cls, validate)

    def flush(self) -> None:
        """Write new entries (atomically); any failure only costs the next run its time."""
        if not self._dirty or self._root is None or self._entries is None:
            return
        self._dirty = False
        path = self.path
        assert path is not None
        keep = self._entries
        if len(keep) > MAX_ENTRIES:
            keep = {k: v for k, v in keep.items() if k in self._used}
        try:
            payload = pickle.dumps(keep, protocol=pickle.HIGHEST_PROTOCOL)
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".profiles.", suffix=".tmp", dir=path.parent)
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(_MAGIC + hashlib.sha256(payload).digest() + payload)
                os.replace(tmp, path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except Exception:  # noqa: BLE001 - a read-only or full cache directory is not an error
            return


def _pickle(value: Any) -> bytes | None:
    try:
        return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 - an unpicklable value is simply not cached
        return None


def _unpickle(blob: Any) -> Any:
    """A cached value, or None when absent or unreadable (the caller recomputes it)."""
    if not isinstance(blob, bytes):
        return None
    try:
        return pickle.loads(blob)  # noqa: S301 - the planner's own file, checksummed
    except Exception:  # noqa: BLE001 - unreadable means absent
        return None


def _read(path: Path | None) -> dict[str, dict[str, Any]]:
    """The cache file's entries, or {} when it is missing or does not check out."""
    if path is None:
        return {}
    try:
        blob = path.read_bytes()
    except OSError:
        return {}
    head = len(_MAGIC) + _DIGEST
    if not blob.startswith(_MAGIC) or len(blob) <= head:
        return {}
    payload = blob[head:]
    if hashlib.sha256(payload).digest() != blob[len(_MAGIC) : head]:
        return {}
    try:
        data = pickle.loads(payload)  # noqa: S301 - the planner's own file, checksummed
    except Exception:  # noqa: BLE001 - unreadable means absent
        return {}
    if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, dict) for k, v in data.items()):
        return {}
    return data
