"""torchvision's semantic segmentation references' training geometry
(references/segmentation/presets.py, SegmentationPresetTrain with
use_v2=True: RandomResize, RandomHorizontalFlip, the references'
PadIfSmaller, RandomCrop) against torchvision, through a real ``stoker
serve`` on mkdata --coco's photos. Each sample's trace (resize,
horizontal_flip, pad, crop in torchvision's order) is replayed by
torchvision.transforms.v2.functional: on decode_jpeg's pixels the same
bytes; on the CocoDetection wrapper's boxes and keypoints the same float32
bits; on pycocotools' masks, with the Mask's fill (the references' 255),
the same bytes. The draws (the resized size, the flip, the crop's place)
are compared with torchvision's make_params; from_torchvision converts the
references' recipe (PadIfSmaller by its module and name, as the
references import it), and the preset "segref" is that recipe at their
defaults (base_size 520, crop_size 480). stoker.semantic_mask of the
moved instances is the references' COCO map (coco_utils.py), moved."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest
import torch
from google.protobuf import json_format
from torchvision import tv_tensors
from torchvision.io import ImageReadMode, decode_jpeg, read_file
from torchvision.transforms import v2 as tv2
from torchvision.transforms.v2 import functional as F

import stoker
from stats import Checks, compare_values, in_band, ops_draw
from stoker import transforms as T
from stoker._errors import StokerError
from stoker.v1 import stoker_pb2 as pb
from test_detection_ops import replay_pixels
from test_targets import N, coco_sources, det, replay, server  # noqa: F401 (the fixtures)
from test_targets_kpts import coco_points
from test_targets_mask_fill import masks_trace
from test_targets_masks import coco_masks, replay_masks

IMG, MASK = tv_tensors.Image, tv_tensors.Mask
MEAN = (123, 117, 104)

# name: (the ops, the Mask's fill of each filling step by its pixel fill).
# mkdata's photos are 320 to 480 pixels a side: each recipe both pads and
# crops, flipped and not.
TRANSFORMS: Dict[str, Any] = {
    # The references' order, their fills: 0 for the pixels, 255 for masks.
    "segref-small": ([T.RandomResize(100, 400), T.RandomHorizontalFlip(), T.PadIfSmaller(240, fill={MASK: 255, "others": 0}),
                      T.RandomCrop(240)], {(0.0, 0.0, 0.0): 255}),
    # A pixel fill of its own, a crop that is not square, bicubic, the
    # flip after the crop (fused), a photometric op after.
    "flip-after-bicubic": ([T.RandomResize(120, 360, interpolation="bicubic"), T.PadIfSmaller(200, fill={IMG: MEAN, MASK: 255}),
                            T.RandomCrop((200, 170)), T.RandomHorizontalFlip(), T.ColorJitter(0.3, 0.3)],
                           {tuple(float(v) for v in MEAN): 255}),
    # No PadIfSmaller: RandomCrop's own padding and pad_if_needed (both
    # sides), with a fill per type, between two flips.
    "pad-if-needed": ([T.RandomResize(100, 300, antialias=False), T.RandomHorizontalFlip(0.5),
                       T.RandomCrop(220, padding=(3, 5), pad_if_needed=True, fill={IMG: (10, 20, 30), MASK: 7}),
                       T.RandomVerticalFlip()], {(10.0, 20.0, 30.0): 7}),
}


def replay_points(points: tv_tensors.KeyPoints, trace: List[Any]) -> tv_tensors.KeyPoints:
    """The trace's geometry on keypoints (torchvision's keypoint kernels;
    none drops an instance here)."""
    for name, args in trace:
        if name not in ("resize", "horizontal_flip", "vertical_flip", "pad", "crop"):
            continue
        kw = {k: v for k, v in args.items() if k not in ("interpolation", "antialias", "fill")}
        points = getattr(F, name)(points, **kw)
    return points


def check_sample(image: torch.Tensor, got: Dict[str, Any], want: Dict[str, Any], src: torch.Tensor, masks: torch.Tensor,
                 points: Any, trace: List[Any], mask_fill: Any, exact: bool, where: str) -> None:
    if exact:
        assert torch.equal(image, replay_pixels(src, trace)), f"{where}: not torchvision's pixels"
    moved, keep = replay(want["boxes"], trace)
    assert bool(keep.all()), where  # nothing here drops an instance
    assert tuple(got["boxes"].canvas_size) == tuple(moved.canvas_size) == tuple(image.shape[-2:]), where
    # The same float32 bits: resize, flip, pad and crop are elementwise on
    # both sides (no matmul whose order a BLAS picks).
    assert torch.equal(got["boxes"].as_subclass(torch.Tensor), moved.as_subclass(torch.Tensor)), where
    assert torch.equal(got["labels"], want["labels"]), where
    m = replay_masks(masks, want["boxes"], masks_trace(trace, mask_fill))
    assert got["masks"].dtype == torch.uint8 and torch.equal(got["masks"].as_subclass(torch.Tensor),
                                                             m.as_subclass(torch.Tensor)), where
    kp, vis = points
    mp = replay_points(kp, trace)
    assert tuple(got["keypoints"].canvas_size) == tuple(mp.canvas_size), where
    assert torch.equal(got["keypoints"].as_subclass(torch.Tensor), mp.as_subclass(torch.Tensor)), where
    assert torch.equal(got["keypoints_visibility"], vis), where


@pytest.mark.parametrize("name", sorted(TRANSFORMS))
def test_segref_is_torchvisions(server: str, det: Path, name: str) -> None:  # noqa: F811
    """Pixels (where the decode was exact: byte for byte), boxes and
    keypoints (the same float32 bits), masks (byte for byte, the padding's
    the Mask's fill) of every sample, two seeds."""
    ops, mask_fill = TRANSFORMS[name]
    images_dir = det / "images" / "train"
    want, masks, points = coco_sources(det), coco_masks(det), coco_points(det)
    seen, exact, kinds, fill_px = 0, 0, set(), 0
    big = set(mask_fill.values()) - {0, 1}
    for seed in (1, 2):
        with stoker.Loader(server, "coco", batch_size=6, transform=T.Compose(ops), trace=True, return_indices=True,
                           targets=("boxes", "labels", "masks", "keypoints", "keypoints_visibility"), fields=("path",),
                           pin_memory=False, timeout=60, seed=seed) as ld:
            for b in ld:
                images, targets, indices = b
                for i, (t, idx) in enumerate(zip(targets, indices.tolist())):
                    trace = b.trace[i]
                    where = f"{name} seed {seed} sample {idx}: {trace}"
                    src = decode_jpeg(read_file(str(images_dir / b.fields["path"][i].decode())), mode=ImageReadMode.RGB)
                    check_sample(images[i], t, want[idx], src, masks[idx], points[idx], trace, mask_fill,
                                 b.decode == "exact", where)
                    exact += b.decode == "exact"
                    steps = [s for s, _ in trace]
                    # padded: a PadIfSmaller's, or pad_if_needed's past the
                    # RandomCrop's own padding (3, 5)
                    pads = [a["padding"] for s, a in trace if s == "pad"]
                    kinds.add(("flipped" if "horizontal_flip" in steps else "not flipped",
                               "padded" if any(p not in ([3, 5, 3, 5],) for p in pads) else "not padded"))
                    fill_px += sum(int((t["masks"] == v).sum()) for v in big)
                    seen += 1
            assert not list(ld.sample_errors)
    assert seen == 2 * N and exact > 0
    assert len(kinds) == 4, kinds
    assert fill_px > 0, "no mask pixel of the padding's fill"


DRAWS = 20000


def stoker_draws(stoker_bin: Path, ops: List[pb.Op], seed: int, source: Tuple[int, int]) -> List[Dict[str, Any]]:
    js = json_format.MessageToJson(pb.TransformSpec(ops=ops), indent=None)
    out = []
    for steps in ops_draw(stoker_bin, js, DRAWS, seed, source):
        crop = steps.get("crop", {"top": 0, "left": 0})
        out.append({"short": min(steps["resize"]["size"]), "flip": int("horizontal_flip" in steps),
                    "top": crop["top"], "left": crop["left"], "pad": tuple(steps.get("pad", {"padding": [0] * 4})["padding"])})
    assert len(out) == DRAWS
    return out


@pytest.mark.parametrize("source", [(500, 375), (300, 420)])
def test_draws_are_torchvisions(stoker_bin: Path, source: Tuple[int, int]) -> None:
    """RandomResize's size (make_params' randint in [min_size, max_size)),
    the flip, PadIfSmaller's padding and RandomCrop's top and left on the
    padded image, against torchvision's classes' make_params chained on
    the same image size (chi-square on the integers, DRAWS draws a seed)."""
    lo, hi, crop = 260, 1040, 480
    ops = [T.RandomResize(lo, hi), T.RandomHorizontalFlip(), T.PadIfSmaller(crop, fill={MASK: 255, "others": 0}),
           T.RandomCrop(crop)]
    rr, fl, rc = tv2.RandomResize(lo, hi), tv2.RandomHorizontalFlip(), tv2.RandomCrop(crop)
    w0, h0 = source
    one = torch.zeros(1, dtype=torch.uint8)

    def theirs() -> Dict[str, Any]:
        s = rr.make_params([])["size"]
        h, w = F._geometry._compute_resized_output_size((h0, w0), s)
        flip = int(torch.rand(1) < fl.p)
        pad = (0, 0, max(crop - w, 0), max(crop - h, 0))
        p = rc.make_params([tv_tensors.Image(one.expand(3, h + pad[3], w + pad[2]))])
        return {"short": min(h, w), "flip": flip, "top": p["top"], "left": p["left"], "pad": pad}

    def run(k: int) -> Checks:
        mine = stoker_draws(stoker_bin, [op.to_proto() for op in ops], k, source)
        torch.manual_seed(500 + k)
        tv = [theirs() for _ in range(DRAWS)]
        c = Checks()
        for key in ("short", "flip", "top", "left"):
            compare_values(c, f"segref: {key}", [m[key] for m in mine], [x[key] for x in tv])
        compare_values(c, "segref: padded", [int(any(m["pad"])) for m in mine], [int(any(x["pad"])) for x in tv])
        return c

    in_band(run)


class PadIfSmaller(tv2.Transform):
    """The segmentation references' PadIfSmaller (their v2_extras.py, as
    their presets import it: module ``v2_extras``), run by torchvision."""

    def __init__(self, size: int, fill: Any = 0) -> None:
        super().__init__()
        self.size = size
        self.fill = tv2._utils._setup_fill_arg(fill)

    def make_params(self, flat_inputs: List[Any]) -> Dict[str, Any]:
        height, width = tv2._utils.query_size(flat_inputs)
        padding = [0, 0, max(self.size - width, 0), max(self.size - height, 0)]
        return dict(padding=padding, needs_padding=any(padding))

    def transform(self, inpt: Any, params: Dict[str, Any]) -> Any:
        if not params["needs_padding"]:
            return inpt
        fill = tv2._utils._get_fill(self.fill, type(inpt))
        return F.pad(inpt, padding=params["padding"], fill=tv2._utils._convert_fill_arg(fill))


PadIfSmaller.__module__ = "v2_extras"


def references_recipe(base_size: int = 520, crop_size: int = 480) -> tv2.Compose:
    """SegmentationPresetTrain(base_size, crop_size, use_v2=True) at its
    defaults (hflip_prob 0.5, ImageNet's mean and std, backend "pil")."""
    return tv2.Compose([
        tv2.RandomResize(min_size=int(0.5 * base_size), max_size=int(2.0 * base_size)),
        tv2.RandomHorizontalFlip(0.5),
        PadIfSmaller(crop_size, fill={MASK: 255, "others": 0}),
        tv2.RandomCrop(crop_size),
        tv2.PILToTensor(),
        tv2.ToDtype(dtype={torch.Tensor: torch.float32, MASK: torch.int64, "others": None}, scale=True),
        tv2.Normalize(mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225)),
        tv2.ToPureTensor(),
    ])


