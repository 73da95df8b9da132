"""The Typer command-line interface. Parses flags, calls ``mi400plan.api``, hands results to
``mi400plan.render``. No arithmetic, no unit conversion and no TOML reading happen here."""

from __future__ import annotations

import gc
import importlib
import os
import sys
from typing import Any

# Each module adds its command(s) to ``app`` when imported.
_COMMAND_MODULES = ("fit", "sweep", "serve", "comm", "rack", "cost", "profiles", "budget", "calibrate", "validate",
                   "schema")


def _register(only: str | None = None) -> Any:
    """Import the command modules (``only``: just that command's, so typer builds one command rather
    than all of them at every start) and return the app."""
    from mi400plan.cli.common import app

    for name in (only,) if only else _COMMAND_MODULES:
        try:
            importlib.import_module(f"mi400plan.cli.{name}")
        except ModuleNotFoundError as exc:  # a command still being built is simply absent
            if exc.name != f"mi400plan.cli.{name}":
                raise
    return app


def _only(app: Any, command: str) -> Any:
    """A copy of ``app`` with just ``command``: a command module that imports another's options
    (sweep and serve use cost's site options) registers that command too, and typer would build it
    (evaluating every annotation of its function) at each start for nothing."""
    import copy

    light = copy.copy(app)
    light.registered_commands = [c for c in app.registered_commands
                                 if (c.name or getattr(c.callback, "__name__", "")) == command]
    light.registered_groups = [g for g in app.registered_groups if g.name == command]
    return light if light.registered_commands or light.registered_groups else app


def __getattr__(name: str) -> Any:
    """``mi400plan.cli.app``: the app with every command registered."""
    if name == "app":
        return _register()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _noop() -> None:
    """Stands in for a command's function when only its name and help are shown."""


def help_app(full: Any) -> Any:
    """A copy of ``full`` whose commands keep their names and help but take no parameters: the root
    ``--help`` lists the commands, and typer would otherwise build every one of them (reading each
    function's signature and evaluating its annotations) only to print its first line."""
    import copy
    import inspect

    light = copy.copy(full)
    light.registered_commands = []
    for info in full.registered_commands:
        stub = copy.copy(info)
        stub.help = info.help if info.help is not None else inspect.getdoc(info.callback)
        stub.callback = _noop
        light.registered_commands.append(stub)
    light.registered_groups = []
    for group in full.registered_groups:
        stub_group = copy.copy(group)
        stub_group.typer_instance = help_app(group.typer_instance)
        light.registered_groups.append(stub_group)
    return light


def _command_of(argv: list[str]) -> str | None:
    """The command a command line runs, when it names one (else every command is needed: root help,
    an unknown or misspelt command, shell completion)."""
    if any(k.endswith("_COMPLETE") for k in os.environ) or not argv or argv[0] not in _COMMAND_MODULES:
        return None
    return argv[0]


def _wants_json(argv: list[str]) -> bool:
    for i, a in enumerate(argv):
        if a == "--json" or a == "--format=json" or (a == "--format" and argv[i + 1 : i + 2] == ["json"]):
            return True
    return False


# Typographic characters the tables and notes use, as ASCII for a terminal that cannot show them.
_ASCII_FOR = {"\u2192": "->", "\u2190": "<-", "\u00d7": "x", "\u2264": "<=", "\u2265": ">=", "\u2248": "~",
              "\u2026": "...", "\u2014": "--", "\u2013": "-", "\u00b1": "+/-", "\u2212": "-", "\u00b7": ".",
              "\u2500": "-", "\u2501": "-", "\u2502": "|", "\u2503": "|", "\u00b5": "u", "\u03bc": "u"}


def _to_ascii(exc: UnicodeError) -> tuple[str, int]:
    """Codec error handler: a known character as its ASCII spelling, anything else as '?'."""
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    bad = exc.object[exc.start : exc.end]
    return "".join(_ASCII_FOR.get(ch, "?") for ch in bad), exc.end


