"""The demo: a simulated assistant application and the fake LLM provider it talks to.

``scenario`` is the story (data), ``application`` plays it through the real
OpenAI and Anthropic clients instrumented by promptprism; ``fake_provider``
(with ``fake_answers``) answers them on loopback, so nothing leaves the
machine. ``promptprism demo`` runs it; ``python -m
promptprism.collector.demo.fake_provider`` runs the provider on its own.
None of this is part of what an application imports; the fake provider and
its answers are standard library only.
"""

from __future__ import annotations

__all__ = ["application", "fake_answers", "fake_provider", "scenario"]
