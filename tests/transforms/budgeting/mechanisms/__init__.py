"""Tests of the Beam-free budgeting mechanisms (Cookie Monster paper): attribution functions, the budgeting policies,
pure-DP privacy filters with integer budgets, one device's replay, the querier's side (batches, central budgets,
execution) and bias detection (Appendix D).
"""
