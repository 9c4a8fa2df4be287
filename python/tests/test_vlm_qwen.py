"""The Qwen2-VL family's image processors (transformers' Qwen2VLImageProcessor,
its torchvision back-end, which Qwen2-VL, Qwen2.5-VL and Qwen3-VL use) against
stoker's SmartResize and Batch.vision_inputs, through a real ``stoker serve``
and the client, by gRPC and by shared memory.

Over the committed photos (their gray, 4:2:2, 4:4:4, progressive and
restart-marker variants too) and synthetic extremes made from them with PIL
and encoded as JPEG (tiny, panorama, portrait, large, sides on smart_resize's
half-way roundings): each sample's uint8 window equals the processor's own
resize of ``decode_jpeg``'s pixels byte for byte; ``pixel_values`` equal the
processor's on the same decoded images (atol 1e-6, and here bit for bit) and
``image_grid_thw`` exactly; each image's patches number
``get_number_of_image_patches``. For Qwen2-VL's defaults (the preset), Qwen3-VL's
checkpoints' configuration (from_hf) and a budget that makes every photo
shrink or grow (bilinear). Then the refusals: what from_hf cannot reproduce,
an aspect past 200 and a sample past the bound failing alone."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest
import torch
from PIL import Image
from torchvision.io import ImageReadMode, decode_jpeg, read_file

import stoker
from stoker import transforms as T
from stoker._local import LocalServer

transformers = pytest.importorskip("transformers")  # pinned in python/requirements-dev.txt: never skipped there
from transformers.image_utils import SizeDict  # noqa: E402
from transformers.models.qwen2_vl.image_processing_qwen2_vl import Qwen2VLImageProcessor, smart_resize  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
PHOTOS = REPO / "testdata" / "photos"

# The synthetic extremes: (name, width, height), each a committed photo
# resized with PIL (bicubic) and encoded as JPEG.
EXTREMES = [
    ("tiny", 20, 12),  # under min_pixels: grown (the ceil branch)
    ("panorama", 1400, 180),
    ("portrait", 240, 1000),
    ("large", 2000, 1500),  # past Qwen2-VL's max_pixels: shrunk (the floor branch)
    ("halfway", 70, 98),  # 2.5 and 3.5 times 28: Python's round, half to even
    ("strip", 1190, 8),  # aspect 149: past min_pixels' ceil on a side of 8
]


def qwen3_processor() -> Any:
    """Qwen3-VL's image processor as its checkpoints configure it
    (preprocessor_config.json: patch 16, merge 2, mean and std 0.5, 256*256
    to 4096*4096 pixels)."""
    return Qwen2VLImageProcessor(patch_size=16, merge_size=2, temporal_patch_size=2, image_mean=[0.5, 0.5, 0.5],
                                 image_std=[0.5, 0.5, 0.5], size={"shortest_edge": 65536, "longest_edge": 16777216})


def budget_processor() -> Any:
    """A budget every photo leaves: under 150*150 pixels (shrunk), at least
    120*120 (the tiny ones grown), bilinear."""
    return Qwen2VLImageProcessor(min_pixels=120 * 120, max_pixels=150 * 150, resample=2)


CONFIGS: Dict[str, Any] = {
    # name: (processor, transform, max_size)
    "qwen2-vl": (Qwen2VLImageProcessor, lambda p: "qwen2-vl", None),
    "qwen3-vl": (qwen3_processor, T.from_hf, (1504, 3136)),  # the largest and the strip (its min_pixels)
    "budget": (budget_processor, T.from_hf, (280, 1484)),  # the portrait and the strip
}


def _save(im: Image.Image, path: Path) -> None:
    im.convert("RGB").save(path, "JPEG", quality=90)


@pytest.fixture(scope="module")
def vlm_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An image folder of one class: the committed photos and the extremes."""
    root = tmp_path_factory.mktemp("vlm")
    cls = root / "images"
    cls.mkdir()
    photos = sorted(PHOTOS.glob("*/*.jpg"))
    assert len(photos) >= 20, f"the committed photos are missing under {PHOTOS}"
    for p in photos:
        (cls / f"{p.parent.name}-{p.name}").write_bytes(p.read_bytes())
    src = Image.open(photos[0])
    for name, w, h in EXTREMES:
        _save(src.resize((w, h), Image.BICUBIC), cls / f"x-{name}.jpg")
    return root


