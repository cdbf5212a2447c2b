"""Tests of the shared Beam-free mechanisms: random sources and noise samplers (k-anonymity note Sec. 4.1, CKS 2020),
exact sliding distinct counts against a brute-force count, and hour steps and epoch numbering.
"""
