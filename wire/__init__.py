"""The wire convention shared by both ends: ``names`` spells every attribute,
event and value that promptprism puts on a span, once; ``canonical`` is the
JSON serialisation every request byte count and body hash is taken in.

Standard library only and free of side effects, so the collector reads the
names without importing the instrumentation.
"""

__all__ = ["canonical", "names"]
