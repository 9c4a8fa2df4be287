"""`stoker serve --dataset NAME=DIR/images/train --annotations NAME=data.yaml`:
a YOLO layout served with each image's label file as its field "yolo",
checked against the label files themselves; a bad line fails its image
alone, naming the label file, the line and the field."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

import stoker
from stoker import transforms as T
from stoker._local import LocalServer

N = 25


@pytest.mark.filterwarnings("ignore:stoker.*could not be made:RuntimeWarning")
def test_yolo_labels_reach_the_trainer(stoker_bin: Path, tmp_path: Path) -> None:
    out = tmp_path / "det"
    r = subprocess.run([str(stoker_bin), "mkdata", "--coco", "--yolo", "--out", str(out), "--n", str(N)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    bad = out / "labels" / "train" / "000003.txt"
    bad.write_text(bad.read_text() + "9 0.1 0.1 0.2 0.2 0.3 0.1\n")  # class 9 of 5
    srv = LocalServer(str(stoker_bin), {"y": str(out / "images" / "train")}, workers=1,
                      args=["--grace", "1s", "--annotations", f"y={out / 'data.yaml'}"], log_path=str(tmp_path / "log"))
    with srv:
        info = {d.name: d for d in stoker.list_datasets(srv.addr)}["y"]
        assert info.format == "yolo" and list(info.classes) == ["disc", "triangle", "square", "star", "hexagon"]
        with stoker.Loader(srv.addr, "y", batch_size=4, transform=T.Compose([T.Resize((32, 32))]),
                           fields=("yolo", "path"), pin_memory=False, timeout=60) as ld:
            seen = set()
            for b in ld:
                for raw, path in zip(b.fields["yolo"], b.fields["path"]):
                    got = json.loads(raw)
                    assert got["file_name"] == path.decode()
                    lines = (out / "labels" / "train" / path.decode().replace(".jpg", ".txt")).read_text().split("\n")
                    want = [[float(v) for v in line.split()] for line in lines if line.strip()]
                    assert len(got["labels"]) == len(want)
                    for g, w in zip(got["labels"], want):
                        assert g["class"] == int(w[0])
                        assert g["polygon"] == pytest.approx(w[1:], abs=1e-6)
                        xs, ys = w[1::2], w[2::2]
                        box = [(min(xs) + max(xs)) / 2, (min(ys) + max(ys)) / 2, max(xs) - min(xs), max(ys) - min(ys)]
                        assert g["box"] == pytest.approx(box, abs=1e-6)
                    seen.add(path.decode())
            errors = list(ld.sample_errors)
    assert len(errors) == 1 and errors[0].name == "000003.jpg", errors
    reason = errors[0].reason
    assert "labels/train/000003.txt" in reason and "field class" in reason and "line " in reason, reason
    assert str(tmp_path) not in reason
    assert len(seen) == N - 1
