"""Where a GPU in no tenant partition lives: its home partition (pure; spec/nmx-c-2026.md).

Two modes, set by ``nvlink_config.default_partition_mode``:

* ``domain`` (nico's original model): the home of every GPU is the domain's default partition
  (id 32766). When that partition is gone (deleted behind nico's back, or by an earlier tray-mode
  run), the GPU's tray partition is its home instead, so a GPU is never left in no partition.
* ``tray`` (the reference since 2026, #1559): the home of a GPU is its compute tray's partition,
  named ``tray_partition_<slot>``; the domain default is deleted once every GPU in it has a tray home.
  A GPU whose slot nico does not know keeps the domain default as its home (and so keeps it alive).

In a domain of several chassis (NVL36x2) two trays share a slot number, so there the name carries
the chassis serial too: ``tray_partition_<serial>_<slot>``. Names are unique per domain on the fabric,
so the name alone identifies a tray partition; tray partitions are never recorded as physical
partitions (they belong to no logical partition).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Literal

Mode = Literal["domain", "tray"]
MODES: tuple[Mode, ...] = ("domain", "tray")
TRAY_PARTITION_PREFIX = "tray_partition_"
DEFAULT_HOME = "<domain default>"  # home_target's answer for the domain default partition
_NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,200}$")


def tray_partition_name(slot: int, chassis_serial: str | None = None) -> str:
    """The name of a compute tray's home partition (``chassis_serial`` only where slots repeat)."""
    if chassis_serial:
        return f"{TRAY_PARTITION_PREFIX}{chassis_serial}_{slot}"
    return f"{TRAY_PARTITION_PREFIX}{slot}"


def is_tray_partition_name(name: str) -> bool:
    return name.startswith(TRAY_PARTITION_PREFIX) and bool(_NAME.match(name))


def home_names(gpus: Iterable[tuple[int, str, int | None]]) -> dict[int, str]:
    """gpu_uid -> its tray partition's name, for (gpu_uid, chassis serial, slot) of one domain's GPUs
    (GPUs of unknown slot have none)."""
    rows = list(gpus)
    serials = {serial for _, serial, _ in rows}
    several = len(serials) > 1
    names: dict[tuple[str, int], str] = {}  # a tray's GPUs share its name: made once a tray
    homes = {}
    for uid, serial, slot in rows:
        if slot is not None:
            name = names.get((serial, slot))
            if name is None:
                name = names[serial, slot] = tray_partition_name(slot, serial if several else None)
            homes[uid] = name
    return homes


def home_target(
    gpu: int,
    mode: Mode,
    homes: Mapping[int, str],
    default_present: bool,
) -> str | None:
    """The home of ``gpu``: :data:`DEFAULT_HOME` for the domain default, a tray partition name, or None when
    it has none (domain mode without a default partition and no known slot)."""
    tray = homes.get(gpu)
    if mode == "tray":
        if tray is not None:
            return tray
        return DEFAULT_HOME if default_present else None
    if default_present:
        return DEFAULT_HOME
    return tray


def home_targets(
    gpus: Iterable[int], mode: Mode, homes: Mapping[int, str], default_present: bool
) -> dict[int, str | None]:
    """:func:`home_target` of each of ``gpus`` at once (a plan asks it of every GPU of the domain)."""
    if mode == "tray":
        fallback = DEFAULT_HOME if default_present else None
        return {gpu: homes.get(gpu, fallback) for gpu in gpus}
    if default_present:
        return dict.fromkeys(gpus, DEFAULT_HOME)
    return {gpu: homes.get(gpu) for gpu in gpus}