def test_references_class_runs_as_converted(det: Path) -> None:  # noqa: F811
    """The PadIfSmaller above is the references' (run by torchvision on an
    image and its Mask: right and bottom, 0 and 255), and from_torchvision
    converts the whole recipe to stoker's ops."""
    img = tv_tensors.Image(torch.full((3, 100, 130), 9, dtype=torch.uint8))
    mask = tv_tensors.Mask(torch.ones(100, 130, dtype=torch.uint8))
    pi, pm = PadIfSmaller(120, fill={MASK: 255, "others": 0})(img, mask)
    assert pi.shape == (3, 120, 130) and int(pi[:, 100:].max()) == 0 and int(pi[:, :100].min()) == 9
    assert pm.shape == (120, 130) and bool((pm[100:] == 255).all()) and bool((pm[:100] == 1).all())
    class SegmentationPresetTrain:  # the references' holder of the pipeline, as their train.py makes it
        def __init__(self) -> None:
            self.transforms = references_recipe()

    got = T.from_torchvision(references_recipe())
    held = T.from_torchvision(SegmentationPresetTrain())
    assert held.transforms == got.transforms and held.normalize_mean == got.normalize_mean
    assert got.transforms == [T.RandomResize(260, 1040), T.RandomHorizontalFlip(0.5),
                              T.PadIfSmaller(480, fill={IMG: 0, MASK: 255}), T.RandomCrop(480)]
    assert (got.normalize_mean, got.normalize_std) == ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))


