"""Memory layer: the Evolve Buffer (durable program store) and the vector index of abstracts."""
