"""promptprism instrumentation: render prompts with exact block maps and record every LLM request as a span."""