def _guard_streams() -> None:
    """A real process only: a closed pipe (``| head -1``) ends it quietly the Unix way (killed by
    SIGPIPE, shell status 141) instead of an error; a terminal or pipe whose encoding cannot show
    Unicode (``PYTHONIOENCODING=ascii``, a C locale) gets ASCII tables and '?' for the rest."""
    import codecs
    import signal

    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    codecs.register_error("mi400plan_ascii", _to_ascii)
    for stream in (sys.stdout, sys.stderr):
        encoding = (getattr(stream, "encoding", None) or "utf-8").lower().replace("_", "-")
        if not encoding.startswith("utf") and hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="mi400plan_ascii")
            os.environ["MI400PLAN_ASCII"] = "1"


# glibc ``mallopt`` parameters (malloc.h) and the values the program sets: blocks up to 256 MiB come from the
# heap, and up to 512 MiB of freed heap stays mapped.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_MMAP_THRESHOLD_BYTES, _TRIM_THRESHOLD_BYTES = 256 << 20, 512 << 20
# madvise(2) advice MADV_HUGEPAGE (Linux uapi ``asm-generic/mman-common.h``) and the size of the heap region
# advised (address space only: memory is used when a page is first written), 2 MiB transparent huge pages.
_MADV_HUGEPAGE, _HUGE_HEAP_BYTES, _HUGE_PAGE_BYTES = 14, 128 << 20, 2 << 20


def _keep_freed_memory() -> None:
    """Let the layout search reuse the memory of the arrays it frees (glibc only; elsewhere nothing).

    glibc serves every block over 128 KiB (at first) with a fresh ``mmap`` and returns it with
    ``munmap`` when freed, so each of the search's temporary arrays of a chunk (``search.SearchOptions.chunk``,
    megabytes each) is new memory that the kernel maps and zeroes page by page; with these limits
    (the ``mallopt(3)`` M_MMAP_THRESHOLD / M_TRIM_THRESHOLD settings, also read from
    ``MALLOC_MMAP_THRESHOLD_`` / ``MALLOC_TRIM_THRESHOLD_``) the blocks come from the heap and a freed
    one serves the next, which takes a fifth of the page faults out of a sweep. Memory is returned to
    the system when the process ends. A user who sets either variable keeps their choice."""
    if not sys.platform.startswith("linux") or any(
            k in os.environ for k in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")):
        return
    try:
        import ctypes  # numpy, which every computing command loads, imports it anyway

        mallopt = ctypes.CDLL(None).mallopt  # the C library the interpreter runs on
    except (ImportError, OSError, AttributeError):  # not glibc (musl has no mallopt): nothing to tune
        return
    mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_BYTES)
    mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD_BYTES)
    _advise_huge_heap(ctypes)


