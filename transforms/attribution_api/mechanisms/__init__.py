"""The Attribution API's mechanisms, Beam-free: the backend (impressions, budgets, attribution) and credit allocation."""
