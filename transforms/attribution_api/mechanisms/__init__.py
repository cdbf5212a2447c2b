"""The Attribution API's mechanisms, Beam-free: the backend (impressions, budgets, attribution), credit allocation, and
Big Bird's options beside them (one deduction for several intermediaries, batched scheduling)."""
