"""list_datasets' category ids: a COCO dataset's labels (its category ids,
by default) map to their names as the file gives them; a dataset without
them maps its labels to its classes by index."""

from __future__ import annotations

import json
from pathlib import Path

import stoker


def test_coco_category_names(targets_server: str, targets_det: Path) -> None:
    doc = json.loads((targets_det / "annotations" / "instances.json").read_text())
    want = {c["id"]: c["name"] for c in doc["categories"]}
    info = {d.name: d for d in stoker.list_datasets(targets_server)}
    coco = info["coco"]
    assert coco.category_names() == want and sorted(coco.category_ids) == sorted(want)
    assert list(want) != list(range(len(want)))  # the file's ids are not the ranks: the map matters
    other = next(d for d in info.values() if not d.category_ids)
    assert other.category_names() == dict(enumerate(other.classes))
