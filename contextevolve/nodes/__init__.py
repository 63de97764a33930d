"""One module per phase of Algorithm 1 (plus ``initialize``, the algorithm's Initialize line)."""
