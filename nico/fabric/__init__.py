"""Talking to NVLink fabric managers: the backend protocol, NMX-C (gRPC) and NMX-M (REST) clients."""
