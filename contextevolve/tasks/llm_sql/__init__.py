"""LLM-SQL (ADRS): reorder table rows and per-row columns to maximise prefix KV-cache hits."""
