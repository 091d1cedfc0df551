"""nico: a control plane for NVLink partitions on rack-scale GPU systems."""

__version__ = "0.1.0"