def test_segref_preset_is_the_recipe(server: str, det: Path) -> None:  # noqa: F811
    """transform="segref" is the references' recipe (base_size 520,
    crop_size 480) converted by from_torchvision (its ToDtype and
    Normalize left to the trainer's GPU): the same traces and uint8
    samples, seed for seed; the masks' padding is 255 and a few samples'
    pixels are torchvision's replay of the trace (exact decodes)."""
    recipe = T.from_torchvision(references_recipe())
    images_dir = det / "images" / "train"
    kw = dict(batch_size=4, seed=5, targets=("labels", "masks"), trace=True, return_indices=True, pin_memory=False,
              timeout=120, shuffle=False, fields=("path",))
    seen, kinds = 0, set()
    with stoker.Loader(server, "coco", transform="segref", **kw) as a, \
            stoker.Loader(server, "coco", transform=recipe, **kw) as b:
        for x, y in zip(a, b):
            assert x.trace == y.trace
            assert x[0].dtype == torch.uint8 and x[0].shape[1:] == (3, 480, 480) and torch.equal(x[0], y[0])
            for i, t in enumerate(x[1]):
                steps = dict((s, a) for s, a in x.trace[i])
                kinds.add("padded" if "pad" in steps else "cropped")
                if "pad" in steps and len(t["labels"]):
                    _, _, r, bo = steps["pad"]["padding"]
                    assert bool((t["masks"][:, 480 - bo:, :] == 255).all()) if bo else True
                    assert bool((t["masks"][:, :, 480 - r:] == 255).all()) if r else True
                if seen < 6 and x.decode == "exact":
                    src = decode_jpeg(read_file(str(images_dir / x.fields["path"][i].decode())), mode=ImageReadMode.RGB)
                    assert torch.equal(x[0][i], replay_pixels(src, x.trace[i])), x.trace[i]
                seen += 1
    assert seen == N and kinds == {"cropped", "padded"}, kinds


