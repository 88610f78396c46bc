"""Semantic conventions: what other instrumentations' attributes mean for a request record.

``system_prompt`` finds the system prompt in the GenAI conventions' content
attributes (current, older and flattened forms).
"""

from __future__ import annotations

__all__: list[str] = []
