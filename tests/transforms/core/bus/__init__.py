"""Tests of the event-bus sources and sinks."""