@pytest.mark.parametrize("ops,what", [
    ([T.RandomResize(100, 300), T.PadIfSmaller(200)], "PadIfSmaller"),
    ([T.Resize((100, 100)), T.PadIfSmaller(200), T.RandomCrop(200)], "PadIfSmaller"),
    ([T.RandomResize(100, 300), T.PadIfSmaller(200, fill=3), T.RandomCrop(200, padding=2)], "two fills"),
    ([T.RandomResize(100, 300), T.RandomCrop(200), T.CenterCrop(100)], "CenterCrop"),
])
def test_refused(server: str, ops: List[Any], what: str) -> None:  # noqa: F811
    with pytest.raises(StokerError, match=what):
        with stoker.Loader(server, "coco", batch_size=2, transform=T.Compose(ops), pin_memory=False, timeout=30) as ld:
            next(iter(ld))


def test_smaller_than_the_crop_fails_the_sample(server: str) -> None:  # noqa: F811
    """Without PadIfSmaller or pad_if_needed, an image resized smaller than
    the crop fails its sample, naming the sizes, as torchvision's
    RandomCrop raises (a batch of no samples ends the job)."""
    tf = T.Compose([T.RandomResize(100, 120), T.RandomCrop(200)])
    with pytest.raises(StokerError, match=r"resized to \d+x\d+ and padded to \d+x\d+, is smaller than the 200x200 crop"):
        with stoker.Loader(server, "coco", batch_size=4, transform=tf, pin_memory=False, timeout=30) as ld:
            next(iter(ld))


