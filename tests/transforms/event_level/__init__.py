"""Tests of ARA event-level reports (``transforms.event_level``): the columnar batch replay against the row replay, and
the PTransforms, batch against the plain replay and streaming against batch; the mechanisms in ``mechanisms``.
"""
