"""The wire convention shared by both ends: ``names`` spells every attribute,
event and value that promptprism puts on a span, once.

Standard library only and free of side effects, so the collector reads the
names without importing the instrumentation.
"""