def references_semantic(det: Path, remap: bool) -> Dict[int, torch.Tensor]:
    """Per sample index (images sorted by id), the references' COCO
    target (coco_utils.py): FilterAndRemapCategories(CAT_LIST) when remap
    (the annotations of other categories dropped, each category its place
    in the list), then ConvertCocoPolysToMask: each annotation's
    segmentation through pycocotools' frPyObjects and decode, any over its
    parts; the masks times their categories, max over them, 255 where
    they overlap; zeros without annotations."""
    import json

    from pycocotools import mask as coco_mask

    doc = json.loads((det / "annotations" / "instances.json").read_text())
    anns: Dict[int, List[Any]] = {}
    for a in doc["annotations"]:
        anns.setdefault(a["image_id"], []).append(a)
    out = {}
    for i, im in enumerate(sorted(doc["images"], key=lambda im: im["id"])):
        h, w = im["height"], im["width"]
        a = anns.get(im["id"], [])
        if remap:
            a = [dict(x, category_id=stoker.VOC_CATEGORIES.index(x["category_id"])) for x in a
                 if x["category_id"] in stoker.VOC_CATEGORIES]
        if not a:
            out[i] = torch.zeros(h, w, dtype=torch.uint8)
            continue
        masks = []
        for x in a:
            m = coco_mask.decode(coco_mask.frPyObjects(x["segmentation"], h, w))
            m = torch.as_tensor(m[..., None] if m.ndim < 3 else m, dtype=torch.uint8).any(dim=2)
            masks.append(m)
        masks = torch.stack(masks).to(torch.uint8)
        cats = torch.as_tensor([x["category_id"] for x in a], dtype=masks.dtype)
        target, _ = (masks * cats[:, None, None]).max(dim=0)
        target[masks.sum(0) > 1] = 255
        out[i] = target
    return out


DENSE_N = 16


