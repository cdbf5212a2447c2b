"""Wire and file formats: protobuf messages (source of truth), Avro schemas, row types and codecs."""
