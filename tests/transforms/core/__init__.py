"""Tests of what the subjects share (``transforms.core``): reading events over mixed formats with dead letters and the
writers, and per-key state as explicit versioned records; the mechanisms in ``mechanisms``.
"""
