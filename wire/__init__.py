"""The wire convention shared by both ends: ``names`` spells every attribute,
event and value that promptprism puts on a span, once; ``canonical`` is the
JSON serialisation every request byte count and body hash is taken in;
``errors`` holds ``ConfigurationError``, the one error type for a bad setting
that the collector and the exporter both raise.

Standard library only and free of side effects, so the collector reads the
names without importing the instrumentation.
"""

__all__ = ["canonical", "errors", "names"]