@pytest.fixture(scope="module")
def bad_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two images smart_resize refuses or stoker's default bound does not
    take, and one it does."""
    root = tmp_path_factory.mktemp("vlmbad")
    cls = root / "images"
    cls.mkdir()
    src = Image.open(sorted(PHOTOS.glob("*/*.jpg"))[0])
    _save(src.resize((1010, 5), Image.BICUBIC), cls / "aspect202.jpg")  # 202:1
    _save(src.resize((3000, 100), Image.BICUBIC), cls / "long.jpg")  # 2996x112: past qwen2-vl's 1428x1428
    _save(src.resize((300, 200), Image.BICUBIC), cls / "ok.jpg")
    return root


@pytest.fixture(scope="module")
def vlm_server(stoker_bin: Path, vlm_data: Path, bad_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("vlmlog") / "server.log"
    try:
        srv = LocalServer(str(stoker_bin), {"vlm": str(vlm_data), "bad": str(bad_data)}, workers=2, log_path=str(log))
    except RuntimeError as e:
        pytest.fail(str(e))
    with srv:
        yield srv.addr


def decoded(root: Path, path: bytes) -> torch.Tensor:
    return decode_jpeg(read_file(str(root / path.decode())), mode=ImageReadMode.RGB)


def replayed(root: Path, b: Any, keep: Any = lambda step: True, steps: Any = None) -> List[torch.Tensor]:
    """b's images decoded from their files and the steps of each one's
    trace that keep(step) takes (or steps[i], image i's) replayed with
    torchvision's functional ops (a RandomResizedCrop's resized_crop,
    ColorJitter's adjust_*)."""
    import torchvision.transforms.v2.functional as F
    from torchvision.transforms import InterpolationMode

    out = []
    for i, path in enumerate(b.fields["path"]):
        img = decoded(root, path)
        for step, args in (b.trace[i] if steps is None else steps[i]):
            if keep(step):
                kw = dict(args)
                if "interpolation" in kw:
                    kw["interpolation"] = InterpolationMode(kw["interpolation"])
                img = getattr(F, step)(img, **kw)
        out.append(img)
    return out


def processor_resize(proc: Any, img: torch.Tensor) -> torch.Tensor:
    """The processor's own resize (smart_resize, then its torchvision
    resize) of one decoded image: uint8, before rescale and normalize."""
    size = proc.size if isinstance(proc.size, SizeDict) else SizeDict(**proc.size)
    return proc.resize(images=img[None], size=size, resample=proc.resample, factor=proc.patch_size * proc.merge_size)[0]


@pytest.mark.parametrize("transport", ["grpc", "shm"])
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_processor_parity(vlm_server: str, vlm_data: Path, name: str, transport: str) -> None:
    make, tf, bound = CONFIGS[name]
    proc = make()
    n, extremes, exact = 0, set(), True
    with stoker.Loader(vlm_server, "vlm", transform=tf(proc), batch_size=6, fields=("path",), shuffle=False,
                       max_size=bound, pin_memory=False, timeout=120, transport=transport) as ld:
        for b in ld:
            got = b.vision_inputs()
            assert isinstance(b.images, list) and b._padded is None
            assert b._flat.numel() == int((3 * b.sizes[:, 0] * b.sizes[:, 1]).sum()), "ragged: the images' bytes alone"
            imgs: List[torch.Tensor] = [decoded(vlm_data, p) for p in b.fields["path"]]
            want = proc(images=imgs, return_tensors="pt")
            assert torch.equal(got["image_grid_thw"], want["image_grid_thw"]), (b.fields["path"], got["image_grid_thw"])
            assert got["pixel_values"].dtype == torch.float32 and got["pixel_values"].shape == want["pixel_values"].shape
            torch.testing.assert_close(got["pixel_values"], want["pixel_values"], atol=1e-6, rtol=0)
            exact = exact and torch.equal(got["pixel_values"], want["pixel_values"])
            for i, (path, img) in enumerate(zip(b.fields["path"], imgs)):
                h, w = b.sizes[i].tolist()
                where = f"{name} {transport} {path.decode()} {tuple(img.shape[1:])}"
                assert (h, w) == smart_resize(img.shape[1], img.shape[2], proc.patch_size * proc.merge_size,
                                              proc.size["shortest_edge"], proc.size["longest_edge"]), where
                # A ragged batch: each image its own [3, h, w], nothing padded.
                assert tuple(b.images[i].shape) == (3, h, w), where
                assert torch.equal(b.images[i], processor_resize(proc, img)), where
                patches = proc.get_number_of_image_patches(img.shape[1], img.shape[2])
                assert patches == (h // proc.patch_size) * (w // proc.patch_size), where
                if "/x-" in f"/{path.decode()}":
                    extremes.add(path.decode())
                n += 1
        assert not list(ld.sample_errors)
    assert n == len(os.listdir(vlm_data / "images")) and len(extremes) == len(EXTREMES)
    assert exact, "pixel_values within 1e-6 but not bit for bit"


def test_presets_are_the_processors_defaults() -> None:
    """The presets are from_hf of the processors as configured by default
    (Qwen2-VL) and by Qwen3-VL's checkpoints."""
    from stoker._vlm import vlm_preset

    for name, proc in (("qwen2-vl", Qwen2VLImageProcessor()), ("qwen3-vl", qwen3_processor())):
        a, b = vlm_preset(name), T.from_hf(proc)
        assert a.vision == b.vision and T.to_spec(a) == T.to_spec(b), name


def test_from_hf_takes_a_processor_holding_one() -> None:
    """A Qwen2VLProcessor-like object: its image_processor is taken."""

    class Holder:
        image_processor = budget_processor()

    assert T.to_spec(T.from_hf(Holder())) == T.to_spec(T.from_hf(budget_processor()))


@pytest.mark.parametrize("make, fragment", [
    (lambda: transformers.models.qwen2_vl.image_processing_pil_qwen2_vl.Qwen2VLImageProcessorPil(),
     "Qwen2VLImageProcessorPil: not a processor stoker reproduces"),
    (lambda: Qwen2VLImageProcessor(do_resize=False), "do_resize=False"),
    (lambda: Qwen2VLImageProcessor(resample=1), "resample=1"),  # LANCZOS
    (lambda: Qwen2VLImageProcessor(do_convert_rgb=False), "do_convert_rgb=False"),
    (lambda: Qwen2VLImageProcessor(do_rescale=False, do_normalize=False), "neither do_rescale nor do_normalize"),
])
def test_from_hf_refuses_what_differs(make: Any, fragment: str) -> None:
    with pytest.raises(ValueError) as e:
        T.from_hf(make())
    assert fragment in str(e.value), str(e.value)


@pytest.mark.expect_warning(RuntimeWarning, match="could not be made")
def test_refused_samples_fail_alone(vlm_server: str) -> None:
    """An aspect past 200 fails as smart_resize raises; a sample past the
    default bound (a square of twice max_pixels) fails naming it; the
    other comes."""
    with pytest.raises(ValueError):
        smart_resize(5, 1010)
    with stoker.Loader(vlm_server, "bad", transform="qwen2-vl", batch_size=3, fields=("path",), fail_policy="drop",
                       max_sample_errors=1.0, pin_memory=False, timeout=60) as ld:
        got = [p.decode() for b in ld for p in b.fields["path"]]
        errors = {e.name.rsplit("/", 1)[-1]: e.reason for e in ld.sample_errors}
    assert got == ["images/ok.jpg"], got
    assert set(errors) == {"aspect202.jpg", "long.jpg"}, errors
    assert "aspect ratio is 202: want at most 200" in errors["aspect202.jpg"], errors
    assert "2996x112 sample, past the job's bound of 1428x1428" in errors["long.jpg"], errors
    # Under a max_size that holds it, the long one comes.
    with stoker.Loader(vlm_server, "bad", transform="qwen2-vl", batch_size=3, fields=("path",), fail_policy="drop",
                       max_sample_errors=1.0, pin_memory=False, timeout=60, max_size=(196, 2996)) as ld:
        sizes = {p.decode(): tuple(b.sizes[i].tolist()) for b in ld for i, p in enumerate(b.fields["path"])}
    assert sizes == {"images/ok.jpg": (196, 308), "images/long.jpg": (112, 2996)}, sizes


def test_vision_inputs_needs_a_vision_transform(vlm_server: str) -> None:
    with stoker.Loader(vlm_server, "vlm", transform=[T.RandomResizedCrop(56)], batch_size=2, pin_memory=False,
                       timeout=60) as ld:
        b = next(iter(ld))
        with pytest.raises(ValueError, match="vision-language transform"):
            b.vision_inputs()


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("kwargs", [{}, {"do_normalize": False}, {"do_rescale": False}, {"patch_size": 16, "merge_size": 1,
                                                                                          "temporal_patch_size": 1}])
def test_vision_inputs_alone(layout: str, kwargs: Dict[str, Any]) -> None:
    """vision_inputs on a padded uint8 batch of sizes already on the grid
    against the processor with do_resize=False on the same images: its
    rescale only, normalize only, and other patch, merge and temporal
    sizes, in both layouts."""
    from stoker._vlm import vision_inputs

    proc = Qwen2VLImageProcessor(**kwargs)
    v = T.from_hf(Qwen2VLImageProcessor(**kwargs)).vision
    f = proc.patch_size * proc.merge_size
    g = torch.Generator().manual_seed(0)
    sizes = torch.tensor([[2 * f, 3 * f], [5 * f, f], [f, f]], dtype=torch.int64)
    imgs = [torch.randint(0, 256, (3, h, w), generator=g, dtype=torch.uint8) for h, w in sizes.tolist()]
    padded = torch.zeros(len(imgs), 3, 5 * f, 3 * f, dtype=torch.uint8)
    for i, im in enumerate(imgs):
        padded[i, :, :im.shape[1], :im.shape[2]] = im
    if layout == "NHWC":
        padded = padded.permute(0, 2, 3, 1).contiguous()
    got = vision_inputs(padded, sizes, v, layout, device="cpu")
    want = proc(images=imgs, do_resize=False, return_tensors="pt")
    assert torch.equal(got["image_grid_thw"], want["image_grid_thw"])
    assert torch.equal(got["pixel_values"], want["pixel_values"].to(torch.float32)), kwargs


def jitter_processor(name: str) -> Any:
    """test_color_jitter_before_the_processor's processor, its job's
    max_size: the one-view processors', InternVL's tiles and thumbnail
    and OneVision's canvas, base and square (small tiles and patches, as
    test_vlm_internvl.py's and test_vlm_onevision.py's "small")."""
    from transformers.models.siglip2.image_processing_siglip2 import Siglip2ImageProcessor
    from transformers.models.got_ocr2.image_processing_got_ocr2 import GotOcr2ImageProcessor
    from transformers.models.llava_onevision.image_processing_llava_onevision import LlavaOnevisionImageProcessor

    if name == "qwen2-vl":
        return Qwen2VLImageProcessor(), None
    if name == "naflex":
        return Siglip2ImageProcessor(), (512, 3232)
    if name == "internvl":
        return GotOcr2ImageProcessor(crop_to_patches=True, size={"height": 56, "width": 56}, min_patches=2, max_patches=6,
                                     resample=3), (336, 336)
    return LlavaOnevisionImageProcessor(size={"height": 56, "width": 56}, resample=2,
                                        image_grid_pinpoints=[[56, 112], [112, 56], [112, 112], [168, 56], [56, 168]]), None


@pytest.mark.parametrize("name", ["qwen2-vl", "naflex", "internvl", "onevision"])
def test_color_jitter_before_the_processor(vlm_server: str, vlm_data: Path, name: str) -> None:
    """from_hf(proc, before=[ColorJitter(...)]): torchvision's ColorJitter
    on the image at its own size (its factors and order as the batch's
    trace drew them, replayed with torchvision's functional ops), then the
    processor, gives vision_inputs within the jitter kernels' bound (2
    levels, normalized), nearly every value equal, every image of the
    committed photos and the extremes; the sizes and grids exactly. Of a
    processor of several views (InternVL's tiles and thumbnail,
    OneVision's canvas, base and square) every view is of the one jittered
    image: each view's trace starts with the same jitter."""
    proc, bound = jitter_processor(name)
    tf = T.from_hf(proc, before=[T.ColorJitter(brightness=0.4, contrast=0.4, saturation=0.4, hue=0.1)])
    if name == "onevision":  # its squares made for single images too, to hold them to the processor's
        tf.several_images = ()
    # stoker's ColorJitter kernels are within 1 level of torchvision's, hue 2 (docs/transforms.md): as much after normalize.
    atol = 2 / 255 / min(proc.image_std) + 1e-6
    n, kinds = 0, set()
    with stoker.Loader(vlm_server, "vlm", transform=tf, batch_size=6, fields=("path",), shuffle=False, trace=True,
                       max_size=bound, pin_memory=False, timeout=120) as ld:
        for b in ld:
            got = b.vision_inputs()
            if name in ("qwen2-vl", "naflex"):
                jitter = [[step for step in tr if step[0].startswith("adjust_")] for tr in b.trace]
            else:  # a trace a view (trace[v][i]): each view's jitter is view 0's
                assert len(b.trace) == (2 if name == "internvl" else 3), len(b.trace)
                adj = [[[step for step in tr if step[0].startswith("adjust_")] for tr in view] for view in b.trace]
                for i, path in enumerate(b.fields["path"]):
                    assert adj[0][i] and all(a[i] == adj[0][i] for a in adj), f"{path}: {[a[i] for a in adj]}"
                jitter = adj[0]
            imgs = replayed(vlm_data, b, steps=jitter)  # the jitter, before the resize
            kinds.update(step for tr in jitter for step, _ in tr)
            want = proc(images=imgs, return_tensors="pt")
            assert set(got) == set(want.keys()), (set(got), set(want.keys()))
            for k in want.keys():
                tol = atol if k == "pixel_values" else 0
                torch.testing.assert_close(torch.as_tensor(got[k]), torch.as_tensor(want[k]), atol=tol, rtol=0,
                                           msg=lambda m: f"{k} {b.fields['path']}: {m}")
            off = (got["pixel_values"] - want["pixel_values"]).abs() > 1e-6
            assert int(off.sum()) <= off.numel() // 10000, f"{int(off.sum())} of {off.numel()} values off"
            n += len(imgs)
        assert not list(ld.sample_errors)
    assert n == len(os.listdir(vlm_data / "images"))
    assert kinds == {"adjust_brightness", "adjust_contrast", "adjust_saturation", "adjust_hue"}, kinds
    with pytest.raises(ValueError, match="one RandomResizedCrop, first"):  # the photometric ops after it, on the crop
        T.from_hf(proc, before=[T.ColorJitter(brightness=0.4), T.RandomResizedCrop(448)])
    with pytest.raises(ValueError, match="RandomHorizontalFlip"):  # it goes after the processor's resize
        T.from_hf(proc, before=[T.RandomHorizontalFlip()])


#: test_random_resized_crop_before_the_processor's processors (jitter_processor's) and crop sizes.
CROPS = {"qwen2-vl": ("qwen2-vl", 448), "qwen2-vl-256": ("qwen2-vl", 256), "naflex": ("naflex", (200, 300)),
         "internvl": ("internvl", (100, 150)), "onevision": ("onevision", (100, 150))}


@pytest.mark.parametrize("jitter", [False, True])
@pytest.mark.parametrize("name", sorted(CROPS))
def test_random_resized_crop_before_the_processor(vlm_server: str, vlm_data: Path, name: str, jitter: bool) -> None:
    """from_hf(proc, before=[RandomResizedCrop(size, ...), ColorJitter(...)]):
    torchvision's resized_crop (the trace's box replayed with its functional
    op), the jitter, then the processor, gives vision_inputs to 1e-6 without
    the jitter and within the jitter kernels' bound with it: a size
    smart_resize keeps (448: its resize returns the crop as it is) and one
    it changes (256, to 252: two resizes), NaFlex's, and the processors of
    several views (InternVL's tiles and thumbnail, OneVision's canvas, base
    and square), each view of the one crop."""
    proc, bound = jitter_processor(CROPS[name][0])
    size = CROPS[name][1]
    before = [T.RandomResizedCrop(size, scale=(0.3, 1.0), interpolation="bicubic")]
    if jitter:
        before.append(T.ColorJitter(brightness=0.4, contrast=0.4, saturation=0.4, hue=0.1))
    tf = T.from_hf(proc, before=before)
    if name == "onevision":  # its squares made for single images too, to hold them to the processor's
        tf.several_images = ()
    hw = (size, size) if isinstance(size, int) else size
    n = 0
    with stoker.Loader(vlm_server, "vlm", transform=tf, batch_size=6, fields=("path",), shuffle=False, trace=True,
                       max_size=bound, pin_memory=False, timeout=120) as ld:
        for b in ld:
            got = b.vision_inputs()
            keep = lambda step: step[0] == "resized_crop" or step[0].startswith("adjust_")  # noqa: E731
            if name in ("internvl", "onevision"):  # a trace a view (trace[v][i]): each view's crop and jitter view 0's
                steps = [[[st for st in tr if keep(st)] for tr in view] for view in b.trace]
                for i, path in enumerate(b.fields["path"]):
                    assert all(s[i] == steps[0][i] for s in steps), f"{path}: {[s[i] for s in steps]}"
                steps = steps[0]
            else:
                steps = [[st for st in tr if keep(st)] for tr in b.trace]
            assert all(tr and tr[0][0] == "resized_crop" for tr in steps), steps
            imgs = replayed(vlm_data, b, steps=steps)
            assert all(tuple(img.shape[1:]) == hw for img in imgs), b.trace
            want = proc(images=imgs, return_tensors="pt")
            assert set(got) == set(want.keys()), (set(got), set(want.keys()))
            atol = 2 / 255 / min(proc.image_std) + 1e-6 if jitter else 1e-6
            for k in want.keys():
                torch.testing.assert_close(torch.as_tensor(got[k]), torch.as_tensor(want[k]),
                                           atol=atol if k == "pixel_values" else 0, rtol=0,
                                           msg=lambda m: f"{k} {b.fields['path']}: {m}")
            n += len(imgs)
        assert not list(ld.sample_errors)
    assert n == len(os.listdir(vlm_data / "images"))
