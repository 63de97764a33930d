"""Prompt templates of the four agents (Summarizer, Navigator, Sampler, Generator)."""
