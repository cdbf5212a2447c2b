"""Runnable entry points: python -m pipelines.<name>."""
