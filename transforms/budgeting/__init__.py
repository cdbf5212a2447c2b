"""On-device budgeting at population scale (Cookie Monster, seed 003; ARA-like and IPA-like baselines).

* ``mechanisms/``: privacy filters (Appendix B), attribution functions (Sec. 3.2-3.3), the budgeting policies,
  bias detection (Appendix D), the per-device replay, the querier's batches and queries (Alg. 1, Sec. 8.1), the
  accuracy target and the in-memory simulation the evaluation runs.
* ``measurement``: the Beam transforms, batch and streaming, from impressions and conversions to query results.

The rule (checked by the import contracts in ``.importlinter``, run by ``make lint`` and the tests): modules
under ``mechanisms/`` are Beam-free maths (Python and numpy; no ``apache_beam``, no codecs, no I/O, columnar
or plotting library), so they can be read against the papers line by line and reused by the batch path,
the streaming path, the evaluation and the tests; the modules beside ``mechanisms/`` wire them into Beam.
"""
