"""Durable state of the local streaming jobs: a stateful step's state and the input positions it reflects, kept
in a store (SQLite or PostgreSQL) and written in one transaction before the step releases anything, so that a
job restarted after a crash restores both together and never redraws noise or resets a budget
(docs/durability.md)."""
