"""NMX return codes (``StReturnCode``, ``NMX_ST_*``) and the :class:`FabricError` each one becomes.

NMX-C puts a return code in every reply's ``ServerHeader``; the NMX-M simulator reports the same
names in failed operations and error bodies. Anything but SUCCESS is an error. Whether it is worth
retrying follows from what the code says about the controller: not ready, busy or internally broken
(retry later) versus a request it refuses (retrying the same request cannot help).
"""

from __future__ import annotations

from nico.fabric.backend import (
    FabricBusy,
    FabricError,
    FabricRejected,
    FabricTimeout,
    PartitionNotFound,
)
from nico.fabric.nmxc import nmx_c_pb2 as pb

SUCCESS: int = pb.NMX_ST_SUCCESS

_TIMEOUT = frozenset({pb.NMX_ST_TIMEOUT})
# The controller answered but cannot act now; the same request may succeed later.
_BUSY = frozenset(
    {
        pb.NMX_ST_GENERIC_ERROR,
        pb.NMX_ST_UNINITIALIZED,
        pb.NMX_ST_NOT_CONFIGURED,
        pb.NMX_ST_CONNECTION_NOT_VALID,
        pb.NMX_ST_NVLINK_ERROR,
        pb.NMX_ST_RESOURCE_NOT_READY,
        pb.NMX_ST_NOT_READY,
        pb.NMX_ST_NMX_CONTROLLER_INTERNAL_ERROR,
        pb.NMX_ST_NMX_CONTROLLER_DB_ERROR,
        pb.NMX_ST_NMX_CONTROLLER_DB_CORRUPTION,
        pb.NMX_ST_NMX_CONTROLLER_INVALID_CONFIG_FILE,
    }
)
_NOT_FOUND = frozenset({pb.NMX_ST_PARTITION_ID_NOT_IN_USE, pb.NMX_ST_PARTITION_NAME_NOT_IN_USE})
# Everything else is a refusal: BADPARAM, NOT_SUPPORTED, VERSION_MISMATCH, IN_USE, RESOURCE_BAD,
# RESOURCE_IN_USE, RESOURCE_NOT_IN_USE, RESOURCE_EXHAUSTED, PARTITION_EXISTS, PARTITION_ID_IN_USE,
# PARTITION_NAME_IN_USE, PARTITION_ID_NAME_MISMATCH, and UNDEFINED (a reply without a status says
# the peer does not speak this protocol; retrying will not change that), and codes we do not know.


def code_name(code: int) -> str:
    """``NMX_ST_<NAME>`` for a known code, ``NMX_ST_<number>`` for one this proto does not list."""
    try:
        return str(pb.StReturnCode.Name(code))
    except ValueError:
        return f"NMX_ST_{code}"


def code_from_name(name: str) -> int | None:
    """The number of an ``NMX_ST_*`` name, or None when ``name`` is not one."""
    try:
        return int(pb.StReturnCode.Value(name))
    except ValueError:
        return None


def return_code_error(code: int, message: str, *, endpoint: str | None = None) -> FabricError:
    """The error for a reply whose return code is ``code`` (which must not be SUCCESS)."""
    name = code_name(code)
    text = f"{message}: {name}"
    if code in _TIMEOUT:
        return FabricTimeout(text, code=name, endpoint=endpoint)
    if code in _BUSY:
        return FabricBusy(text, code=name, endpoint=endpoint)
    if code in _NOT_FOUND:
        return PartitionNotFound(text, code=name, endpoint=endpoint)
    return FabricRejected(text, code=name, endpoint=endpoint)
