"""A COCO box of negative width, and absolute file_names, through a real
`stoker serve`: kept and read as torchvision's CocoDetection wrapper keeps
and opens them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict

import torch

import stoker
from stoker import transforms as T
from stoker._local import LocalServer


def test_negative_box_and_absolute_file_names(stoker_bin: Path, targets_det: Path, tmp_path: Path) -> None:
    """A COCO box of negative width is kept as torchvision's wrapper keeps
    it (XYWH to XYXY: x2 = x + w < x), moved with the others bit for bit,
    and a SanitizeBoundingBoxes drops it alone, the image's other
    instances kept; absolute file_names under the directory are read from
    it (CocoDetection opens them as they are)."""
    from test_targets import check, coco_sources

    images = targets_det / "images" / "train"
    doc = json.loads((targets_det / "annotations" / "instances.json").read_text())
    for im in doc["images"]:
        im["file_name"] = str(images / im["file_name"])
    counts: Dict[int, int] = {}
    for a in doc["annotations"]:
        counts[a["image_id"]] = counts.get(a["image_id"], 0) + (not a.get("iscrowd"))
    bad = next(a for a in doc["annotations"] if counts[a["image_id"]] >= 2 and not a.get("iscrowd"))
    bad["bbox"][2] = -bad["bbox"][2] - 1.5
    root = tmp_path / "det"
    (root / "annotations").mkdir(parents=True)
    (root / "images").mkdir()
    (root / "images" / "train").symlink_to(images)
    (root / "annotations" / "instances.json").write_text(json.dumps(doc))
    want = coco_sources(root)
    bad_idx = next(i for i, t in want.items() if t["image_id"] == bad["image_id"])
    b = want[bad_idx]["boxes"].as_subclass(torch.Tensor)
    assert bool((b[:, 2] < b[:, 0]).any())  # the wrapper's own box: x2 < x1
    tfs = {"resize": [T.Resize((64, 64))], "sanitize": [T.Resize((64, 64)), T.SanitizeBoundingBoxes()]}
    with LocalServer(str(stoker_bin), {"coco": str(images)}, workers=1,
                     args=["--grace", "1s", "--annotations", f"coco={root / 'annotations' / 'instances.json'}"],
                     log_path=str(tmp_path / "server.log")) as srv:
        for name, ops in tfs.items():
            seen = 0
            with stoker.Loader(srv.addr, "coco", batch_size=6, transform=T.Compose(ops), targets=True, trace=True,
                               return_indices=True, shuffle=False, pin_memory=False, timeout=60) as ld:
                for bt in ld:
                    images_, targets, indices = bt
                    for i, (t, idx) in enumerate(zip(targets, indices.tolist())):
                        check(t, want[idx], bt.trace[i], images_[i], f"{name} sample {idx}")
                        if idx == bad_idx:
                            k = len(want[idx]["labels"])
                            assert len(t["labels"]) == (k - 1 if name == "sanitize" else k), (name, t["labels"])
                        seen += 1
                assert not list(ld.sample_errors)
            assert seen == len(want)
