"""Sparse attention (SAK, ADRS / vAttention): choose the keys each query attends to."""
