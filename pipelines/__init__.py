"""Runnable entry points: python -m pipelines.<name>."""
import logging

# Importing Beam warns on the root logger about optional Google Cloud client libraries that the
# local runners do not need; the entry points configure logging themselves (pipelines.common).
logging.getLogger().addFilter(lambda record: "apitools not found" not in record.getMessage())
