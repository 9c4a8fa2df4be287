#!/usr/bin/env python3
"""Today's training recipes on stoker: a few steps of a tiny model on the CPU.

    bin/stoker mkdata --out /tmp/demo --n 2000 --classes 10
    bin/stoker serve --listen 127.0.0.1:7070 --dataset demo=/tmp/demo &
    python examples/recipes.py --target 127.0.0.1:7070 --dataset demo --recipe simclr

Each recipe's augmentation is what its source writes, run by the server:

- tv-resnet50-v2: torchvision's ResNet-50 "v2" training preset
  (references/classification/presets.py, --train-crop-size 176
  --auto-augment ta_wide --random-erase 0.1), its torchvision Compose turned
  into stoker's by from_torchvision; MixUp/CutMix on the trainer's side
  with stoker.gpu (torchvision.transforms.v2's, drawn per sample).
- deit: timm's create_transform for DeiT (rand-m9-mstd0.5-inc1, bicubic,
  RandomErasing 0.25 "pixel"), built from stoker's classes (timm's are not
  torchvision's), with timm's RandAugment as timm_rand_augment; MixUp/CutMix.
- simclr: SimCLR's two views, from_torchvision of its Compose; NT-Xent loss.
- dino: DINO's two global crops and eight local ones (main_dino.py, with
  torchvision's GaussianBlur); a student, an EMA teacher and DINO's loss.
- clip: open_clip's training transform (its convert-to-RGB step left out:
  stoker decodes to RGB); a CLIP-style loss against one learned embedding
  per class name, a stand-in for the text tower.

from_torchvision drops the pipeline's Normalize and keeps its mean and std
on the result: the trainer applies them with stoker.normalize (on the GPU
in a real run). Several views of one image are one Loader with
stoker.transforms.MultiView: the server decodes each image once and makes
every view, and the batch's images are the list of views (DINO's collate
shape).
"""
from __future__ import annotations

import argparse
import json
import math
from typing import Callable, Dict, List, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision.transforms as tv1
from google.protobuf.json_format import MessageToDict
from torchvision.transforms import InterpolationMode
from torchvision.transforms import v2 as tv2

import stoker
from stoker import gpu
from stoker import transforms as T

IMAGENET = (T.IMAGENET_MEAN, T.IMAGENET_STD)
OPENAI = ((0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711))


#: A recipe's views: by name, how many views of which transform.
Views = Dict[str, Tuple[int, T.Compose]]


def tv_resnet50_v2() -> Views:
    """ClassificationPresetTrain(crop_size=176, auto_augment_policy="ta_wide",
    random_erase_prob=0.1, use_v2=True), as torchvision's train.py makes it."""
    tv = tv2.Compose([
        tv2.RandomResizedCrop(176, interpolation=InterpolationMode.BILINEAR, antialias=True),
        tv2.RandomHorizontalFlip(0.5),
        tv2.TrivialAugmentWide(interpolation=InterpolationMode.BILINEAR),
        tv2.PILToTensor(),
        tv2.ToDtype(torch.float, scale=True),
        tv2.Normalize(mean=IMAGENET[0], std=IMAGENET[1]),
        tv2.RandomErasing(p=0.1),  # value 0 after Normalize: the mean colour, in pixels
        tv2.ToPureTensor(),
    ])
    return {"image": (1, T.from_torchvision(tv))}


def deit() -> Views:
    """timm's create_transform(224, is_training=True, auto_augment=
    "rand-m9-mstd0.5-inc1", interpolation="bicubic", re_prob=0.25,
    re_mode="pixel")."""
    c = T.Compose([
        T.RandomResizedCrop(224, interpolation="bicubic"),
        T.RandomHorizontalFlip(),
        T.timm_rand_augment("rand-m9-mstd0.5-inc1", interpolation="bicubic"),  # fill: ImageNet's mean colour
        # "pixel" mode: normal noise per pixel after ImageNet's Normalize.
        T.RandomErasing(p=0.25, scale=(0.02, 1 / 3), ratio=(0.3, 1 / 0.3), value="random"),
    ])
    c.normalize_mean, c.normalize_std = IMAGENET
    return {"image": (1, c)}


def simclr() -> Views:
    """SimCLR's view (s = 1, blur kernel 10% of 224, odd, p = 0.5)."""
    tv = tv1.Compose([
        tv1.RandomResizedCrop(size=224),
        tv1.RandomHorizontalFlip(),
        tv1.RandomApply([tv1.ColorJitter(0.8, 0.8, 0.8, 0.2)], p=0.8),
        tv1.RandomGrayscale(p=0.2),
        tv1.RandomApply([tv1.GaussianBlur(kernel_size=23, sigma=(0.1, 2.0))], p=0.5),
        tv1.ToTensor(),
    ])
    return {"view": (2, T.from_torchvision(tv))}


