"""Tests of the Beam-free k-anonymity mechanisms (k-anonymity note): AboveThreshold and its periodic restart, the exact
privacy accounting, and one group's skipping replay against a naive step-by-step Alg. 1.
"""
