"""stoker.Batch: what a Loader yields. It unpacks as before
(``images, labels`` or, with ``return_indices=True``, ``images, labels,
indices``) and carries what else the server said of the batch."""

from __future__ import annotations

import json
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

__all__ = ["Batch", "parse_trace", "fields_of"]

#: One sample's trace: (functional op name, {argument: value}) pairs, in the
#: order applied, geometry first.
SampleTrace = List[Tuple[str, Dict[str, Any]]]


def parse_trace(text: str) -> SampleTrace:
    """Parses one sample's trace (the server's JSON: a list of ``[name,
    {args}]`` pairs) into ``(name, args)`` tuples. Lists stay lists
    (``size``, ``fill``...), as torchvision's functional ops take them."""
    return [(str(name), dict(args)) for name, args in json.loads(text)]


def torch_bool(keep: Sequence[bool]) -> Any:
    """keep as a bool tensor, to index a batch's tensors by."""
    import torch

    return torch.tensor(keep, dtype=torch.bool)


def fields_of(header: Any, names: Sequence[str]) -> Dict[str, List[Optional[bytes]]]:
    """A BatchHeader's fields as ``Batch.fields``: each field asked for
    (``names``), a value per sample in batch order, None where a sample
    has none. A header that lacks a field, or says otherwise, is the
    server's error (StokerError("INTERNAL"))."""
    from stoker._errors import StokerError

    got = header.fields
    if not names and not got:
        return {}
    n = int(header.shape[0]) if len(header.shape) else 0
    if len(got) != len(names):
        raise StokerError("INTERNAL", f"batch {header.number} has {len(got)} fields; the job asked for {len(names)}")
    out: Dict[str, List[Optional[bytes]]] = {}
    for name, fv in zip(names, got):
        values: List[Optional[bytes]] = list(fv.values)
        if fv.name != name or len(values) != n:
            raise StokerError("INTERNAL", f"batch {header.number}: field {fv.name[:64]!r} with {len(values)} values; "
                              f"the job asked for {name!r} of {n} samples")
        prev = -1
        for m in fv.missing:
            if m <= prev or m >= n or values[m]:
                raise StokerError("INTERNAL", f"batch {header.number}: field {name!r} lists sample {m} without it")
            values[m] = None
            prev = m
        out[name] = values
    return out


