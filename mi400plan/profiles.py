"""The profile catalog: find, read and validate TOML profiles; write TOML atomically.

Search order for a name (first hit wins): directories given with ``--profiles`` (in order), then
directories in ``$MI400PLAN_PROFILES`` (``os.pathsep``-separated), then the bundled catalog shipped
inside the package. A user profile with the same name as a
bundled one overrides it; every loaded profile records the file it came from.

Each directory holds one sub-directory per kind: ``accelerators/``, ``fabrics/``, ``racks/``,
``models/``, ``costs/``, ``stacks/`` (training), ``serving/`` (inference servers). A model may also be given as a path to a user TOML or to a Hugging Face
``config.json``. This is the only core module that touches files.
"""

from __future__ import annotations

import difflib
import importlib
import json
import os
import re
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ValidationError

from mi400plan.cache import ProfileCache, package_dir
from mi400plan.errors import ProfileError, UnknownNameError, UsageError
from mi400plan.records import record
from mi400plan.validation import validation_error  # noqa: F401 - also imported from here

if TYPE_CHECKING:  # parsed on a cache miss only (parse_toml): a cached profile needs no TOML reader
    import tomllib

Kind = Literal["accelerators", "fabrics", "racks", "models", "costs", "stacks", "serving"]
KINDS: tuple[Kind, ...] = ("accelerators", "fabrics", "racks", "models", "costs", "stacks", "serving")

# Kind -> "module:Class". Imported lazily so a command only pays for the specs it uses.
SPEC_CLASSES: dict[str, str] = {
    "accelerators": "mi400plan.specs.accelerator:Accelerator",
    "fabrics": "mi400plan.specs.fabric:Fabric",
    "racks": "mi400plan.specs.rack:Rack",
    "models": "mi400plan.specs.model:ModelSpec",
    "costs": "mi400plan.specs.cost:CostProfile",
    "stacks": "mi400plan.specs.stack:StackProfile",
    "serving": "mi400plan.specs.serving:ServingStack",
}

KIND_SINGULAR = {"accelerators": "accelerator", "fabrics": "fabric", "racks": "rack", "models": "model", "costs": "cost profile",
                 "stacks": "software stack", "serving": "serving stack"}

ENV_VAR = "MI400PLAN_PROFILES"

T = TypeVar("T", bound=BaseModel)


def spec_class(kind: str) -> type[BaseModel]:
    mod, cls = SPEC_CLASSES[kind].split(":")
    return getattr(importlib.import_module(mod), cls)


@record
class Loaded(Generic[T]):
    """A validated profile and where it came from."""

    spec: T
    path: str
    origin: Literal["bundled", "user", "file"]


@record(frozen=False)
class _Entry:
    name: str
    aliases: list[str]
    path: str
    origin: Literal["bundled", "user", "file"]
    text: str
    head: dict[str, Any]  # top-level strings (``name``, ``sku``, ...) and the alias list, read for indexing
    decode_error: ProfileError | None
    cache: ProfileCache | None = None

    @property
    def raw(self) -> dict[str, Any]:
        """The parsed TOML (from the cache when it holds it): only for validating, not for indexing."""
        cache = self.cache if self.cache is not None else ProfileCache(None)
        return cache.parsed(self.text, lambda: parse_toml(self.path, self.text))


def _head(raw: dict[str, Any]) -> dict[str, Any]:
    """What the catalog index reads of a parsed profile: its top-level strings and its alias list."""
    head: dict[str, Any] = {k: v for k, v in raw.items() if isinstance(k, str) and isinstance(v, str)}
    aliases = raw.get("aliases")
    head["aliases"] = [a for a in aliases if isinstance(a, str)] if isinstance(aliases, list) else []
    return head


def bundled_root() -> Any:
    """The bundled catalog directory inside the installed package (a path, or a Traversable when the
    package is imported from a zip archive)."""
    return package_dir("profiles")


def _tomllib_error(path: str, exc: tomllib.TOMLDecodeError) -> ProfileError:
    m = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
    line = int(m.group(1)) if m else None
    msg = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
    return ProfileError(f"malformed TOML: {msg}", path=path, line=line)


def _read_text(tr: Any) -> str:
    return tr.read_text(encoding="utf-8")


