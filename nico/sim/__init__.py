"""Simulated GB200 / GB300 NVLink fabric: the in-memory site, NMX-C and NMX-M servers over it, fault knobs.

Knows nothing of nico's database or API; it speaks only the fabric managers' own protocols.
"""
