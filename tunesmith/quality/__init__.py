"""Measured quality per checkpoint: embedding models and the measures on them."""
