"""The protobuf messages (the source of truth of the wire formats) and their generated modules (``make protos``)."""
