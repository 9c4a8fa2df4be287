"""ultralytics' own trainers, their training batches made by stoker.

::

    from ultralytics import YOLO
    from stoker.ultralytics import DetectionTrainer

    YOLO("yolov8n.yaml").train(data="data.yaml", trainer=DetectionTrainer, epochs=100)

:class:`DetectionTrainer`, :class:`SegmentationTrainer` and
:class:`PoseTrainer` are ultralytics' (8.4.190, the version stoker's YOLO ops
are held to) with one thing changed: the training loader. Each epoch's
batches come from a stoker job whose ops are ``v8_transforms`` as the
trainer's own hyper-parameters make it (``imgsz``, ``mosaic``,
``copy_paste`` and ``copy_paste_mode``, ``degrees``, ``translate``,
``scale``, ``shear``, ``perspective``, ``mixup``, ``cutmix``,
``hsv_h``/``hsv_s``/``hsv_v``, ``flipud``, ``fliplr``, the data YAML's
``flip_idx``); at ``close_mosaic`` the job is reopened with ultralytics'
``close_mosaic`` changes (no mosaic, copy-paste, mixup or cutmix).
``multi_scale`` stays the trainer's (its ``preprocess_batch`` resizes the
batch), as do the model, loss, optimizer, validation (its own val loader
and validator, untouched), checkpoints and callbacks. The batch is the dict
ultralytics' collate gives its loss: ``img`` uint8, ``batch_idx``, ``cls``,
``bboxes`` (normalized xywh), ``masks`` (the overlap mask at
``mask_ratio``) and ``sem_masks`` for segmentation, ``keypoints``
(normalized, visibility third) for pose.

The server: ``STOKER_SERVER`` (``host:port``) and ``STOKER_DATASET`` (the
name it serves the YOLO set as, with ``--annotations NAME=data.yaml``) in
the environment, or the class attributes :attr:`DetectionTrainer.stoker_server`
and :attr:`DetectionTrainer.stoker_dataset` of a subclass; neither: the local
default, a ``stoker serve`` of the data YAML on this host
(``stoker.Loader("data.yaml")``).

What cannot be mapped is refused at the trainer's start with a ValueError
naming it: ``rect`` training, ``fraction`` below 1, ``single_cls``,
``classes``, ``bgr``, Albumentations ``augmentations``, a non-square
``imgsz``, a mixup or cutmix beside a mosaic probability below 1, a
copy-paste beside one (stoker's ops refuse those orders), copy-paste on a
detection or pose task (it pastes segments).
"""

from __future__ import annotations

import os
from copy import copy
from typing import Any, Dict, Iterator, List, Optional

import torch

from ultralytics.models.yolo.detect import DetectionTrainer as _DetectionTrainer
from ultralytics.models.yolo.pose import PoseTrainer as _PoseTrainer
from ultralytics.models.yolo.segment import SegmentationTrainer as _SegmentationTrainer

import stoker
from stoker import transforms as T

__all__ = ["DetectionTrainer", "SegmentationTrainer", "PoseTrainer", "yolo_transform"]


def _float(args: Any, name: str) -> float:
    v = getattr(args, name, 0.0)
    try:
        return float(v or 0.0)
    except (TypeError, ValueError):
        raise ValueError(f"stoker.ultralytics: {name}={v!r}: want a number") from None


