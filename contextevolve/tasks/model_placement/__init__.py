"""Model Placement (MP, from Prism via ADRS): place LLMs on 80 GB GPUs to minimise KV-cache pressure."""