def dino() -> Views:
    """DataAugmentationDINO (global_crops_scale (0.4, 1), local_crops_scale
    (0.05, 0.4), local_crops_number 8)."""
    flip_and_color_jitter = tv1.Compose([
        tv1.RandomHorizontalFlip(p=0.5),
        tv1.RandomApply([tv1.ColorJitter(brightness=0.4, contrast=0.4, saturation=0.2, hue=0.1)], p=0.8),
        tv1.RandomGrayscale(p=0.2),
    ])
    normalize = tv1.Compose([tv1.ToTensor(), tv1.Normalize(*IMAGENET)])
    bicubic = InterpolationMode.BICUBIC
    return {
        "global1": (1, T.from_torchvision(tv1.Compose([
            tv1.RandomResizedCrop(224, scale=(0.4, 1.0), interpolation=bicubic), flip_and_color_jitter,
            tv1.GaussianBlur(23, sigma=(0.1, 2.0)), normalize]))),
        "global2": (1, T.from_torchvision(tv1.Compose([
            tv1.RandomResizedCrop(224, scale=(0.4, 1.0), interpolation=bicubic), flip_and_color_jitter,
            tv1.RandomApply([tv1.GaussianBlur(23, sigma=(0.1, 2.0))], p=0.1), tv1.RandomSolarize(128, p=0.2),
            normalize]))),
        "local": (8, T.from_torchvision(tv1.Compose([
            tv1.RandomResizedCrop(96, scale=(0.05, 0.4), interpolation=bicubic), flip_and_color_jitter,
            tv1.RandomApply([tv1.GaussianBlur(9, sigma=(0.1, 2.0))], p=0.5), normalize]))),
    }


def _convert_to_rgb(image):
    return image.convert("RGB")


def clip() -> Views:
    """open_clip's image_transform(224, is_train=True) with OpenAI's mean
    and std; from_torchvision refuses its _convert_to_rgb (a function it
    cannot see into), which stoker needs no more than the RGB it decodes."""
    ops = [tv1.RandomResizedCrop(224, scale=(0.9, 1.0), interpolation=InterpolationMode.BICUBIC), _convert_to_rgb,
           tv1.ToTensor(), tv1.Normalize(mean=OPENAI[0], std=OPENAI[1])]
    return {"image": (1, T.from_torchvision(tv1.Compose([t for t in ops if t is not _convert_to_rgb])))}


RECIPES: Dict[str, Callable[[], Views]] = {
    "tv-resnet50-v2": tv_resnet50_v2, "deit": deit, "simclr": simclr, "dino": dino, "clip": clip}


def encoder(dim: int) -> nn.Module:
    """A tiny convnet: any size in, ``dim`` features out."""
    return nn.Sequential(nn.Conv2d(3, 16, 3, stride=2), nn.ReLU(), nn.Conv2d(16, 32, 3, stride=2), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, dim))


def to_float(images: torch.Tensor, view: T.Compose) -> torch.Tensor:
    """The uint8 batch as the recipe's model takes it: its Normalize, or
    [0, 1] where it has none."""
    if view.normalize_mean is None:
        return images.float() / 255
    return stoker.normalize(images, view.normalize_mean, view.normalize_std)


class Supervised(nn.Module):
    """Classification with MixUp or CutMix, chosen and drawn for each
    sample (stoker.gpu; torchvision's v2 draws one for the whole batch),
    keyed by the batch so that a resumed epoch mixes as the first run did;
    label smoothing 0.1 in the soft targets."""

    def __init__(self, classes: int, mixup: float, cutmix: float) -> None:
        super().__init__()
        self.net = encoder(classes)
        self.mix = gpu.RandomChoice([gpu.MixUp(alpha=mixup, num_classes=classes, label_smoothing=0.1),
                                     gpu.CutMix(alpha=cutmix, num_classes=classes, label_smoothing=0.1)])

    def loss(self, views: List[torch.Tensor], labels: torch.Tensor, batch: stoker.Batch) -> torch.Tensor:
        images, soft = self.mix(views[0], labels, batch=batch)
        return F.cross_entropy(self.net(images), soft)


class SimCLR(nn.Module):
    """NT-Xent over two views (temperature 0.5)."""

    def __init__(self) -> None:
        super().__init__()
        self.net = encoder(32)

    def loss(self, views: List[torch.Tensor], labels: torch.Tensor, batch: stoker.Batch) -> torch.Tensor:
        z = F.normalize(self.net(torch.cat(views)), dim=1)
        n = views[0].shape[0]
        sim = (z @ z.T / 0.5).fill_diagonal_(-math.inf)
        target = torch.cat([torch.arange(n, 2 * n), torch.arange(n)])
        return F.cross_entropy(sim, target)


