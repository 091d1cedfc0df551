"""One word per concept: a word kept for one thing does not come back as the name of a module or a
class that means another (docs/architecture.md's glossary)."""

from __future__ import annotations

import ast
from pathlib import Path

NICO = Path(__file__).resolve().parents[2] / "nico"

# word -> the modules (relative to nico/) that may carry it in their path or their classes' names.
# "placement" is the domain chooser; a machine's place on the fabric is its location
# (nico/inventory/location.py, ``Location``) and the scheduler feed is the feed (feed_stream,
# feed_export, ``FeedEvent``). The reconciler is the ``Reconciler``, never a "monitor" (the reference's
# metric names ``nico_nvlink_partition_monitor_*`` stay: they are the wire, not a module or a class).
# "binding" is a GPU's link to a logical partition; reading a request is parsing (api/parsing.py), so
# no module of the API takes the word.
KEPT_FOR_ONE_THING = {
    "placement": {"services/placement.py"},
    "monitor": set(),
}
NOT_IN_THE_API = ("binding",)


def named(root: Path) -> list[tuple[str, str]]:
    """(module path relative to ``root``, a name it holds): its own path and every class it defines."""
    out = []
    for path in sorted(root.rglob("*.py")):
        module = str(path.relative_to(root))
        out.append((module, module))
        tree = ast.parse(path.read_text(), filename=str(path))
        out += [(module, node.name) for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]
    return out


def offenders(root: Path, kept: dict[str, set[str]]) -> list[str]:
    return [
        f"{module}: {name}"
        for module, name in named(root)
        for word, owners in kept.items()
        if word in name.lower() and module not in owners
    ]


def test_no_module_or_class_takes_a_word_kept_for_another_thing() -> None:
    assert offenders(NICO, KEPT_FOR_ONE_THING) == []


def test_request_parsing_is_not_called_binding() -> None:
    api = {module for module, _ in named(NICO / "api")}
    assert [m for m in sorted(api) for word in NOT_IN_THE_API if word in m] == []


def test_the_check_finds_a_module_and_a_class(tmp_path: Path) -> None:
    (tmp_path / "services").mkdir()
    (tmp_path / "services" / "placement.py").write_text("class Choice:\n    pass\n")
    (tmp_path / "inventory_placement.py").write_text("class Spot:\n    pass\n")
    (tmp_path / "records.py").write_text("class MachinePlacement:\n    pass\n")
    found = offenders(tmp_path, {"placement": {"services/placement.py"}})
    assert found == ["inventory_placement.py: inventory_placement.py", "records.py: MachinePlacement"]