def _advise_huge_heap(ctypes: Any) -> None:
    """Ask for the heap the layout search's arrays come from to be backed by 2 MiB transparent huge pages.

    The kernel maps and zeroes fresh memory a 4 KiB page at a time, one fault each (about 2 us on the
    development machine; a sweep's search touches some 25 MB: 6,000 faults); a huge page is one fault for
    2 MiB. Where the system leaves huge pages to the program (``/sys/kernel/mm/transparent_hugepage/enabled``
    ``madvise``, a common default), the program grows its heap by ``_HUGE_HEAP_BYTES`` (one ``malloc``, below
    the mmap threshold :func:`_keep_freed_memory` sets, so it comes from the heap), advises that range
    ``MADV_HUGEPAGE`` and frees it: it stays the heap's free top (under the trim threshold), and the arrays
    carved from it later are faulted in huge pages. Address space only until written. Where huge pages are
    off (``never``) or always on, nothing changes; a call that fails is ignored."""
    libc = ctypes.CDLL(None)
    malloc, madvise, free = libc.malloc, libc.madvise, libc.free
    malloc.restype = ctypes.c_void_p
    malloc.argtypes = [ctypes.c_size_t]
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    free.argtypes = [ctypes.c_void_p]
    block = malloc(_HUGE_HEAP_BYTES)
    if not block:
        return
    start = -(-block // _HUGE_PAGE_BYTES) * _HUGE_PAGE_BYTES  # the whole huge pages inside the block
    end = (block + _HUGE_HEAP_BYTES) // _HUGE_PAGE_BYTES * _HUGE_PAGE_BYTES
    if end > start:
        madvise(start, end - start, _MADV_HUGEPAGE)
    free(block)


def console() -> None:
    """The ``mi400plan`` program: :func:`main` with the cyclic garbage collector off.

    A run builds many long-lived objects (modules, model classes, profiles) and next to no cyclic
    garbage (arrays and results are freed by reference counting; the peak memory of a 131,072-GPU
    sweep is the same either way), so collections only cost time: with them and the collection at
    interpreter exit, a short command takes about a tenth longer. Code that calls :func:`main` in a
    process of its own keeps its collector. numpy's bundled OpenBLAS starts a thread per core when it
    loads; the planner's only linear algebra is a few parameters wide (``calibrate``), so it runs on
    one thread unless ``OPENBLAS_NUM_THREADS`` is already set. A command that computes (not help or
    completion) lets freed heap memory serve the next arrays (:func:`_keep_freed_memory`).
    """
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    args = sys.argv[1:]
    if args and not {"-h", "--help"} & set(args) and not any(k.endswith("_COMPLETE") for k in os.environ):
        _keep_freed_memory()  # a command that computes: help and completion import neither numpy nor ctypes
    gc.disable()
    try:
        main()
    except SystemExit as exc:
        code = exc.code
    else:
        code = None
    _end(code)


def _end(code: object) -> None:
    """End the program as ``sys.exit(code)`` would, without tearing the interpreter down.

    After a command has run, its output written and the exit handlers run (``atexit``: those of
    matplotlib, or a caller's), what is left of a normal exit is freeing every module, class and array
    one by one (about 10 ms for a sweep: numpy, pydantic and the planner's models), which the process's end
    frees at once. So: the exit status as ``SystemExit`` sets it (None 0, an int itself, anything else printed
    to stderr and 1), the exit handlers, the standard streams flushed, then ``os._exit``. A stream that
    cannot be flushed (a closed pipe on a platform without SIGPIPE) takes the normal exit, which reports it."""
    import atexit

    if code is None or isinstance(code, int):
        status = code or 0
    else:
        print(code, file=sys.stderr)
        status = 1
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        gc.freeze()  # nothing left for the collection at interpreter exit to scan
        raise SystemExit(status) from None
    os._exit(status)


def _no_plugin_loader() -> None:
    """With every pydantic plugin disabled, pydantic's plugin loader finds none, but importing it, which
    pydantic does when it builds its first validator, imports ``importlib.metadata`` (about 5-8 ms of a
    start). Stand in for the loader with one that answers what it answers then: no plugins."""
    name = "pydantic.plugin._loader"
    if name in sys.modules:
        return
    import types

    loader = types.ModuleType(name, "pydantic's plugin loader while every plugin is disabled: none to load")
    loader.get_plugins = lambda: ()  # type: ignore[attr-defined]
    sys.modules[name] = loader


def main(argv: list[str] | None = None) -> None:
    """Entry point (the console script calls it through :func:`console`).

    With --json (or --format json) even a command-line usage error (missing option, bad integer,
    unknown choice, contradictory flags) is reported as a JSON error envelope on stdout, exit 2.
    """
    if argv is None:
        _guard_streams()
    # pydantic otherwise scans every installed distribution for plugins on the first model (~10 ms);
    # the planner uses none. A user who sets the variable keeps their choice.
    if os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__") in ("__all__", "1", "true"):  # pydantic's own test
        _no_plugin_loader()
    args = list(sys.argv[1:] if argv is None else argv)
    command = _command_of(args)
    app = _register(command) if command is None else _only(_register(command), command)
    if args in ([], ["-h"], ["--help"]) and not any(k.endswith("_COMPLETE") for k in os.environ):
        app = help_app(app)
    if not _wants_json(args):
        app(args=args)
        return
    import typer

    from mi400plan.errors import ExitCode, UsageError
    from mi400plan.render.jsonout import write_error

    command = next((a for a in args if not a.startswith("-")), "mi400plan")
    try:
        code = app(args=args, standalone_mode=False)
    except typer.Abort:
        sys.exit(ExitCode.UNEXPECTED)
    except typer.TyperException as exc:  # click's usage errors (typer vendors click)
        message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        write_error(command, UsageError(message), sys.stdout)
        sys.exit(int(getattr(exc, "exit_code", ExitCode.USAGE)))
    sys.exit(code if isinstance(code, int) else 0)


__all__ = ["app", "main"]
