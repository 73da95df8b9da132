"""``--plot PATH``: pictures of a result, drawn with matplotlib (the optional ``plot`` extra).

matplotlib is imported only here and only when a plot is asked for, so start-up and ``--help``
stay fast without it. The format follows the file name (``.png`` or ``.svg``); the file is written
through a temporary file in the same directory and ``os.replace``, and an existing file is replaced
only with ``--force`` (as ``sweep --save`` does).

Each command registers a drawing function with ``@plotter("command")``; it receives the result and
a matplotlib ``Figure`` and draws on it. Axis labels carry units; a footer names what the figures
come from (the command line's model and profiles, the mi400plan version).
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mi400plan.errors import UsageError
from mi400plan.fileio import write_atomic

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from mi400plan.results.common import Result

EXTRA_HINT = "install the plot extra: pip install 'mi400plan[plot]'"
FORMATS = {".png": "png", ".svg": "svg"}
GIB = 2**30

_PLOTTERS: dict[str, Callable[[Any, Figure], None]] = {}


def plotter(command: str) -> Callable[[Callable[[Any, Figure], None]], Callable[[Any, Figure], None]]:
    """Register the function that draws ``command``'s result."""

    def deco(fn: Callable[[Any, Figure], None]) -> Callable[[Any, Figure], None]:
        _PLOTTERS[command] = fn
        return fn

    return deco


def check_target(path: Path, force: bool) -> str:
    """Validate ``--plot PATH`` before any work is done; return the image format.

    Raises ``UsageError`` (exit 2) for an unknown extension, an existing file without ``--force``,
    a missing directory, or matplotlib not installed.
    """
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise UsageError(
            f"--plot {str(path)!r}: the file name must end in .png or .svg (got {path.suffix or 'no extension'!r})",
            hint="the image format is taken from the extension",
        )
    if path.exists() and not force:
        raise UsageError(f"plot file {str(path)!r} already exists", hint="pass --force to replace it, or choose another path")
    if path.exists() and not path.is_file():
        raise UsageError(f"--plot {str(path)!r} exists and is not a file")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise UsageError(f"--plot {str(path)!r}: directory {str(parent)!r} does not exist")
    try:
        with _quiet():
            import matplotlib  # noqa: F401 - only to learn, before any work, that the extra is there
    except ImportError:
        raise UsageError("--plot needs matplotlib, which is not installed", hint=EXTRA_HINT) from None
    return fmt


def _pyplot_free_figure() -> Figure:
    """A figure on the Agg canvas without pyplot (no global state, no GUI backend)."""
    try:
        import matplotlib

        matplotlib.use("Agg", force=True)
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise UsageError(f"--plot needs matplotlib, which failed to import: {exc}", hint=EXTRA_HINT) from None
    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text in SVG: searchable, smaller
    matplotlib.rcParams["svg.hashsalt"] = "mi400plan"  # stable ids: the same result gives the same file
    return Figure(figsize=(9, 5.5), layout="constrained")


def figure_for(result: Result) -> Figure:
    """Draw ``result`` on a new figure (tests inspect the figure's series)."""
    if result.command not in _PLOTTERS:
        importlib.import_module("mi400plan.render.plots")
    draw = _PLOTTERS.get(result.command)
    if draw is None:
        raise UsageError(f"--plot is not available for '{result.command}'")
    fig = _pyplot_free_figure()
    draw(result, fig)
    return fig


def write_plot(result: Result, path: Path, *, force: bool) -> None:
    """Draw ``result`` and write it to ``path`` atomically (format from the extension)."""
    fmt = check_target(path, force)
    with _quiet():
        fig = figure_for(result)
        write_atomic(path, lambda fh: fig.savefig(fh, format=fmt, dpi=150, metadata=_metadata(fmt)), replace=force)


@contextmanager
def _quiet() -> Iterator[None]:
    """Deprecation notices from matplotlib's own dependencies (older matplotlib releases call
    pyparsing names that pyparsing 3.3 deprecates) are not the user's business."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        yield


def _metadata(fmt: str) -> dict[str, Any]:
    from mi400plan import __version__

    software = f"mi400plan {__version__}"
    if fmt == "svg":
        return {"Creator": software, "Date": None}
    return {"Software": software}


def footer(fig: Figure, text: str) -> None:
    """The source line under the plot: what the figures come from."""
    from mi400plan import __version__

    fig.get_layout_engine().set(rect=(0, 0.035, 1, 0.965))  # keep the axes clear of the footer
    fig.text(0.01, 0.008, f"{text} | mi400plan {__version__}", fontsize=7, color="0.35", ha="left", va="bottom",
             wrap=True)
