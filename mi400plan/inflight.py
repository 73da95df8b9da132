"""Tokens held by the sequences in flight when output lengths vary: length-biased sampling.

A request decodes for a time proportional to its output length ``O``, so a decode step taken at a random
moment finds long requests more often than their share of the requests: a sequence in flight has output
length ``o`` with probability ``o f(o) / E[O]`` (length-biased sampling, the inspection paradox of renewal
theory: L. Kleinrock, Queueing Systems vol. 1, Wiley 1975, sec. 5.2, the residual life of a renewal
process; S. M. Ross, Introduction to Probability Models, 10th ed., Academic Press 2010, sec. 7.7, "the
inspection paradox"), and has generated a share of it uniform on ``(0, 1)``. With prompt lengths ``I``
independent of ``O``:

* tokens generated so far, on average: ``E[O^2] / (2 E[O]) = E[O] / 2 x (1 + cv^2)``, ``cv^2 = Var[O] /
  E[O]^2`` the squared coefficient of variation of the output length;
* the context a decode step reads per sequence (prompt + generated): ``E[I] + E[O^2] / (2 E[O])``;
* the whole length a sequence reserves when its engine admits it only with room for all of it
  (``reserve-full``): ``E[I] + E[O^2] / E[O]``.

With every output the same length (``cv^2 = 0``) these are the familiar ``I + O / 2`` and ``I + O``, bit for
bit (the formulas are written so that the ``cv^2 = 0`` case is exactly that arithmetic).
"""

from __future__ import annotations

from typing import Any

import numpy as np


def in_flight_tokens(input_mean: Any, output_mean: Any, output_cv2: float = 0.0, *, whole: bool = False) -> Any:
    """Mean tokens per sequence in flight at a random decode step (module docstring; Kleinrock 1975 sec. 5.2,
    Ross 2010 sec. 7.7: length-biased sampling): the context read, ``E[I] + E[O] / 2 x (1 + cv^2)``, or with
    ``whole`` the prompt plus the whole output reserved, ``E[I] + E[O] x (1 + cv^2)``. ``output_cv2``:
    ``Var[O] / E[O]^2`` (0: every output the same length, giving ``I + O / 2`` and ``I + O`` exactly).
    Tokens; arrays broadcast."""
    if output_cv2 < 0 or not np.isfinite(output_cv2):
        raise ValueError(f"output_cv2 must be a finite number >= 0, got {output_cv2!r}")
    generated = output_mean if whole else output_mean / 2.0
    if output_cv2 == 0.0:
        return input_mean + generated
    return input_mean + generated * (1.0 + output_cv2)
