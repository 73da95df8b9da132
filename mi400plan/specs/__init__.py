"""Validated input specs (frozen pydantic models). One module per profile kind."""

from mi400plan.specs.accelerator import Accelerator
from mi400plan.specs.common import ND, Est, Estimate, ProfileBase, StrictModel
from mi400plan.specs.model import ModelSpec

__all__ = ["Accelerator", "Est", "Estimate", "ModelSpec", "ND", "ProfileBase", "StrictModel"]
