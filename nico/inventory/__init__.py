"""Machine inventory: machines as providers and tenants see and change them, their registration, and
their location on the NVLink fabric (domain, chassis, tray, GPUs)."""
