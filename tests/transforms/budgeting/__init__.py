"""Tests of on-device budgeting (``transforms.budgeting``): the measurement PTransforms, batch on hand-built data,
streaming against batch, and the portable runner; the mechanisms in ``mechanisms``.
"""
