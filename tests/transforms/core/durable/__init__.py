"""Tests of the durable state of the local streaming jobs."""