def refuse_unmapped(args: Any, task: str) -> None:
    """ValueError naming the first hyper-parameter of ``args`` stoker's
    training loader cannot honour."""
    if getattr(args, "rect", False):
        raise ValueError("stoker.ultralytics: rect=True: rectangular training batches are not served; train square")
    fraction = getattr(args, "fraction", 1.0)
    if fraction not in (1, 1.0, None):
        raise ValueError(f"stoker.ultralytics: fraction={fraction!r}: a subset of the training set is not served")
    if getattr(args, "single_cls", False):
        raise ValueError("stoker.ultralytics: single_cls=True: the labels are served as the data YAML's classes")
    if getattr(args, "classes", None) is not None:
        raise ValueError(f"stoker.ultralytics: classes={args.classes!r}: filtering classes is not served")
    if _float(args, "bgr") > 0:
        raise ValueError(f"stoker.ultralytics: bgr={args.bgr}: the RGB-BGR channel swap has no stoker op")
    if getattr(args, "augmentations", None):
        raise ValueError("stoker.ultralytics: augmentations: Albumentations transforms run in Python, not in stoker")
    imgsz = getattr(args, "imgsz", 640)
    if not isinstance(imgsz, int):
        raise ValueError(f"stoker.ultralytics: imgsz={imgsz!r}: training wants one int (square), as ultralytics'")
    mosaic = _float(args, "mosaic")
    for name in ("mixup", "cutmix"):
        if _float(args, name) > 0 and mosaic < 1:
            raise ValueError(f"stoker.ultralytics: {name}={getattr(args, name)} with mosaic={mosaic}: stoker's "
                             f"YOLO{'MixUp' if name == 'mixup' else 'CutMix'} wants the mosaic's p=1")
    if _float(args, "copy_paste") > 0:
        if task not in ("segment",):
            raise ValueError(f"stoker.ultralytics: copy_paste={args.copy_paste} on a {task} task: CopyPaste pastes "
                             "segments (ultralytics leaves such samples untouched, silently)")
        mode = getattr(args, "copy_paste_mode", "flip")
        if mode not in ("flip", "mixup"):
            raise ValueError(f"stoker.ultralytics: copy_paste_mode={mode!r}: want 'flip' or 'mixup'")
        if mode == "flip" and mosaic < 1:
            raise ValueError(f"stoker.ultralytics: copy_paste={args.copy_paste} (mode 'flip') with mosaic={mosaic}: "
                             "stoker's YOLOCopyPaste stands right after a mosaic of p=1")


def yolo_transform(args: Any, flip_idx: Optional[List[int]] = None) -> T.Compose:
    """ultralytics 8.4.190's ``v8_transforms(dataset, imgsz, hyp)`` as
    stoker's ops, from the trainer's ``args`` (its ``hyp``)."""
    imgsz = int(args.imgsz)
    mosaic, copy_paste = _float(args, "mosaic"), _float(args, "copy_paste")
    mode = getattr(args, "copy_paste_mode", "flip")
    ops: List[Any] = [T.YOLOMosaic(imgsz, p=mosaic)]
    if copy_paste > 0 and mode == "flip":
        ops.append(T.YOLOCopyPaste(copy_paste))
    ops.append(T.YOLORandomPerspective(degrees=_float(args, "degrees"), translate=_float(args, "translate"),
                                       scale=_float(args, "scale"), shear=_float(args, "shear"),
                                       perspective=_float(args, "perspective"), size=imgsz))
    if copy_paste > 0 and mode == "mixup":
        ops.append(T.YOLOCopyPaste(copy_paste, mode="mixup"))
    if _float(args, "mixup") > 0:
        ops.append(T.YOLOMixUp(_float(args, "mixup")))
    if _float(args, "cutmix") > 0:
        ops.append(T.YOLOCutMix(_float(args, "cutmix")))
    ops.append(T.YOLORandomHSV(_float(args, "hsv_h"), _float(args, "hsv_s"), _float(args, "hsv_v")))
    # As v8_transforms: vertical first, then horizontal; ops of p=0 draw and
    # never apply, so they are left out.
    if _float(args, "flipud") > 0:
        ops.append(T.YOLORandomFlip(p=_float(args, "flipud"), direction="vertical", flip_idx=flip_idx))
    if _float(args, "fliplr") > 0:
        ops.append(T.YOLORandomFlip(p=_float(args, "fliplr"), direction="horizontal", flip_idx=flip_idx))
    return T.Compose(ops)


def closed_mosaic(args: Any) -> Any:
    """ultralytics' ``YOLODataset.close_mosaic(hyp)``: the same changes."""
    hyp = copy(args)
    hyp.mosaic = hyp.copy_paste = hyp.mixup = hyp.cutmix = 0.0
    return hyp


class _Sampler:
    """What ultralytics reads of ``train_loader.sampler``: its length and
    ``set_epoch`` (DDP)."""

    def __init__(self, loader: "YOLOLoader") -> None:
        self._loader = loader

    def __len__(self) -> int:
        return self._loader.samples

    def set_epoch(self, epoch: int) -> None:
        self._loader.epoch = epoch


