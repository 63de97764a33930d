"""``contextevolve compare``: ContextEvolve, OpenEvolve and GEPA on one task (docs/compare.md)."""