class Batch(tuple):
    """A batch: a tuple ``(images, labels)``, or ``(images, labels,
    indices)`` with ``return_indices=True``, so ``for images, labels in
    loader`` works as it always did, with attributes:

    - ``images``: uint8 ``[B, 3, H, W]`` (``[B, H, W, 3]`` for NHWC), or
      float32 after a Normalize in the transform; with several views
      (:class:`stoker.transforms.MultiView`, the presets ``simclr``,
      ``dino``, ``dinov2``), a list of one such tensor per view, in order
      (DINO's collate shape);
    - ``views``: the named views' tensors by their group's name (a list
      each); empty for one view;
    - ``labels``: int64 ``[B]``;
    - ``indices``: int64 ``[B]``, the samples' dataset indices (always, even
      without ``return_indices``);
    - ``trace``: with ``Loader(trace=True)``, per sample, what its ops drew:
      a list of ``(op, args)`` in torchvision.transforms.v2.functional's
      names and arguments, geometry first, e.g. ``[("resized_crop", {"top":
      10, "left": 4, "height": 180, "width": 200, "size": [224, 224],
      "interpolation": "bilinear", "antialias": True}), ("horizontal_flip",
      {})]``, so that ``getattr(F, op)(img, **args)`` replays it; with
      several views, per view as ``images`` is (``trace[v][i]``); ``None``
      without;
    - ``decode``: with ``Loader(trace=True)``, how the server decoded the
      batch's JPEGs before the traced geometry: ``"exact"`` (full scale,
      as torchvision's ``decode_jpeg``: the trace replays to its pixels)
      or ``"fast"`` (a DCT scale where the crop allowed); ``None``
      without traces;
    - ``fields``: with ``Loader(fields=...)``, each field's values by
      name, one per sample in batch order: ``bytes`` as the dataset holds
      them (a caption is not decoded: ``.decode()`` it), None where a
      sample has none (``{}`` without);
    - ``targets``: with ``Loader(targets=True)``, per sample, its boxes
      and labels moved through its geometry as torchvision.transforms.v2
      moves them: a dict of ``"boxes"`` (``tv_tensors.BoundingBoxes``
      ``[K, 4]``, XYXY or a last ``ConvertBoundingBoxFormat``'s format,
      ``canvas_size`` the output's ``(H, W)``),
      ``"labels"`` (int64 ``[K]``), ``"iscrowd"`` (int64 ``[K]``) and
      ``"image_id"`` (and the keypoints where the dataset has them); with
      ``Loader(targets=(names...))`` exactly those keys, ``"masks"``
      (``tv_tensors.Mask`` ``[K, H, W]`` uint8) or ``"overlap_mask"``
      (ultralytics' ``[H // 4, W // 4]`` index map) among them when asked;
      the batch then unpacks as ``(images, targets[,
      indices])`` (``labels`` is still the dataset's labels); ``None``
      without;
    - ``sizes``: of a job whose samples have their own sizes (a
      ``RandomShortestSize`` with a ``max_size`` and no crop after it), int64
      ``[B, 2]``, each sample's ``(height, width)``: ``images`` is then
      padded to the batch's largest height and width, each sample at the
      top left and zeros on its right and bottom (DETR's
      ``nested_tensor_from_tensor_list``), or, with
      ``Loader(image_list=True)`` (and for the vision-language
      transforms), a list of each sample's own ``[3, h, w]``: the server
      sends them back to back, unpadded (a ragged batch), and each is a
      view of the batch's buffer; ``None`` otherwise;
    - ``source_sizes``: with ``sizes``, int64 ``[B, 2]``, each sample's
      image's ``(height, width)`` as decoded, before the transform
      (LLaVA-OneVision's ``image_sizes``, DETR's ``orig_size``; after a
      ``RandomResizedCrop`` before a processor, ``from_hf(proc,
      before=[...])``, the crop's size, the image the processor sees);
      ``None`` otherwise;
    - ``records``: of a dataset of records of several images (a
      conversation file whose records name several), int64 ``[B]``, each
      image's record: a record's images are consecutive and in its order,
      and -1 marks the images of a record one of whose images failed
      (``vision_inputs`` leaves them out, ``record_fields`` its text);
      ``None`` where every sample is a record of its own;
    - ``mask``: with ``sizes``, bool ``[B, H, W]``, True on the padding
      (DETR's ``NestedTensor`` mask), made when first read; ``None``
      otherwise;
    - ``epoch`` and ``number``: which batch of which epoch it is.

    Built from a plain sequence (as some frameworks rebuild a batch after
    moving it to a device), the attributes follow the items.
    """

    images: Any
    labels: Any
    indices: Any
    views: Dict[str, List[Any]]
    fields: Dict[str, List[Optional[bytes]]]
    epoch: Optional[int]
    number: Optional[int]
    decode: Optional[str]

    def __new__(cls, items: Iterable[Any] = (), *, indices: Any = None, traces: Optional[Sequence[str]] = None,
                fields: Optional[Dict[str, List[Optional[bytes]]]] = None, epoch: Optional[int] = None,
                number: Optional[int] = None, views: Optional[Dict[str, List[Any]]] = None,
                decode: Optional[str] = None) -> "Batch":
        self = super().__new__(cls, items)
        self.images = self[0] if len(self) > 0 else None
        self.labels = self[1] if len(self) > 1 else None
        self.indices = indices if indices is not None else (self[2] if len(self) > 2 else None)
        self._traces = list(traces) if traces is not None else None
        self._trace: Optional[List[SampleTrace]] = None
        self.fields = fields if fields is not None else {}
        self.views = views if views is not None else {}
        self._multi = views is not None
        self.epoch, self.number = epoch, number
        self.decode = decode
        self.targets: Optional[List[Dict[str, Any]]] = None
        self.sizes: Any = None
        self.source_sizes: Any = None
        self.records: Any = None
        self._padded: Any = None
        self._flat: Any = None  # a ragged batch's buffer (its images are views of it)
        self._layout = "NCHW"
        self._mask: Any = None
        self._vision: Any = None
        return self

    def vision_inputs(self, device: Any = None) -> Dict[str, Any]:
        """Of a vision-language transform (:func:`stoker.transforms.from_hf`,
        the presets ``"qwen2-vl"``, ``"qwen3-vl"``, ``"siglip2-naflex"``,
        ``"internvl"``, ``"llava-onevision"``), what its processor gives for the batch's images,
        made on ``device`` (``"cuda"``: only the uint8 batch crosses to it):
        Qwen's ``{"pixel_values": float32 [sum of patches, C * T * P * P],
        "image_grid_thw": int64 [N, 3]}``, NaFlex's ``pixel_values``,
        ``pixel_attention_mask`` and ``spatial_shapes``, InternVL's
        ``{"pixel_values": float32 [sum of tiles, 3, 448, 448],
        "num_patches": int64 [N]}``, LLaVA-OneVision's ``pixel_values``,
        ``image_sizes`` and ``batch_num_images``; the images in batch order
        (docs/vlm.md)."""
        from stoker._vlm import (AnyResVision, InternVision, NaFlexVision, QwenVision, anyres_inputs, internvl_inputs,
                                 naflex_inputs, vision_inputs)

        if self._vision is None:
            raise ValueError("vision_inputs needs a batch of a vision-language transform "
                             "(stoker.transforms.from_hf(processor), or transform=\"qwen2-vl\", \"qwen3-vl\", \"siglip2-naflex\", \"internvl\" or \"llava-onevision\")")
        if self.sizes is None and isinstance(self._vision, QwenVision) and not isinstance(self.images, list):
            import torch  # every image one size (a RandomResizedCrop before the processor): that size each

            hw = self.images.shape[2:4] if self._layout == "NCHW" else self.images.shape[1:3]
            self.sizes = torch.tensor([list(hw)] * int(self.images.shape[0]), dtype=torch.long)
        if self.sizes is None:
            raise ValueError("vision_inputs needs the samples' sizes: the transform is not a SmartResize")
        keep = None if self.records is None else (self.records >= 0).tolist()
        if isinstance(self.sizes, list):  # several ragged views (InternVL's canvas and thumbnail): view after view
            flat = self._flat if device is None else self._flat.to(device, non_blocking=True)
            views, off = [], 0
            for sz in self.sizes:
                ims = []
                for h, w in sz.tolist():
                    n = 3 * h * w
                    x = flat[off:off + n]
                    ims.append(x.view(3, h, w) if self._layout == "NCHW" else x.view(h, w, 3).permute(2, 0, 1))
                    off += n
                views.append(ims)
            sizes, source = self.sizes, self.source_sizes
            if keep is not None and not all(keep):  # a record not whole: its images left out
                views = [[x for x, k in zip(ims, keep) if k] for ims in views]
                sizes = [sz[torch_bool(keep)] for sz in sizes]
                source = source[torch_bool(keep)] if source is not None else None
            if isinstance(self._vision, AnyResVision):
                return anyres_inputs(views, sizes, source, self._vision, self.images_per_record)
            return internvl_inputs(views, sizes, self._vision)
        if self._flat is not None:  # ragged: the buffer crosses once, the images are views of it there
            flat = self._flat if device is None else self._flat.to(device, non_blocking=True)
            images, off = [], 0
            for h, w in self.sizes.tolist():
                n = 3 * h * w
                x = flat[off:off + n]
                images.append(x.view(3, h, w) if self._layout == "NCHW" else x.view(h, w, 3).permute(2, 0, 1))
                off += n
            sizes = self.sizes
            if keep is not None and not all(keep):  # a record not whole: its images left out
                images, sizes = [x for x, k in zip(images, keep) if k], sizes[torch_bool(keep)]
            if isinstance(self._vision, NaFlexVision):
                return naflex_inputs(images, sizes, self._vision)
            if isinstance(self._vision, InternVision):  # use_thumbnail=False: the canvases alone
                return internvl_inputs([images], [sizes], self._vision)
            return vision_inputs(images, sizes, self._vision, "NCHW", None)
        images = self._padded if self._padded is not None else self.images
        sizes = self.sizes
        if keep is not None and not all(keep):
            images, sizes = images[torch_bool(keep)], sizes[torch_bool(keep)]
        return vision_inputs(images, sizes, self._vision, self._layout, device)

    @property
    def images_per_record(self) -> Any:
        """Of a dataset of records of several images (``records``), int64
        ``[R]``: how many images each record whole in the batch has, in
        batch order (the records marked -1 left out): LLaVA-OneVision's
        ``batch_num_images``; ``None`` without records."""
        if self.records is None:
            return None
        import torch

        counts, prev = [], None
        for r in self.records.tolist():
            if r < 0:
                prev = None
                continue
            if r == prev:
                counts[-1] += 1
            else:
                counts.append(1)
            prev = r
        return torch.tensor(counts, dtype=torch.long)

    def record_fields(self, name: str) -> List[Optional[bytes]]:
        """Field ``name``'s value (``Loader(fields=...)``) per record whole
        in the batch, in batch order: its first image's (``"json"``: the
        conversation); per sample (``fields[name]``) where every sample is
        a record of its own."""
        values = self.fields[name]
        if self.records is None:
            return list(values)
        out, prev = [], None
        for i, r in enumerate(self.records.tolist()):
            if r >= 0 and r != prev:
                out.append(values[i])
            prev = r if r >= 0 else None
        return out

    @property
    def mask(self) -> Any:
        """With per-sample sizes, bool ``[B, H, W]``: True on each sample's
        padding (DETR's NestedTensor mask); ``None`` without."""
        if self._mask is None and self.sizes is not None and self._padded is not None:
            import torch

            hw = self._padded.shape[2:4] if self._layout == "NCHW" else self._padded.shape[1:3]
            ys = torch.arange(int(hw[0]))[None, :, None]
            xs = torch.arange(int(hw[1]))[None, None, :]
            self._mask = (ys >= self.sizes[:, 0, None, None]) | (xs >= self.sizes[:, 1, None, None])
        return self._mask

    @property
    def trace(self) -> Optional[List[SampleTrace]]:
        """Per sample, the ops it went through with their drawn arguments
        (``Loader(trace=True)``); ``None`` when not asked for."""
        if self._trace is None and self._traces is not None:
            if self._multi:  # each sample's a list of its views': view-major, as images
                per = [json.loads(t) for t in self._traces]
                nviews = len(self.images) if isinstance(self.images, list) else 0
                self._trace = [[[(str(n), dict(a)) for n, a in p[v]] for p in per] for v in range(nviews)]
            else:
                self._trace = [parse_trace(t) for t in self._traces]
        return self._trace

    def __repr__(self) -> str:
        if isinstance(self.images, list):
            shape: Any = [tuple(getattr(im, "shape", ())) for im in self.images]
        else:
            shape = tuple(getattr(self.images, "shape", ()))
        return f"stoker.Batch(epoch={self.epoch}, number={self.number}, images={shape}, {len(self)} items)"
