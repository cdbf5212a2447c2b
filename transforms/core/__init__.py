"""What the subject packages share.

* ``mechanisms/``: the random sources and noise samplers (``noise/``), hour steps and epochs (``time_steps``), exact
  parameters and budget units (``budget_units``), sliding distinct counts (``sliding_distinct``) and the ARA
  source-matching rule (``ara_matching``).
* ``io``: reading event files into typed rows or dead letters (counted per reason), writing records.
* ``device_shards`` (the batch path) and ``device_stream`` (the streaming path, ``DeviceShardFn``): the device
  replays of the budgeting, summary-report and event-level pipelines; ``device_state``: a device's record and its
  explicit codec.

The rule of ``transforms`` holds here: ``mechanisms/`` is Beam-free maths, the modules beside it wire it into Beam.
"""
