"""On-device budgeting at population scale (Cookie Monster, Cookie Monster paper; ARA-like and IPA-like baselines).

* ``mechanisms/``: privacy filters (Appendix B), attribution functions (Sec. 3.2-3.3), the budgeting policies,
  bias detection (Appendix D), the per-device replay, the querier's batches and queries (Alg. 1, Sec. 8.1), the
  accuracy target and the in-memory simulation the evaluation runs.
* ``measurement``: the Beam transforms, batch and streaming, from impressions and conversions to query results.

The rule of ``transforms`` holds here: ``mechanisms/`` is Beam-free maths, the modules beside it wire it into Beam.
"""