@pytest.fixture(scope="module")
def dense(stoker_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A denser mkdata --coco set (15 shapes an image) whose instances
    overlap (which the references' map marks 255), served: (its directory,
    the server's address)."""
    from stoker._local import LocalServer

    import json

    out = tmp_path_factory.mktemp("dense")
    r = subprocess.run([str(stoker_bin), "mkdata", "--coco", "--out", str(out), "--n", str(DENSE_N), "--seed", "9",
                        "--instances", "15"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    # mkdata's shapes never overlap: each image's polygons again, moved 5
    # pixels right and down, of the next category, where they stay inside.
    path = out / "annotations" / "instances.json"
    doc = json.loads(path.read_text())
    size = {im["id"]: (im["width"], im["height"]) for im in doc["images"]}
    cats = sorted(c["id"] for c in doc["categories"])
    nkp = {c["id"]: len(c.get("keypoints") or []) for c in doc["categories"]}
    nid = max(a["id"] for a in doc["annotations"]) + 1
    for a in list(doc["annotations"]):
        x, y, w, h = a["bbox"]
        W, H = size[a["image_id"]]
        if a.get("iscrowd") or not isinstance(a["segmentation"], list) or x + w + 5 > W or y + h + 5 > H:
            continue
        seg = [[v + 5 for v in poly] for poly in a["segmentation"]]
        same = [c for c in cats if nkp[c] == nkp[a["category_id"]]]  # of as many keypoints
        cat = same[(same.index(a["category_id"]) + 1) % len(same)]
        kp = a.get("keypoints") or []
        kp = [v + 5 if j % 3 < 2 and kp[j - j % 3 + 2] else v for j, v in enumerate(kp)]
        doc["annotations"].append(dict(a, id=nid, bbox=[x + 5, y + 5, w, h], segmentation=seg, category_id=cat,
                                       keypoints=kp))
        nid += 1
    path.write_text(json.dumps(doc))
    log = tmp_path_factory.mktemp("log") / "server.log"
    srv = LocalServer(str(stoker_bin), {"coco": str(out / "images" / "train")}, workers=2,
                      args=["--grace", "1s", "--annotations", f"coco={out / 'annotations' / 'instances.json'}"],
                      log_path=str(log))
    with srv:
        yield out, srv.addr


@pytest.mark.parametrize("remap", [True, False])
def test_semantic_mask_is_the_references(dense: Any, remap: bool) -> None:
    """stoker.semantic_mask of each served sample's moved instance masks
    and labels is the references' COCO target (their loader's map, with and
    without the remap to VOC's classes) moved by torchvision's functional
    ops of the sample's trace with PadIfSmaller's Mask fill, 255: the same
    bytes."""
    import json

    det, server = dense
    ids = sorted(c["id"] for c in json.loads((det / "annotations" / "instances.json").read_text())["categories"])
    # The labels are the file's category ids (torchvision's wrapper's):
    # values by id.
    span = range(max(ids) + 1)
    values = [stoker.VOC_CATEGORIES.index(c) if c in stoker.VOC_CATEGORIES else -1 for c in span] if remap else list(span)
    ref = references_semantic(det, remap)
    want = coco_sources(det)
    ops, mask_fill = TRANSFORMS["segref-small"]
    seen, overlap, filled, classes = 0, 0, 0, set()
    with stoker.Loader(server, "coco", batch_size=6, transform=T.Compose(ops), trace=True, return_indices=True,
                       targets=("labels", "masks"), pin_memory=False, timeout=60, seed=4) as ld:
        for b in ld:
            _, targets, indices = b
            for i, (t, idx) in enumerate(zip(targets, indices.tolist())):
                got = stoker.semantic_mask(t["masks"], t["labels"], values)
                moved = replay_masks(ref[idx][None], want[idx]["boxes"], masks_trace(b.trace[i], mask_fill))[0]
                assert got.dtype == torch.uint8 and torch.equal(got.as_subclass(torch.Tensor),
                                                                moved.as_subclass(torch.Tensor)), f"sample {idx}: {b.trace[i]}"
                pad = [a["padding"] for s, a in b.trace[i] if s == "pad"]
                filled += bool(pad)
                overlap += int(((t["masks"] == 1).sum(0) > 1).sum())  # pixels of two instances: 255
                classes.update(torch.unique(got).tolist())
                seen += 1
        assert not list(ld.sample_errors)
    assert seen == DENSE_N and filled > 0 and overlap > 0 and len(classes - {0, 255}) >= 2, (filled, overlap, classes)


def test_semantic_mask_checks() -> None:
    """Its arguments: uint8 [K, H, W] masks, a label for each, values of
    0..255 or -1 for every label."""
    m = torch.zeros(2, 3, 4, dtype=torch.uint8)
    m[0, 0, :2], m[1, 0, 1:3], m[:, 2, :] = 1, 1, 255  # overlap at (0, 1), a fill on the last row
    got = stoker.semantic_mask(m, torch.tensor([0, 1]), [7, 9])
    assert got.tolist() == [[7, 255, 9, 0], [0, 0, 0, 0], [255, 255, 255, 255]]
    assert stoker.semantic_mask(m, torch.tensor([0, 1]), [7, -1]).tolist()[0] == [7, 7, 0, 0]
    assert stoker.semantic_mask(torch.zeros(0, 3, 4, dtype=torch.uint8), torch.zeros(0, dtype=torch.int64), []).shape == (3, 4)
    for masks, labels, values, what in [(m.float(), [0, 1], [1, 2], "uint8"), (m, [0], [1, 2], "labels for"),
                                        (m, [0, 2], [1, 2], "values for"), (m, [0, 1], [1, 256], "0..255")]:
        with pytest.raises(ValueError, match=what):
            stoker.semantic_mask(masks, torch.tensor(labels), values)
