"""Tests of the k-anonymity server (``transforms.kanon``): the verdicts PTransform in batch, streaming (TestStream)
and on the portable runner; the mechanisms in ``mechanisms``.
"""
