"""Tests of the synthetic dataset generators of ``synthetic`` (PATCG-like, Criteo-like, ARA, PAA and event-level):
determinism for a seed, every file format, the shape of the data against the models' parameters, and bad records.
"""
