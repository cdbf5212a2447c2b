"""Tests of the Beam-free summary-report mechanisms (Ghazi et al.): the ARA and PAA clients (Alg. 2 and 3) on
hand-built devices, what they share (budgets, report ids and delays, report records), and the Aggregation Service's
release rules, thresholds, noise and budget units (Alg. 1).
"""