class YOLOLoader:
    """The training loader a stoker trainer hands ultralytics: stoker jobs
    whose batches it turns into ultralytics' batch dicts. ``dataset`` is
    ultralytics' own YOLODataset of the same images (its labels and length,
    which the trainer reads; its images are never loaded from it)."""

    num_workers = 0
    drop_last = False

    def __init__(self, trainer: Any, dataset: Any, batch_size: int, rank: int) -> None:
        self.trainer, self.dataset, self.batch_size, self.rank = trainer, dataset, batch_size, rank
        self.task = trainer.args.task
        self.hyp = trainer.args
        self.flip_idx = list(trainer.data.get("flip_idx") or []) or None
        self.epoch = 0
        self.samples = len(dataset)
        self.sampler = _Sampler(self)
        #: (epoch, the job's transform) for each epoch served: what the job ran.
        self.jobs: List[tuple] = []
        #: With the trainer's ``stoker_trace``: per epoch, how many samples'
        #: traces begin with each op (``yolo_mosaic``, ``yolo_load_image``).
        self.first_ops: Dict[int, Dict[str, int]] = {}
        self.batches_served = 0
        self._loader: Optional[stoker.Loader] = None
        self._built_for: Any = None

    # -- the stoker job ---------------------------------------------------
    def _targets(self) -> tuple:
        if self.task == "segment":
            return ("boxes", "labels", "overlap_mask", "sem_masks")
        if self.task == "pose":
            return ("boxes", "labels", "keypoints", "keypoints_visibility")
        return ("boxes", "labels")

    def _open(self) -> stoker.Loader:
        if self._loader is not None and self._built_for is self.hyp:
            return self._loader
        self.close()
        hyp = self.hyp
        flip_idx = self.flip_idx
        if self.task == "pose" and flip_idx is None:
            # As v8_transforms: the flips need flip_idx for keypoints.
            hyp = copy(hyp)
            hyp.fliplr = hyp.flipud = 0.0
        tf = yolo_transform(hyp, flip_idx)
        server = os.environ.get("STOKER_SERVER") or getattr(self.trainer, "stoker_server", None)
        name = os.environ.get("STOKER_DATASET") or getattr(self.trainer, "stoker_dataset", None)
        world = int(os.environ.get("WORLD_SIZE", "1"))
        kw: Dict[str, Any] = dict(transform=tf, targets=self._targets(), batch_size=self.batch_size,
                                  seed=int(getattr(self.hyp, "seed", 0) or 0), drop_last=False,
                                  rank=max(self.rank, 0) if world > 1 else 0, world_size=world,
                                  return_indices=True, trace=bool(getattr(self.trainer, "stoker_trace", False)))
        if self.task == "segment":
            kw["mask_ratio"] = int(getattr(self.hyp, "mask_ratio", 4))
            if not getattr(self.hyp, "overlap_mask", True):
                raise ValueError("stoker.ultralytics: overlap_mask=False: per-instance masks at mask_ratio are not "
                                 "served; ultralytics' default overlap mask is")
        if server:
            if not name:
                raise ValueError("stoker.ultralytics: STOKER_SERVER is set and STOKER_DATASET is not: name the "
                                 "dataset the server serves the YOLO set as (--annotations NAME=data.yaml)")
            self._loader = stoker.Loader(server, name, **kw)
        else:
            self._loader = stoker.Loader(str(self.trainer.data["yaml_file"]), **kw)
        self._built_for = self.hyp
        self._tf = tf
        return self._loader

    def close_mosaic(self, hyp: Any) -> None:
        """The trainer's ``close_mosaic``: the next epoch's job without the
        mosaic, copy-paste, mixup and cutmix."""
        self.hyp = closed_mosaic(hyp)

    def reset(self) -> None:
        """ultralytics calls it after close_mosaic: the job is reopened at
        the next iteration."""

    def close(self) -> None:
        if self._loader is not None:
            self._loader.close()
            self._loader = None

    def __len__(self) -> int:
        return len(self._open())

    def __iter__(self) -> Iterator[Dict[str, Any]]:
        # A generator: nothing runs until the first next(), so that a
        # close_mosaic between ultralytics' enumerate() and its first batch
        # still changes this epoch's job.
        ld = self._open()
        epoch = self.epoch if getattr(self.trainer, "world_size", 1) > 1 else getattr(self.trainer, "epoch", self.epoch)
        ld.set_epoch(int(epoch))
        self.jobs.append((int(epoch), repr(self._tf)))
        files = getattr(self.dataset, "im_files", None)
        for batch in ld:
            images, targets, indices = batch[0], batch[1], batch[2]
            if batch.trace is not None:
                counts = self.first_ops.setdefault(int(epoch), {})
                for steps in batch.trace:
                    first = steps[0][0] if steps else ""
                    counts[first] = counts.get(first, 0) + 1
            self.batches_served += 1
            yield to_yolo_batch(images, targets, indices, self.task, files)

    def __del__(self) -> None:  # pragma: no cover - best effort at interpreter exit
        try:
            self.close()
        except Exception:
            pass


