"""Beam-free summary-report mechanisms: client budgets and reports, ARA and PAA clients, aggregation."""
