"""Tests of the wire and file formats of ``schemas``: the decoders and their dead-letter reasons, the columnar Avro
path against the row path, the agreement of each record's protobuf, Avro and NamedTuple descriptions (and of the
committed generated code), rows to protobuf messages and back, and the Aggregation Service's report formats.
"""
