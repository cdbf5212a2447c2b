"""What the subject packages share.

* ``mechanisms/``: the random sources and noise samplers (``noise/``), hour steps and epochs (``time_steps``), exact
  parameters and budget units (``budget_units``), sliding distinct counts (``sliding_distinct``) and the ARA
  source-matching rule (``ara_matching``).
* ``io``: reading event files into typed rows or dead letters (counted per reason), writing records.
* ``device_state``: device shards for the batch path and buffered per-device state with event-time timers for
  the streaming path, used by the budgeting, summary-report and event-level pipelines.

The rule of ``transforms`` holds here: ``mechanisms/`` is Beam-free maths, the modules beside it wire it into Beam.
"""
