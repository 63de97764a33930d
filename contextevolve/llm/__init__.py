"""Chat models per agent role: external OpenAI-compatible endpoints or the embedded local LLM."""