def to_yolo_batch(images: torch.Tensor, targets: List[Dict[str, Any]], indices: torch.Tensor, task: str,
                  files: Optional[List[str]] = None) -> Dict[str, Any]:
    """stoker's (images, targets) as ultralytics' collate_fn gives them to
    its loss: boxes XYXY in pixels to normalized xywh, labels to float
    ``cls [N, 1]``, each instance's image in ``batch_idx``."""
    b, _, h, w = images.shape
    scale = torch.tensor([w, h, w, h], dtype=torch.float32)
    idx, cls, boxes, kpts, masks, sem = [], [], [], [], [], []
    for i, t in enumerate(targets):
        xyxy = t["boxes"].as_subclass(torch.Tensor).float().reshape(-1, 4)
        xywh = torch.stack([(xyxy[:, 0] + xyxy[:, 2]) / 2, (xyxy[:, 1] + xyxy[:, 3]) / 2,
                            xyxy[:, 2] - xyxy[:, 0], xyxy[:, 3] - xyxy[:, 1]], 1) / scale
        boxes.append(xywh)
        cls.append(t["labels"].float().reshape(-1, 1))
        idx.append(torch.full((xywh.shape[0],), float(i)))
        if task == "pose":
            kp = t["keypoints"].as_subclass(torch.Tensor).float()
            vis = t["keypoints_visibility"].float()
            kpts.append(torch.cat([kp / torch.tensor([w, h], dtype=torch.float32), vis[..., None]], -1))
        if task == "segment":
            masks.append(t["overlap_mask"][None])
            sem.append(t["sem_masks"])
    out: Dict[str, Any] = {
        "img": images,
        "batch_idx": torch.cat(idx) if idx else torch.zeros(0),
        "cls": torch.cat(cls) if cls else torch.zeros(0, 1),
        "bboxes": torch.cat(boxes) if boxes else torch.zeros(0, 4),
        "im_file": [files[int(i)] if files else str(int(i)) for i in indices],
        "ori_shape": [(h, w)] * b,
        "resized_shape": [(h, w)] * b,
    }
    if task == "pose":
        out["keypoints"] = torch.cat(kpts)
    if task == "segment":
        out["masks"] = torch.cat(masks)
        out["sem_masks"] = torch.stack(sem).float()
    return out


class _StokerTrainer:
    """The part the three trainers share: the training loader from stoker,
    ultralytics' own for validation."""

    #: The stoker server (``host:port``) and the dataset name it serves the
    #: YOLO set as; None: ``STOKER_SERVER`` / ``STOKER_DATASET``, else a
    #: local server of the data YAML.
    stoker_server: Optional[str] = None
    stoker_dataset: Optional[str] = None

    def get_dataloader(self, dataset_path: str, batch_size: int = 16, rank: int = 0, mode: str = "train"):
        if mode != "train":
            return super().get_dataloader(dataset_path, batch_size, rank, mode)  # type: ignore[misc]
        refuse_unmapped(self.args, self.args.task)  # type: ignore[attr-defined]
        ds = self.build_dataset(dataset_path, mode, batch_size)  # type: ignore[attr-defined]
        if not getattr(self, "_stoker_close_registered", False):
            # The job (and a local server no other loader uses) ends with the training.
            self.add_callback("on_train_end", lambda trainer: trainer.train_loader.close())  # type: ignore[attr-defined]
            self._stoker_close_registered = True
        return YOLOLoader(self, ds, batch_size, rank)

    def _close_dataloader_mosaic(self) -> None:
        from ultralytics.utils import LOGGER

        LOGGER.info("Closing dataloader mosaic: the stoker job reopens without mosaic, copy_paste, mixup, cutmix")
        self.train_loader.close_mosaic(copy(self.args))  # type: ignore[attr-defined]


class DetectionTrainer(_StokerTrainer, _DetectionTrainer):
    """ultralytics' DetectionTrainer, its training batches from stoker."""


class SegmentationTrainer(_StokerTrainer, _SegmentationTrainer):
    """ultralytics' SegmentationTrainer, its training batches from stoker."""


class PoseTrainer(_StokerTrainer, _PoseTrainer):
    """ultralytics' PoseTrainer, its training batches from stoker."""