def parse_toml(path: str, text: str) -> dict[str, Any]:
    import tomllib

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise _tomllib_error(path, exc) from None
    except RecursionError:
        raise ProfileError("arrays or tables nested too deeply", path=path) from None


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
MAX_NESTING = 32  # no profile needs deeper tables or arrays; deeper ones are refused, not recursed into


def visible_text(value: Any, path: str, depth: int = 0) -> Any:
    """``value`` with control characters in every string (ANSI escapes, bells, carriage returns)
    written as visible ``\\x1b``-style escapes, so profile text never drives the terminal."""
    if depth > MAX_NESTING:
        raise ProfileError(f"arrays or tables nested more than {MAX_NESTING} deep", path=path)
    if isinstance(value, str):
        return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", value)
    if isinstance(value, dict):
        return {visible_text(k, path, depth + 1): visible_text(v, path, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [visible_text(v, path, depth + 1) for v in value]
    return value


def validate_dict(kind: str, raw: dict[str, Any], path: str, text: str = "") -> BaseModel:
    cls = spec_class(kind)
    try:
        return cls.model_validate(visible_text(raw, path))
    except ValidationError as exc:
        raise validation_error(path, text, exc) from None
    except RecursionError:
        raise ProfileError("arrays or tables nested too deeply", path=path) from None
    except (TypeError, ValueError, AttributeError) as exc:  # a validator meeting a shape it did not expect
        raise ProfileError(f"invalid value: {exc}", path=path) from None


def _regular_file_problem(f: Any) -> str | None:
    """Why a catalog entry named ``*.toml`` cannot be read as a profile (a FIFO, a directory, a
    dangling or looping link), or None for a regular file. Checked with ``stat``, never by opening."""
    if not isinstance(f, Path):  # bundled resources are regular files
        return None
    try:
        st = f.stat()
    except OSError as exc:  # dangling link, link loop, permission
        return f"cannot be read ({exc.strerror or exc})"
    import stat as _stat

    if _stat.S_ISDIR(st.st_mode):
        return "is a directory"
    if not _stat.S_ISREG(st.st_mode):
        return "is not a regular file (a FIFO, socket or device)"
    return None


def read_text_file(path: str | os.PathLike[str], what: str = "file") -> tuple[Path, str]:
    """A user file's path and UTF-8 text, or a ProfileError naming it ("no such plan file", ...).
    A FIFO, device or directory is refused before it is opened (reading one could block forever)."""
    p = Path(path)
    problem = _regular_file_problem(p)
    if problem is not None and p.exists():
        raise ProfileError(f"cannot read {what}: {problem}", path=str(p))
    if not p.is_file():
        raise ProfileError(f"no such {what}", path=str(p))
    try:
        return p, p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(f"cannot read {what}: {exc}", path=str(p)) from None


def load_file(kind: str, path: str | os.PathLike[str]) -> Loaded[Any]:
    """Load one profile from an explicit path. A ``.json`` model is read as a Hugging Face config."""
    p = Path(path)
    if kind == "models" and p.is_dir():
        # A Hugging Face model directory (a snapshot or a local clone): its config.json describes it.
        if not (p / "config.json").is_file():
            raise ProfileError("a model directory must hold a Hugging Face config.json", path=str(p))
        p = p.resolve() / "config.json"
    p, text = read_text_file(p)
    return load_text(kind, str(p), text, as_json=p.suffix.lower() == ".json")


def load_text(kind: str, path: str, text: str, *, as_json: bool) -> Loaded[Any]:
    """One profile from its text: TOML, or (a model only) a Hugging Face ``config.json``."""
    if as_json:
        if kind != "models":
            raise ProfileError(f"a JSON file can only describe a model, not a {KIND_SINGULAR[kind]}", path=path)
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ProfileError(f"malformed JSON: {exc.msg}", path=path, line=exc.lineno) from None
        except RecursionError:
            raise ProfileError("malformed JSON: nested too deeply", path=path) from None
        if not isinstance(data, dict):
            raise ProfileError("a Hugging Face config must be a JSON object", path=path)
        data = visible_text(data, path)
        from mi400plan.hfconfig import model_from_hf_config

        return Loaded(model_from_hf_config(data, path=path), path, "file")
    raw = parse_toml(path, text)
    return Loaded(validate_dict(kind, raw, path, text), path, "file")


def load_stdin(kind: str) -> Loaded[Any]:
    """A model piped on standard input (``-``): a Hugging Face config.json, or a TOML profile."""
    import sys

    if kind != "models":
        raise ProfileError(f"only a model can be read from standard input, not a {KIND_SINGULAR[kind]}", path="-")
    try:
        text = sys.stdin.read()
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ProfileError(f"cannot read standard input: {exc}", path="<stdin>") from None
    if not text.strip():
        raise ProfileError("standard input is empty (pipe a config.json or a model TOML into '-')", path="<stdin>")
    return load_text(kind, "<stdin>", text, as_json=text.lstrip().startswith("{"))


def looks_like_path(name: str) -> bool:
    return os.sep in name or "/" in name or name.endswith((".toml", ".json"))


@record(frozen=False)
class Catalog:
    """All profile directories in search order. Cheap to build; files are read on first use."""

    user_dirs: list[Path] = field(default_factory=list)
    _index: dict[str, dict[str, _Entry]] = field(default_factory=dict, repr=False)
    _by_name: dict[str, dict[str, _Entry]] = field(default_factory=dict, repr=False)
    _cache: dict[tuple[str, str], Loaded[Any]] = field(default_factory=dict, repr=False)
    # Parsed and validated profiles by text hash, kept across runs (``mi400plan.cache``); off unless
    # the catalog is built by ``default()``.
    disk_cache: ProfileCache = field(default_factory=lambda: ProfileCache(None), repr=False)
    # Called with a message for each catalog file skipped (a FIFO or directory named *.toml, a
    # dangling link); the command line shows it on stderr. Core code never prints.
    on_warning: Any = field(default=None, repr=False)
    skipped: list[str] = field(default_factory=list, repr=False)

    @classmethod
    def default(cls, extra_dirs: list[str | os.PathLike[str]] | None = None) -> "Catalog":
        dirs = [Path(d) for d in (extra_dirs or [])]
        env = os.environ.get(ENV_VAR, "")
        given = len(dirs)
        dirs += [Path(d) for d in env.split(os.pathsep) if d.strip()]
        for i, d in enumerate(dirs):
            try:
                exists = d.is_dir()
            except OSError as exc:  # a name longer than the OS allows, a loop of links, ...
                where = "--profiles" if i < given else ENV_VAR
                raise UsageError(f"{where}: {str(d)[:60]}{'...' if len(str(d)) > 60 else ''} cannot be a profile "
                                 f"directory: {exc.strerror or exc}") from None
            if not exists:
                raise ProfileError("profile directory does not exist", path=str(d))
        return cls(user_dirs=dirs, disk_cache=ProfileCache.default())

    # --- indexing ---------------------------------------------------------------------------
    def _sources(self, kind: str) -> list[tuple[Any, Literal["bundled", "user"]]]:
        out: list[tuple[Any, Literal["bundled", "user"]]] = []
        for d in self.user_dirs:
            sub = d / kind
            if sub.is_dir():
                out.append((sub, "user"))
        b = bundled_root() / kind
        if b.is_dir():
            out.append((b, "bundled"))
        return out

    def _entries(self, kind: str) -> dict[str, _Entry]:
        """name -> entry, user directories first; aliases map to the same entry."""
        if kind in self._index:
            return self._index[kind]
        by_key: dict[str, _Entry] = {}
        by_name: dict[str, _Entry] = {}
        for root, origin in self._sources(kind):
            try:
                files = sorted((f for f in root.iterdir() if f.name.endswith(".toml")), key=lambda f: f.name)
            except OSError as exc:
                self._warn(f"{root}: profile directory cannot be listed ({exc.strerror or exc}); skipped")
                continue
            for entry in self._dir_entries(files, origin):
                if entry.name in by_name:  # an earlier (user) directory defines it
                    continue
                by_name[entry.name] = entry
        # Names first, then aliases, so an alias never shadows a real name.
        for name, entry in by_name.items():
            by_key[name] = entry
        for entry in by_name.values():
            for a in entry.aliases:
                by_key.setdefault(a, entry)
        self._index[kind] = by_key
        self._by_name[kind] = by_name
        self.disk_cache.flush()
        return by_key

    def warn(self, message: str) -> None:
        """Record a profile a command skipped (shown on stderr through ``on_warning``)."""
        self._warn(message)

    def _warn(self, message: str) -> None:
        self.skipped.append(message)
        if self.on_warning is not None:
            self.on_warning(message)

    def _dir_entries(self, files: list[Any], origin: Literal["bundled", "user"]) -> list[_Entry]:
        """The catalog files of one directory as entries (:meth:`_entry`), those that cannot be read at all
        left out with a warning. The heads of the files that read come from the cache in one lookup
        (``ProfileCache.heads``); when one of them does not parse, file by file, each keeping its error."""
        read = [r for r in (self._text(f) for f in files) if r is not None]
        good = [i for i, (_, _, err) in enumerate(read) if err is None]

        def head_of(k: int) -> dict[str, Any]:
            f, text, _ = read[good[k]]
            return self._parsed_head(str(f), text)

        try:
            heads = dict(zip(good, self.disk_cache.heads([read[i][1] for i in good], head_of)))
        except ProfileError:
            heads = {}
        return [self._entry(f, origin, text, err, heads.get(i)) for i, (f, text, err) in enumerate(read)]

    def _parsed_head(self, path: str, text: str) -> dict[str, Any]:
        """The index fields of a profile's text, parsed through the cache (``ProfileError`` if it does not parse)."""
        return _head(self.disk_cache.parsed(text, lambda: parse_toml(path, text)))

    def _text(self, f: Any) -> tuple[Any, str, ProfileError | None] | None:
        """A catalog file's text (or the error reading it), or None (with a warning) when it is not a
        regular file to read."""
        problem = _regular_file_problem(f)
        if problem is not None:
            self._warn(f"{f}: {problem}; skipped")
            return None
        try:
            return f, _read_text(f), None
        except (OSError, UnicodeDecodeError) as exc:
            return f, "", ProfileError(f"cannot read profile: {exc}", path=str(f))

    def _entry(self, f: Any, origin: Literal["bundled", "user"], text: str, err: ProfileError | None,
               head: dict[str, Any] | None = None) -> _Entry:
        """One catalog file as an entry (parse errors kept for when it is needed). ``head``: its index
        fields when already known. A wrong ``name``/``aliases`` falls back to the file stem so that only a
        command needing this profile fails on it."""
        path = str(f)
        if err is None and head is None:
            try:
                head = self.disk_cache.head(text, lambda: self._parsed_head(path, text))
            except ProfileError as exc:
                err = exc
        head = head or {}
        stem = f.name[: -len(".toml")]
        name = head.get("name")
        name = name if isinstance(name, str) and name.strip() else stem
        return _Entry(name, list(head.get("aliases", [])), path, origin, text, head, err, self.disk_cache)

    def names(self, kind: str) -> list[str]:
        """Canonical names of a kind, sorted."""
        self._entries(kind)
        return sorted(self._by_name[kind])

    def names_with(self, kind: str, key: str, value: str) -> list[str]:
        """Canonical names, sorted, of the profiles whose file sets the top-level string ``key`` to
        ``value`` (read off the parsed TOML, so only those need validating)."""
        self._entries(kind)
        entries = self._by_name[kind].items()
        return sorted(n for n, e in entries if e.decode_error is None and e.head.get(key) == value)

    def resolve(self, kind: str, name: str) -> str:
        """Canonical name for a name or alias, or UnknownNameError with close matches."""
        key = name.strip().lower()
        entries = self._entries(kind)
        if key in entries:
            return entries[key].name
        keys = list(entries)
        matches = difflib.get_close_matches(key, keys, n=3, cutoff=0.5)
        if not matches:
            matches = [k for k in keys if key in k or k in key][:3]
        if not matches:  # a looser look: same family prefix, e.g. 'mi999' -> mi300x, mi325x, ...
            matches = difflib.get_close_matches(key, keys, n=3, cutoff=0.3)
        raise UnknownNameError(KIND_SINGULAR[kind], name, matches, self.names(kind))

    def get(self, kind: str, name: str) -> Loaded[Any]:
        """A validated profile by name, alias or (for any kind) a file path; a model also from a
        Hugging Face model directory or ``-`` (standard input, read once)."""
        if kind == "models" and name == "-":
            if (kind, "-") not in self._cache:
                self._cache[(kind, "-")] = load_stdin(kind)
            return self._cache[(kind, "-")]
        if kind == "models" and name and Path(name).is_dir() and (Path(name) / "config.json").is_file():
            return load_file(kind, name)
        if looks_like_path(name):
            if Path(name).exists():
                return load_file(kind, name)
            if name.strip().lower() not in self._entries(kind):
                raise ProfileError(
                    f"no such file (a {KIND_SINGULAR[kind]} is a catalog name or an existing file)",
                    path=name,
                    hint=f"'mi400plan profiles list --kind {kind}' shows the catalog names",
                )
        if kind == "models" and name.strip().lower() not in self._entries(kind):
            from mi400plan.family import family_model

            fam = family_model(name)
            if fam is not None:  # a synthetic family model (``fit --largest`` prints these names)
                return Loaded(fam, f"family template {fam.family} (mi400plan.family)", "bundled")
        canonical = self.resolve(kind, name)
        key = (kind, canonical)
        if key in self._cache:
            return self._cache[key]
        entry = self._entries(kind)[canonical]
        if entry.decode_error is not None:
            raise entry.decode_error
        spec = self.disk_cache.validated(
            kind, entry.text, spec_class(kind), lambda: validate_dict(kind, entry.raw, entry.path, entry.text)
        )
        self.disk_cache.flush()
        stem = Path(entry.path).name[: -len(".toml")]
        if getattr(spec, "name", stem) != stem:
            raise ProfileError(
                f"profile name {getattr(spec, 'name')!r} does not match its file name {stem!r}",
                path=entry.path,
                field="name",
            )
        loaded = Loaded(spec, entry.path, entry.origin)
        self._cache[key] = loaded
        return loaded

    def all(self, kind: str) -> list[Loaded[Any]]:
        """Every profile of a kind, validated, sorted by name. Fails on the first bad file."""
        return [self.get(kind, n) for n in self.names(kind)]

    def entry_path(self, kind: str, name: str) -> tuple[str, str]:
        """(path, origin) of a profile without validating it."""
        e = self._entries(kind)[self.resolve(kind, name)]
        return e.path, e.origin

    def validate_all(self) -> list[tuple[str, str, str, ProfileError | None]]:
        """Validate every profile of every kind: (kind, name, path, error or None)."""
        out: list[tuple[str, str, str, ProfileError | None]] = []
        for kind in KINDS:
            for name in self.names(kind):
                path, _ = self.entry_path(kind, name)
                try:
                    self.get(kind, name)
                    out.append((kind, name, path, None))
                except ProfileError as exc:
                    out.append((kind, name, path, exc))
        return out


def approximation_warnings(
    catalog: "Catalog", skus: list[str] | tuple[str, ...] = (), fabrics: list[str] | tuple[str, ...] = ()
) -> list[str]:
    """One warning per fabric, named directly or as an accelerator's default scale-up / scale-out
    fabric, whose profile says its topology is approximated (``Fabric.approximation``)."""
    names: list[str] = list(fabrics)
    for sku in skus:
        try:
            ic = catalog.get("accelerators", sku).spec.interconnect
        except (ProfileError, UnknownNameError):
            continue
        names += [n for n in (ic.scale_up_fabric, ic.scale_out_fabric) if n]
    out: list[str] = []
    for name in dict.fromkeys(names):
        try:
            note = getattr(catalog.get("fabrics", name).spec, "approximation", None)
        except (ProfileError, UnknownNameError):
            continue
        if note:
            out.append(f"fabric {name} is an approximation: {note}")
    return out


def kind_of_path(path: Path) -> str | None:
    """Guess a profile file's kind from its parent directory name (``.../fabrics/x.toml``)."""
    parent = path.parent.name
    return parent if parent in KINDS else None


def write_toml_atomic(path: str | os.PathLike[str], data: dict[str, Any], *, replace: bool = True) -> None:
    """Write ``data`` as TOML through a temporary file in the same directory (``mi400plan.fileio``).

    ``replace``: an old regular file is replaced in one step (a crash leaves either the old or the new
    file); otherwise the file is created exclusively (``FileExistsError`` when the name is taken).
    """
    import tomli_w

    from mi400plan.fileio import write_atomic

    write_atomic(path, lambda fh: tomli_w.dump(data, fh), replace=replace)
