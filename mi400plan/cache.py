"""Content-addressed cache of parsed and validated profiles.

Reading a profile means parsing its TOML and validating it against its spec model; both are pure
functions of the file's text. The catalog therefore keeps, in the user cache directory, the parsed
dict and the validated spec of the profile files it has read, one file per text named by the SHA-256
of the text. An edited file has a new hash, so edits are always seen. The entry files live in a
directory tied to the planner's version, the spec modules' source, Python's minor version and
pydantic's version (any change starts a new directory); each carries a SHA-256 of its own payload and
is ignored when it does not check out (truncated, corrupted, wrong types): it is never trusted over
the profile files. The cache is bounded in entries and in bytes (least recently used out) and skips
texts over 2**20 characters, so one huge user profile neither fills the disk nor slows later commands.

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
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

CACHE_ENV = "MI400PLAN_CACHE_DIR"
OFF_ENV = "MI400PLAN_NO_CACHE"
_MAGIC = b"mi4pc\x00\x03\n"  # 3: one file per profile text; each value pickled on its own
_DIGEST = 32
# Bounds, so that no input grows the cache without limit: a text longer than MAX_TEXT_CHARS characters
# (bundled profiles are under 40 kB) is never cached, nor an entry file over MAX_ENTRY_BYTES; past MAX_ENTRIES
# files or MAX_BYTES in all, the least recently used entries are removed when a new one is written.
MAX_TEXT_CHARS = 1 << 20
MAX_ENTRY_BYTES = 4 << 20
MAX_ENTRIES = 1000
MAX_BYTES = 64 << 20
# A hit refreshes its file's modification time (the LRU clock) at most this often, seconds.
_TOUCH_AFTER_S = 3600.0


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
    """Parsed TOML dicts and validated specs by profile text hash; one small file per text on disk.

    A lookup reads only its own text's file (its cost does not grow with the other entries); each
    value is stored as its own pickle inside that file, so a run unpickles only what it uses
    (unpickling a validated spec imports its model's module and restores a pydantic object)."""

    def __init__(self, root: Path | None) -> None:
        self._root = root
        self._entries: dict[str, dict[str, Any]] = {}
        self._dirty: set[str] = set()
        self._dir: Path | None = None

    @classmethod
    def default(cls) -> "ProfileCache":
        return cls(cache_dir())

    @property
    def path(self) -> Path | None:
        """The directory of this planner version's entry files (None when caching is off)."""
        if self._root is not None and self._dir is None:
            self._dir = self._root / f"profiles-{_fingerprint()}"
        return self._dir

    def _entry(self, key: str) -> dict[str, Any]:
        if key not in self._entries:
            self._entries[key] = _read(self.path / f"{key}.pickle") if self._root is not None else {}
        return self._entries[key]

    def _memo(self, text: str, slot: str, cls: type, compute: Callable[[], Any]) -> Any:
        """``slot`` of ``text``'s entry when the cache holds a ``cls`` there, else ``compute()``, remembered.
        An exception from ``compute`` (a parse or validation error) is never cached, nor a text over
        ``MAX_TEXT_CHARS``."""
        if len(text) > MAX_TEXT_CHARS:
            return compute()
        key = text_key(text)
        entry = self._entry(key)
        value = _unpickle(entry.get(slot))
        if isinstance(value, cls):
            return value
        value = compute()
        blob = _pickle(value)
        if blob is not None:
            entry[slot] = blob
            self._dirty.add(key)
        return value

    def parsed(self, text: str, parse: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """The parsed TOML of ``text``: from the cache, or ``parse()`` (then remembered)."""
        return self._memo(text, "raw", dict, parse)

    def head(self, text: str, compute: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """The catalog index's few fields of ``text`` (name, aliases, top-level strings): from the cache,
        or ``compute()``. Unpickling this small dict instead of the whole parsed file keeps indexing a
        kind of profiles cheap."""
        return self._memo(text, "head", dict, compute)

    def heads(self, texts: list[str], compute: Callable[[int], dict[str, Any]]) -> list[dict[str, Any]]:
        """The :meth:`head` of each of ``texts`` (a directory of profiles, in order), also kept together in one
        entry keyed by the texts' keys, so a directory indexed again reads one entry file instead of one per
        profile; an edited, added or removed file changes the key. ``compute(i)`` gives ``texts[i]``'s head
        when the cache does not hold it (its errors propagate, as :meth:`head`'s do)."""
        def one(i: int) -> dict[str, Any]:
            return self.head(texts[i], lambda: compute(i))

        if self._root is None or any(len(t) > MAX_TEXT_CHARS for t in texts):
            return [one(i) for i in range(len(texts))]
        key = hashlib.sha256("".join(text_key(t) for t in texts).encode()).hexdigest()
        entry = self._entry(key)
        value = _unpickle(entry.get("heads"))
        if isinstance(value, list) and len(value) == len(texts) and all(isinstance(h, dict) for h in value):
            return value
        value = [one(i) for i in range(len(texts))]
        blob = _pickle(value)
        if blob is not None:
            entry["heads"] = blob
            self._dirty.add(key)
        return value

    def validated(self, kind: str, text: str, cls: type, validate: Callable[[], Any]) -> Any:
        """The validated spec of ``text`` as ``kind``: from the cache if it is a ``cls``, else
        ``validate()`` (then remembered). Validation errors are never cached."""
        return self._memo(text, f"spec:{kind}", cls, validate)

    def flush(self) -> None:
        """Write new entries (each atomically), then keep the bounds; any failure only costs time."""
        if not self._dirty or self._root is None:
            return
        keys, self._dirty = self._dirty, set()
        d = self.path
        assert d is not None
        try:
            d.mkdir(parents=True, exist_ok=True)
            for key in sorted(keys):
                payload = pickle.dumps(self._entries[key], protocol=pickle.HIGHEST_PROTOCOL)
                if len(payload) <= MAX_ENTRY_BYTES:
                    _write(d / f"{key}.pickle", _MAGIC + hashlib.sha256(payload).digest() + payload)
            prune(self._root, d)
        except Exception:  # noqa: BLE001 - a read-only or full cache directory is not an error
            return


def _write(path: Path, blob: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".entry.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(blob)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def prune(root: Path, d: Path) -> None:
    """Remove the least recently used entry files of ``d`` until at most ``MAX_ENTRIES`` files and
    ``MAX_BYTES`` remain, and the single-file caches of earlier planner versions under ``root``."""
    for old in root.glob("profiles-*.pickle"):
        old.unlink(missing_ok=True)
    files = []
    with os.scandir(d) as it:
        for e in it:
            if e.name.endswith(".pickle") and e.is_file(follow_symlinks=False):
                st = e.stat(follow_symlinks=False)
                files.append((st.st_mtime, st.st_size, e.path))
    total = sum(size for _, size, _ in files)
    files.sort()
    n = len(files)
    for _, size, path in files:
        if n <= MAX_ENTRIES and total <= MAX_BYTES:
            break
        Path(path).unlink(missing_ok=True)
        n -= 1
        total -= size
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


def _read(path: Path) -> dict[str, Any]:
    """One entry file's slots, or {} when it is missing or does not check out. A hit refreshes the
    file's modification time, the clock of the least-recently-used pruning."""
    try:
        with open(path, "rb") as fh:
            st = os.fstat(fh.fileno())
            if st.st_size > MAX_ENTRY_BYTES:
                return {}
            blob = fh.read()
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
    if not isinstance(data, dict) or not all(isinstance(k, str) for k in data):
        return {}
    if time.time() - st.st_mtime > _TOUCH_AFTER_S:
        try:
            os.utime(path)
        except OSError:
            pass
    return data
