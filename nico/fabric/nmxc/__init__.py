"""NMX-C: the per-chassis gRPC fabric manager (client, committed protobuf stubs, their generator)."""
