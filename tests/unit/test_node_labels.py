"""The node label rule and the label sync's patches, as properties over random trays and Nodes: a node
carries a clique only when every GPU of its tray is Ready in it; a patch never removes a key nico did
not record as its own, and applying it leaves the Node with exactly nico's labels plus everyone else's."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from nico.db.enums import NvLinkInterfaceStatus
from nico.label_sync.plan import OWNED_ANNOTATION, node_patch, owned_keys
from nico.services.node_labels import GFD_CLIQUE_LABEL, gpu_places, node_clique, node_labels
from tests.support.fake_kube import merge_patch

STATUSES = [NvLinkInterfaceStatus.READY, NvLinkInterfaceStatus.PENDING, NvLinkInterfaceStatus.ERROR]
interfaces = st.lists(
    st.fixed_dictionaries(
        {
            "device_instance": st.integers(0, 3),
            "status": st.sampled_from(STATUSES),
            "logical_partition_id": st.sampled_from(["lp-a", "lp-b"]),
            "clique_id": st.sampled_from(["d.1", "d.2"]),
        }
    ),
    max_size=6,
)


@given(interfaces, st.sampled_from([(), (0, 1, 2, 3)]))
def test_a_clique_only_where_every_gpu_of_the_tray_is_ready_in_it(
    bound: list[dict[str, Any]], tray: tuple[int, ...]
) -> None:
    places = gpu_places(bound, tray)
    clique = node_clique(places)
    labels = node_labels(places, domain="d", site="s")
    assert labels.get(GFD_CLIQUE_LABEL) == clique
    if clique is None:
        return
    exposed = set(tray) or {i["device_instance"] for i in bound}
    for device in exposed:
        mine = [i for i in bound if i["device_instance"] == device]
        assert mine and all(
            i["status"] == NvLinkInterfaceStatus.READY and i["clique_id"] == clique for i in mine
        )


def test_two_of_four_gpus_in_a_partition_is_no_clique() -> None:
    bound = [
        {"device_instance": d, "status": "Ready", "logical_partition_id": "lp", "clique_id": "d.7"}
        for d in (0, 1)
    ]
    assert node_clique(gpu_places(bound, (0, 1, 2, 3))) is None
    assert node_clique(gpu_places(bound, (0, 1))) == "d.7"


keys = st.sampled_from(["nvlink.nico.io/a", "nvlink.nico.io/b", "example.com/c", "nvidia.com/gpu.clique"])
labels = st.dictionaries(keys, st.sampled_from(["1", "2"]), max_size=4)


@given(labels, st.sets(keys), st.one_of(st.none(), labels))
def test_a_patch_removes_only_owned_keys_and_leaves_exactly_the_wanted_ones(
    current: dict[str, str], owned: set[str], desired: dict[str, str] | None
) -> None:
    metadata: dict[str, Any] = {"name": "n", "resourceVersion": "4", "labels": current}
    if owned:
        metadata["annotations"] = {OWNED_ANNOTATION: ",".join(sorted(owned))}
    node = {"metadata": metadata}
    patch = node_patch(node, desired)
    after = merge_patch(node, patch) if patch is not None else node
    result = after["metadata"].get("labels") or {}
    wanted = desired or {}
    assert wanted.items() <= result.items()
    for key, value in current.items():
        if key not in wanted and key not in owned:
            assert result.get(key) == value  # never removed nor changed
    assert set(result) == set(wanted) | {k for k in current if k not in owned}
    assert owned_keys(after) == set(wanted)
    if patch is not None:
        assert patch["metadata"]["resourceVersion"] == "4"
        assert node_patch(after, desired) is None  # converged: the next pass sends nothing
