"""Output models: the JSON contract. One module per command; ``common`` holds the envelope."""

from mi400plan.results.common import SCHEMA_VERSION, Envelope, ErrorItem, Result

__all__ = ["SCHEMA_VERSION", "Envelope", "ErrorItem", "Result"]