class DINO(nn.Module):
    """A student on every view, an EMA teacher on the global ones, the
    teacher's centred, sharpened output as the student's target."""

    def __init__(self, out: int = 64) -> None:
        super().__init__()
        self.student, self.teacher = encoder(out), encoder(out)
        self.teacher.load_state_dict(self.student.state_dict())
        self.teacher.requires_grad_(False)
        self.register_buffer("center", torch.zeros(out))

    def loss(self, views: List[torch.Tensor], labels: torch.Tensor, batch: stoker.Batch) -> torch.Tensor:
        with torch.no_grad():
            t_out = [self.teacher(v) for v in views[:2]]
            targets = [F.softmax((t - self.center) / 0.04, dim=1) for t in t_out]
            self.center.mul_(0.9).add_(0.1 * torch.cat(t_out).mean(0))
        s_out = [F.log_softmax(self.student(v) / 0.1, dim=1) for v in views]
        terms = [-(t * s).sum(1).mean() for i, t in enumerate(targets) for j, s in enumerate(s_out) if i != j]
        return sum(terms) / len(terms)

    @torch.no_grad()
    def after_step(self) -> None:
        for t, s in zip(self.teacher.parameters(), self.student.parameters()):
            t.mul_(0.996).add_(0.004 * s)


class CLIPish(nn.Module):
    """Image embeddings against one learned embedding per class name."""

    def __init__(self, classes: int, dim: int = 32) -> None:
        super().__init__()
        self.image, self.text = encoder(dim), nn.Embedding(classes, dim)
        self.logit_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07)))

    def loss(self, views: List[torch.Tensor], labels: torch.Tensor, batch: stoker.Batch) -> torch.Tensor:
        img = F.normalize(self.image(views[0]), dim=1)
        txt = F.normalize(self.text.weight, dim=1)
        return F.cross_entropy(self.logit_scale.exp() * img @ txt.T, labels)


def model_for(recipe: str, classes: int) -> nn.Module:
    if recipe == "tv-resnet50-v2":
        return Supervised(classes, mixup=0.2, cutmix=1.0)
    if recipe == "deit":
        return Supervised(classes, mixup=0.8, cutmix=1.0)
    return {"simclr": SimCLR, "dino": DINO}[recipe]() if recipe != "clip" else CLIPish(classes)


def train(a: argparse.Namespace) -> Tuple[List[float], Views]:
    views = RECIPES[a.recipe]()
    # Each view's Compose, in the order of the batch's images.
    per_view = [view for count, view in views.values() for _ in range(count)]
    transform = (T.MultiView([(name, count, view) for name, (count, view) in views.items()])
                 if len(per_view) > 1 else per_view[0])
    loader = stoker.Loader(a.target, a.dataset, transform=transform, batch_size=a.batch_size, seed=a.seed,
                           pin_memory=False)
    classes = max(len(next(d for d in stoker.list_datasets(a.target) if d.name == a.dataset).classes), 2)
    torch.manual_seed(0)
    model = model_for(a.recipe, classes)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    losses: List[float] = []
    try:
        while len(losses) < a.steps:
            for batch in loader:  # batch.images: one tensor, or the list of views
                images, labels = batch.images, batch.labels
                images = images if isinstance(images, list) else [images]
                xs = [to_float(im, view) for im, view in zip(images, per_view)]
                loss = model.loss(xs, labels, batch)
                opt.zero_grad()
                loss.backward()
                opt.step()
                if hasattr(model, "after_step"):
                    model.after_step()
                losses.append(loss.item())
                print(f"{a.recipe} step {len(losses)}: loss {losses[-1]:.4f}", flush=True)
                if len(losses) == a.steps:
                    break
    finally:
        loader.close()
    return losses, views


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default="127.0.0.1:7070")
    ap.add_argument("--dataset", default="demo")
    ap.add_argument("--recipe", choices=sorted(RECIPES), required=True)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--report", help="write the losses and each view's ops (the wire's, as JSON) here")
    a = ap.parse_args()
    losses, views = train(a)
    if a.report:
        report: Dict[str, object] = {"recipe": a.recipe, "losses": losses, "views": {
            name: {"count": count, "ops": [MessageToDict(op) for op in T.to_spec(view).ops],
                   "normalize": None if view.normalize_mean is None else [view.normalize_mean, view.normalize_std]}
            for name, (count, view) in views.items()}}
        with open(a.report, "w") as f:
            json.dump(report, f)


if __name__ == "__main__":
    main()
