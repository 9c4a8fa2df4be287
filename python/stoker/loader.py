"""stoker.Loader: ready batches from a stoker server as torch tensors.

A Loader keeps one Feed stream open for its life, epoch after epoch: the
trainer opens the job with ``prefetch`` credits, and for each epoch the
server sends JobInfo, each batch as a BatchHeader followed by the Chunks of
its pixels, then EpochEnd, then goes on with the next epoch. A reader
thread reassembles each batch into one buffer while the trainer works; each
batch taken from the loader grants the server one more credit and reports
how long the trainer waited for it, which is what the server's controller
steers on. Batches taken at the end of an epoch grant credits too, so the
next epoch's first ``prefetch`` batches are on their way before the trainer
asks for them.

Memory is bounded: the server never has more than ``prefetch`` batches sent
and not yet taken, so at most ``prefetch`` assembled batches wait here.

The pieces live in their own modules: :mod:`stoker._errors`,
:mod:`stoker._channel`, :mod:`stoker._malloc`, :mod:`stoker._wire`,
:mod:`stoker._buffers`, :mod:`stoker._stream`, :mod:`stoker._state`; the
names this module had before are re-exported here.
"""

from __future__ import annotations

import os
import time
import warnings
import weakref
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from stoker import _args, _serve, _world
from stoker import transforms as _transforms
from stoker import _vlm
from stoker._buffers import _BufferPool, batch_tensors
from stoker._channel import DatasetInfo, Endpoint, list_datasets
from stoker._mix import Mix
from stoker._errors import SampleError, StokerError
from stoker._job import FAIL_POLICIES, Job, layout_enum
from stoker._malloc import tune_malloc
from stoker._shm import TRANSPORTS, shm_request
from stoker._state import Progress, Resume, make_state, resume_from
from stoker._stats import LoaderStats, Tally
from stoker._stream import _FeedStream, _Session
from stoker._targets import target_names
from stoker.v1 import stoker_pb2 as pb

# The other names this module had before it was split, for code that
# imports them from here.
from stoker._buffers import _Batch  # noqa: F401
from stoker._channel import MAX_RECEIVE_MESSAGE_BYTES, _channel, _metadata  # noqa: F401
from stoker._errors import rpc_error as _rpc_error  # noqa: F401
from stoker._job import layout_enum as _layout  # noqa: F401
from stoker._wire import _Chunk, _parse_chunk, _parse_response, _varint  # noqa: F401

if TYPE_CHECKING:  # pragma: no cover
    import grpc
    import torch

__all__ = ["Loader", "EpochSetter", "StokerError", "SampleError", "LoaderStats", "DatasetInfo", "list_datasets"]

#: The largest ``batch_size``.
MAX_BATCH_SIZE = 65536
#: The largest ``prefetch``: each batch in flight is held in the trainer's
#: memory, so ``prefetch`` batches of 256 images of 3x224x224 bytes are
#: ``prefetch`` x 37 MiB. (A server also bounds what all its streams hold:
#: --memory-budget.)
MAX_PREFETCH = 1024
#: The largest ``shuffle_window``, in shards (the server's bound): a maker
#: reads about a window of shards' bytes ahead.
MAX_SHUFFLE_WINDOW = 1024
#: The most copies of a sample ``repeats`` asks for (the server's bound).
MAX_REPEATS = 64


class Loader:
    """Batches of augmented images from a stoker server, as torch tensors.

    Each iteration is one epoch of this rank's share of the dataset, made by
    the server at ``target`` (``"host:port"``, or any gRPC target such as
    ``"dns:///name:port"``), yielding a :class:`stoker.Batch` that unpacks as
    ``(images, labels)`` or, with ``return_indices``, ``(images, labels,
    indices)``, and carries ``.indices``, ``.trace`` and ``.fields``:

    - images: ``torch.uint8`` ``[B, 3, H, W]`` (``layout="NHWC"``:
      ``[B, H, W, 3]``), or ``torch.float32`` when the transform ends in
      Normalize; in pinned memory when ``pin_memory`` (default: when CUDA is
      available). Normalize on the GPU with :func:`stoker.normalize`.
    - labels, indices: ``torch.int64`` ``[B]`` (indices into the dataset).
    - with several views (``transform=stoker.transforms.MultiView(...)``, or
      the presets ``simclr``, ``dino``, ``dinov2``), images is a list of one
      tensor per view, in order, each as above (its own H, W), and
      ``batch.views`` the named views by name.

    Every yielded tensor owns its memory: it stays valid after later batches.

    The epoch's order is a function of ``(seed, epoch)``; rank ``r`` of
    ``world_size`` takes every ``world_size``-th sample of it, wrapping around
    so every rank gets ``ceil(N / world_size)`` samples and the same number of
    batches (torch's DistributedSampler). With ``shuffle="block"`` each rank
    takes a contiguous span of the order instead, so that it reads few
    shards; the counts are the same. ``rank`` and ``world_size`` default
    to the initialized ``torch.distributed`` group's, else to torchrun's
    ``RANK`` and ``WORLD_SIZE``, else to 0 and 1; one line on the ``"stoker"``
    logger says which were used.

    Epochs, under every training loop:

    - An epoch ends for the loader once the trainer has taken its
      ``len(loader)`` batches, whether or not it asks for more: loops that
      stop at ``len()`` (Lightning, Accelerate, Ignite, ``zip(range(n),
      loader)``) never read the end of the epoch, and need not.
    - The next iteration (``iter(loader)``) then runs the next epoch, with a
      new order and new augmentations, unless :meth:`set_epoch` says which
      epoch to run. Forgetting ``set_epoch`` never repeats an epoch.
    - An iteration left early (``break``, an exception, a loop that stops
      short) is over too: the next iteration runs the next epoch, unless
      :meth:`set_epoch` or :meth:`load_state_dict` says otherwise; after
      ``load_state_dict`` it runs the saved epoch's remaining batches.
    - Which epoch an iteration runs is decided at its first ``next()``, so
      a ``set_epoch`` between ``iter()`` and the first batch counts (as with
      DistributedSampler; Lightning calls it there).
    - :meth:`state_dict` taken once the epoch's last batch was taken names
      the next epoch, with no batch of it consumed.
    - :attr:`sampler` has ``set_epoch``, for loops that call
      ``loader.sampler.set_epoch(epoch)`` (Lightning does, before each
      epoch).

    One stream serves the loader's epochs: once the trainer has taken an
    epoch's last batch, the server goes on making the next epoch's first
    batches, and the next iteration, of that next epoch, continues on the
    same stream. An iteration left mid-epoch closes its stream, and the
    next iteration opens a new one, as does one after :meth:`set_epoch` to
    another epoch than the next. Call :meth:`close`, or use the loader as a
    context manager, to end the stream when done; a loader that is
    garbage-collected, or still open when the interpreter exits, is closed
    then.

    The local default: ``Loader("/data/train", transform=...)``, a dataset
    path (or an ``s3://``, ``gs://``, ``azblob://`` URL) and no ``dataset``,
    starts a ``stoker serve`` of that path on this host (the installed
    binary: the wheel's, else ``$STOKER_BIN``, else ``stoker`` on PATH),
    on loopback with a token of its own, batches through shared memory, on
    the CPUs the trainer leaves (one per rank on this host,
    ``LOCAL_WORLD_SIZE``, is left out); ``world_size`` ranks on one host
    share one server. It stops when the last loader using it closes, or its
    process ends, however. ``loader.stats.local_server`` says which server,
    workers, CPUs and log file (its path is in the error, too, when it
    cannot start).

    Args:
        target: the server's address. A host without a port is on
            stoker's port, 7070 (``stoker serve``'s default ``--listen``),
            never gRPC's default 443: ``"gpu-box"`` is ``"gpu-box:7070"``.
            Without ``dataset``: the dataset's path or URL, served by a
            local server (the local default, above).
        dataset: a dataset name the server serves (see :func:`list_datasets`),
            or a :class:`stoker.Mix` of several, drawn by weight; None (the
            default): ``target`` is a dataset path for a local server.
        transform: a preset name (``"imagenet-train"``, ``"imagenet-eval"``,
            :data:`stoker.transforms.PRESETS`), a
            :class:`stoker.transforms.Compose` of ops, or a
            :class:`stoker.transforms.MultiView` of several views.
        batch_size: samples per batch, 1..65536.
        shuffle: True: shuffle the epoch's order (from ``seed`` and the
            epoch) as DataLoader's ``shuffle=True`` does, a random
            permutation of all samples (``"global"`` says the same).
            ``"block"``: for datasets in shards (WebDataset tar files),
            permute the shards, then the samples within each window of
            ``shuffle_window`` consecutive shards (mosaicml-streaming's
            py1b): a server then reads long runs of few shards, which is
            what object storage wants, at the cost of a less thorough mix
            (a batch draws from about ``shuffle_window`` shards). A dataset
            without shards (an ImageFolder: each image is a file of its own)
            refuses it: StokerError("INVALID_ARGUMENT"). False: the
            dataset's order.
        seed: seeds the order and every random augmentation; 0..2**64-1.
        rank, world_size: this trainer's share of the epoch. None (the
            default): the initialized ``torch.distributed`` group's rank and
            world size, else the ``RANK`` and ``WORLD_SIZE`` environment
            variables (torchrun sets them), else 0 and 1. Given values win.
        drop_last: drop the rank's last incomplete batch.
        prefetch: batches the server may send ahead of the trainer
            (credits), 1..1024; this process holds up to ``prefetch``
            batches besides the trainer's, so memory grows with it (4 is
            plenty when the server keeps up).
        return_indices: also yield the samples' dataset indices.
        pin_memory: assemble batches in pinned memory; None: when CUDA is
            available. True on a host without an accelerator warns (once)
            and goes on unpinned, as DataLoader does.
        layout: ``"NCHW"`` or ``"NHWC"``.
        in_order: yield batches in batch-number order; False yields them as
            they are ready (faster when batch times vary).
        timeout: seconds (positive) to wait for any message from the server
            before raising StokerError("DEADLINE_EXCEEDED"); None waits for
            as long as the server is alive: the channel pings it after 10 s
            without data, and raises StokerError("UNAVAILABLE") when it does
            not answer within 15 s (a hung server, or a cut network); the
            environment variables STOKER_KEEPALIVE_TIME and
            STOKER_KEEPALIVE_TIMEOUT (seconds) set these two intervals.
        token: a bearer token sent on every call (the Feed stream, len()'s
            DescribeJob), for servers run with ``--auth-tokens``. It is
            refused (ValueError, before any connection) when it would go in
            plaintext to a host other than this one: use TLS, or
            ``allow_insecure_token=True``.
        tls_ca: a PEM file of the CA that signed the server's certificate
            (``--tls-cert``): connect with TLS. The certificate must name
            the target's host (its IP address, for a ``"IP:port"`` target).
        tls_cert, tls_key: PEM files of a client certificate and its key,
            for servers that want one (mutual TLS: ``--tls-client-ca``);
            given without ``tls_ca``, TLS trusts the system's root CAs.
        credentials: ``grpc.ChannelCredentials``, for full control of TLS
            instead of the ``tls_*`` files (not both: ValueError). A loader
            with credentials cannot be pickled (DataLoader workers).
            Default: plaintext, unless a ``tls_*`` file is given.
        allow_insecure_token: send the token in plaintext to a remote host
            (a trusted network only: anyone on the path can read it).
        fail_policy: what takes the place of a sample that failed by its own
            fault (a file that does not decode, is missing or changed):
            ``"pad"`` (its slot is filled with a copy of a good sample of the
            same batch, so batches keep their size) or ``"drop"`` (it is
            left out: that batch is smaller, counted in
            ``stats.short_batches``). Either way the sample is listed in
            :attr:`sample_errors` and a RuntimeWarning (once) says what the
            policy did. None (the default): ``"pad"``, or ``"drop"`` over a
            dataset of records of several images (a conversation file's:
            a record one of whose images failed is left out whole,
            ``Batch.records``), where ``"pad"`` is refused. A batch every
            sample of which failed is never
            yielded: the iteration raises StokerError("DATA_LOSS") naming
            why. A sample whose store failed (unreachable, throttling past
            its retries, credentials refused) is no fault of the sample:
            it is never padded or dropped, and the iteration raises
            StokerError("UNAVAILABLE") once the server's retries are spent
            (:meth:`load_state_dict` resumes where it stopped).
        max_sample_errors: how many samples of an epoch (this rank's
            share) may fail before the iteration raises
            StokerError("DATA_LOSS"), naming the commonest cause and how
            many samples it hit: an int is a count, a float a fraction of
            the epoch's samples (0..1). None (the default): 10, or 0.1% of
            the epoch when that is more, so that a few corrupt files pass
            and a broken dataset does not.
        tune_malloc: call :func:`stoker.loader.tune_malloc` on the first
            iteration (halves the trainer's receive CPU under glibc).
        shuffle_window: with ``shuffle="block"``, the shards in each
            window, 1..1024; None: the server's default (4). A server holds
            about a window of shards' bytes for each job, and the mix grows
            with it.
        transport: how pixels arrive. ``"auto"``: through a shared-memory
            ring when the server runs on this machine (same boot id, and
            its socket reachable: the same network namespace) and offers
            one, else in gRPC chunks; ``"grpc"``: always in chunks;
            ``"shm"``: the ring or StokerError("FAILED_PRECONDITION") at
            the first batch. Both give the same bytes. From a ring, the
            images tensor is a view on a slot of the server's memory,
            given back to the server once every tensor and view of the
            batch is garbage (a trainer that keeps batches gets later ones
            in chunks); with ``pin_memory`` the pixels are copied into
            pinned memory and the slot given back at once. See
            :attr:`transport`.
        trace: report what each sample's ops drew: each batch's
            ``.trace`` lists, per sample, its ops with their arguments in
            torchvision.transforms.v2.functional's names (geometry first),
            which replay through torchvision. It changes no pixel; the
            server refuses it for batches whose traces could pass 3 MiB.
        decode: how the server decodes JPEGs before the geometry:
            ``"exact"`` decodes at full scale and resamples as
            torchvision's ``decode_jpeg`` and ``F.resized_crop`` do (its
            pixels, within its own tests' tolerance); ``"fast"`` may decode
            at 1/2, 1/4 or 1/8 scale where the crop is at least that many
            times the output (libjpeg's DCT scaling, before an antialiased
            filter): faster on photos much larger than the output (about
            +6% images per CPU-second for tv-resnet50-v2, +20% for dinov2
            on 1080p-5.6K photos), up to tens of levels off torchvision
            on a few pixels (docs/transforms.md). None (the default): the
            server's ``--decode``, itself exact unless set. The batches'
            traces say which was used (``batch.decode``).
        repeats: repeated augmentation, as torchvision's RASampler
            (``--ra-sampler --ra-reps K``) and DeiT's: every sample
            ``repeats`` times an epoch, each copy its own augmentation, the
            copies at consecutive positions of the epoch's order so that
            they go to consecutive ranks; each rank's epoch is RASampler's,
            ``floor(len(dataset) // 256 * 256 / world_size)`` samples (so
            an epoch sees about ``1/repeats`` of the distinct images), and
            ``len(loader)`` its batches. Exactly once per copy, resumable
            (same or another world size) as without it. The copies of a
            sample go to its home maker under cache affinity, whose
            coefficient cache keeps the first copy's decode for the
            others. 1 (the default): off; at most 64; the dataset must
            have at least 256 samples, and not be block-shuffled.
        fields: names of fields to send with every sample, as
            ``batch.fields[name]``, a list of ``bytes`` per sample in
            batch order (None where a sample has none): a WebDataset
            sample's other members by extension (``("txt", "json")``: its
            caption and metadata, as webdataset names them; ``"cls"`` in a
            labelled one; the image's own ``"jpg"``, raw), an ImageFolder
            sample's ``"path"`` (relative to its root), and on any dataset
            ``"__key__"`` (the sample's key) and ``"__source__"`` (its
            dataset's name; in a :class:`Mix`, the dataset it came from).
            The bytes are the dataset's, as they are (decode a caption
            yourself: ``b.decode("utf-8", "replace")``). A name the dataset
            has no sample with is refused (StokerError("INVALID_ARGUMENT")
            listing its fields). They change no pixel and no order.
        max_field_bytes: the most bytes of one field of one sample: a
            sample with a larger field fails by itself (a sample error
            naming it and the field, before the field is read; the
            ``fail_policy`` fills its place). None: 16 KiB, or less when
            ``batch_size`` x fields x 16 KiB would pass a batch's bound
            of 32 MiB of fields; set, ``batch_size`` x fields x
            ``max_field_bytes`` must be within that bound.
        targets: with a dataset served with ``--annotations`` (COCO or
            YOLO), yield ``(images, targets[, indices])``: ``targets`` a
            list of one dict per sample, ``"boxes"`` a
            ``tv_tensors.BoundingBoxes`` ``[K, 4]`` XYXY (or the format of a
            last ``ConvertBoundingBoxFormat``) with
            ``canvas_size=(H, W)``, ``"labels"`` int64 ``[K]`` (the
            contiguous labels), ``"iscrowd"``, ``"image_id"``, and when the
            dataset has keypoints (P an instance: COCO's ``keypoints``, a
            YOLO ``kpt_shape``) ``"keypoints"`` a ``tv_tensors.KeyPoints``
            ``[K, P, 2]`` with ``canvas_size=(H, W)`` and
            ``"keypoints_visibility"`` uint8 ``[K, P]`` (COCO's v); the boxes
            and keypoints moved through the sample's geometry
            (RandomResizedCrop, Resize, CenterCrop, RandomCrop, Pad, the
            flips, RandomZoomOut, RandomIoUCrop, RandomRotation,
            RandomAffine) exactly as torchvision.transforms.v2 moves them. A
            transform with another geometric op (a policy, views), a mix or
            a dataset without annotations is refused
            (StokerError("INVALID_ARGUMENT")). Each sample's are
            bounded by ``max_field_bytes`` (25 bytes an instance and 24,
            and 9 a keypoint); a batch's travel as ragged arrays, and
            each sample's tensors are views into them (no copy a
            sample). ``targets=True`` gives every key the
            dataset has but ``"masks"`` (as torchvision's
            ``wrap_dataset_for_transforms_v2`` by default); a tuple of
            names (``("boxes", "labels", "masks")``) gives exactly those:
            ``"masks"`` a ``tv_tensors.Mask`` ``[K, H, W]`` uint8, each
            instance's mask moved as torchvision moves a Mask (nearest),
            bounded by ``max_targets_bytes`` (docs/detection.md);
            ``"overlap_mask"`` (not with ``"masks"``) ultralytics'
            yolov8-seg mask, ``Format(return_mask=True, mask_ratio=4,
            mask_overlap=True)``'s: ``[H // 4, W // 4]`` uint8 (int32 past
            255 instances), the boxes, labels and keypoints in its order;
            only with the YOLO ops on a YOLO segment dataset.
            ``"sem_masks"`` Format's semantic map of classes (ultralytics
            8.4's): ``[H // mask_ratio, W // mask_ratio]`` float32, each
            pixel its instance's class, made here from the overlap mask
            and the labels (which the server sends for it), as Format
            makes it (with the overlap mask a pixel of no instance takes
            the last instance's class, as Format's indexing gives it).
        mask_ratio: with ``"overlap_mask"`` (or ``"sem_masks"``) among ``targets``, its
            Format's ``mask_ratio`` (a positive int, at most the output's
            smaller side): the masks are ``[H // mask_ratio, W //
            mask_ratio]``. None: 4, ultralytics' default.
        mask_overlap: with ``"overlap_mask"`` among ``targets``, its
            Format's ``mask_overlap``: True (None: the default) the one
            index map; False ``polygons2masks``' one mask an instance,
            ``targets[i]["overlap_mask"]`` then ``[K, H // mask_ratio, W //
            mask_ratio]`` uint8 (0 or 1) in the instances' own order.
        labels: a COCO dataset's ``targets["labels"]``: ``"category_id"``
            (the default) the annotations' ``category_id`` as the file
            gives it, as torchvision's ``wrap_dataset_for_transforms_v2``
            gives it (its detection references then train with
            ``num_classes=91``, 0 the background); ``"contiguous"`` each
            category's rank among the file's categories sorted by id,
            ``0..K-1`` (the DETR family's ``remap_mscoco_category``). A YOLO
            set's labels are its class indices, a shard's its
            ``category_id``, either way.
        max_targets_bytes: with ``"masks"`` or ``"overlap_mask"`` among
            ``targets``, the bound of a sample's targets with them, in bytes (a sample
            over it fails by itself). None: 1 MiB, or what a batch's
            32 MiB of fields leaves a sample.
        stop_epoch: the DETR family's ``stop_epoch`` (RT-DETR v2, D-FINE,
            DEIM): from this epoch on (epochs counted from 0, as
            :attr:`epoch` and D-FINE count them: ``epoch >= stop_epoch``),
            the transform's top-level ops of the kinds ``stop_ops`` names
            are not run, and the trace shows only the ops that ran; the
            other ops draw exactly what they would have drawn with them on.
            D-FINE's configs stop at 72 (``include/dataloader.yml``; its S
            and M models at 120). None (the default): no stop; 0 is
            refused (leave the ops out instead). ultralytics'
            ``close_mosaic=N`` of an ``E``-epoch run is ``stop_epoch=E-N``.
            The server refuses (StokerError("INVALID_ARGUMENT")) a kind the
            transform lacks, or one that fixes the batch's size or dtype
            (Resize, RandomResizedCrop, CenterCrop, RandomCrop, Pad,
            ScaleJitter, FixedSizeCrop, Normalize).
        stop_ops: the ops ``stop_epoch`` switches off, by class name
            (D-FINE's policy's ``ops``) or class (stoker's or
            torchvision's). None: :data:`stoker.transforms.DETR_STOP_OPS`,
            D-FINE's ``RandomPhotometricDistort``, ``RandomZoomOut``,
            ``RandomIoUCrop`` (those the transform has); for a transform
            with a ``YOLOMosaic`` (``transform="yolo"``),
            :data:`stoker.transforms.YOLO_STOP_OPS`, ultralytics'
            ``close_mosaic``: ``YOLOMosaic``, ``YOLOMixUp``,
            ``YOLOCopyPaste`` and ``YOLOCutMix``.
        max_size: a bound on each sample's size, ``(height, width)``, for
            a transform whose geometry keeps the image's own size or a
            part of it: torchvision's detection references' ``hflip``,
            ``ssdlite`` and ``ssd`` recipes as they stand (no geometry op,
            or a ``RandomIoUCrop``, after a ``RandomZoomOut`` if any, with
            no ``Resize`` after it), refused without one. Each sample is
            then its own size, at most the bound (``Batch.sizes``,
            ``Batch.mask``, ``image_list``, as ``transform="frcnn"``'s),
            the batch's memory counted at the bound; a sample past it
            fails (``StokerError`` "TOO_LARGE" in ``sample_errors``,
            naming its image's size and the bound). Give the largest
            image's size times what the ops grow it by (``RandomZoomOut``'s
            ``side_range`` maximum: 4 by default).
        image_list: of a transform whose samples have their own sizes (a
            ``RandomShortestSize`` with a ``max_size`` and no crop after
            it; ``transform="frcnn"``), yield the images as a list of each
            sample's ``[3, h, w]``, as torchvision's detection models take
            them: the server sends each sample's own bytes back to back
            (a ragged batch: no padding made, sent or copied), each image
            a view of the batch's buffer. Without it they are
            the padded batch, ``Batch.sizes`` and ``Batch.mask`` saying
            each sample's size (DETR's NestedTensor).
        cpu_weight: the job's weight in the server's share of its cores,
            which is by CPU time: a job of weight 2 gets twice the CPU of
            one of weight 1 while both wait for samples. The server clamps
            it to ``[1/--max-cpu-weight, --max-cpu-weight]``; its default
            of 1 makes every job weigh alike, whatever this says.
        batch_tokens: batches cut by vision tokens, for vision-language
            training: each rank's batch at most this many vision tokens, a
            sample never split, planned from the manifest's image sizes
            (``stoker index --sizes``; without, each image's header, for a
            dataset of at most 65,536 samples), every sample once an epoch
            over the ranks, the ranks' tokens per step balanced, the
            batches ragged. Wants a SmartResize, NaFlexResize, TileResize or AnyResResize transform
            (the vision-language presets, ``from_hf``); None (the
            default): batches of ``batch_size``.

    Every argument is checked when the loader is made: TypeError for a
    wrong type (integers must be ints, numpy's included, never floats or
    bools; flags must be bools), ValueError for a value out of range. The
    TLS files are read then too.

    Attributes:
        sample_errors: every distinct (index, name, reason) the server
            reported as undecodable.
        stats: running totals (:class:`LoaderStats`).
        job_info: the last JobInfo the server sent (classes, fingerprint,
            sample shape, …), or None before the first stream.
        epoch: the epoch of the current position: the one the running
            iteration runs, or the next iteration will (after an iteration
            left mid-epoch, the next one runs ``epoch + 1`` unless
            :meth:`set_epoch` or :meth:`load_state_dict` is called).
        consumed: positions of the epoch's order the whole job consumed
            before this epoch's stream started (an elastic resume's; else 0).
    """

    def __init__(
        self,
        target: str,
        dataset: Union[str, Mix, None] = None,
        transform: _transforms.TransformLike = "imagenet-train",
        batch_size: int = 256,
        shuffle: Union[bool, str] = True,
        seed: int = 0,
        rank: Optional[int] = None,
        world_size: Optional[int] = None,
        drop_last: bool = False,
        prefetch: int = 4,
        return_indices: bool = False,
        pin_memory: Optional[bool] = None,
        layout: str = "NCHW",
        in_order: bool = True,
        timeout: Optional[float] = None,
        *,
        token: Optional[str] = None,
        tls_ca: Optional[str] = None,
        tls_cert: Optional[str] = None,
        tls_key: Optional[str] = None,
        credentials: Optional["grpc.ChannelCredentials"] = None,
        allow_insecure_token: bool = False,
        fail_policy: Optional[str] = None,
        tune_malloc: bool = True,
        transport: str = "auto",
        shuffle_window: Optional[int] = None,
        max_sample_errors: Optional[Union[int, float]] = None,
        trace: bool = False,
        repeats: int = 1,
        fields: Union[str, Sequence[str]] = (),
        max_field_bytes: Optional[int] = None,
        cpu_weight: float = 1.0,
        decode: Optional[str] = None,
        targets: Union[bool, Sequence[str]] = False,
        stop_epoch: Optional[int] = None,
        stop_ops: Optional[Sequence[Union[str, type]]] = None,
        image_list: bool = False,
        max_targets_bytes: Optional[int] = None,
        mask_ratio: Optional[int] = None,
        mask_overlap: Optional[bool] = None,
        max_size: Optional[Tuple[int, int]] = None,
        batch_tokens: Optional[int] = None,
        labels: str = "category_id",
    ) -> None:
        # Every argument is checked here, so that a mistake fails at once
        # rather than at the first batch, or silently (batch_size=8.5).
        self._local_path = _local_path(target, dataset, token, credentials, tls_ca, tls_cert, tls_key)
        if self._local_path is not None:
            dataset = _serve.DATASET
        self.dataset: Union[str, Mix] = dataset if isinstance(dataset, Mix) else _args.string("dataset", dataset)
        if isinstance(dataset, Mix):
            if shuffle not in (True, "block"):
                raise ValueError("a Mix draws its samples in a shuffled order: it needs shuffle=True (samples mixed), "
                                 "or shuffle=\"block\" (whole shards mixed, for sharded datasets)")
            if repeats != 1:
                raise ValueError("repeats with a Mix is not supported: mix first, or repeat one dataset")
        if isinstance(transform, str) and transform in _vlm.VLM_PRESETS:  # resolved here (docs/vlm.md)
            transform = _vlm.vlm_preset(transform)
        self.transform = transform
        self._vision = getattr(transform, "vision", None)  # a VisionCompose's: Batch.vision_inputs
        self._spec = _transforms.to_spec(transform)  # TypeError unless a preset name or ops
        self.batch_size = _args.integer("batch_size", batch_size, 1, MAX_BATCH_SIZE)
        self.shuffle = _args.shuffle(shuffle)
        if shuffle_window is not None:
            if self.shuffle != "block":
                raise ValueError(f"shuffle_window is the block shuffle's window: it needs shuffle='block', "
                                 f"got shuffle={shuffle!r}")
            shuffle_window = _args.integer("shuffle_window", shuffle_window, 1, MAX_SHUFFLE_WINDOW)
        self.shuffle_window = shuffle_window
        self.seed = _args.integer("seed", seed, 0, (1 << 64) - 1)
        rank, world_size = _world.resolve(
            None if rank is None else _args.integer("rank", rank, 0, (1 << 32) - 1),
            None if world_size is None else _args.integer("world_size", world_size, 1, (1 << 32) - 1),
        )
        self.world_size = _args.integer("world_size", world_size, 1, (1 << 32) - 1)
        self.rank = _args.integer("rank", rank, 0, (1 << 32) - 1)
        if self.rank >= self.world_size:
            raise ValueError(f"rank {self.rank} of world_size {self.world_size}: want 0 <= rank < world_size")
        self.drop_last = _args.boolean("drop_last", drop_last)
        self.prefetch = _args.integer("prefetch", prefetch, 1, MAX_PREFETCH)
        self.return_indices = _args.boolean("return_indices", return_indices)
        self.pin_memory = _args.optional_boolean("pin_memory", pin_memory)
        self.layout = _args.string("layout", layout).upper()
        layout_enum(self.layout)
        self.in_order = _args.boolean("in_order", in_order)
        self.timeout = _args.seconds("timeout", timeout)
        if fail_policy is not None and _args.string("fail_policy", fail_policy) not in FAIL_POLICIES:
            raise ValueError(f"fail_policy must be 'pad', 'drop' or None, got {fail_policy!r}")
        self.fail_policy = fail_policy
        self.max_sample_errors = _args.sample_error_limit(max_sample_errors)
        self.tune_malloc = _args.boolean("tune_malloc", tune_malloc)
        self.trace = _args.boolean("trace", trace)
        self.repeats = _args.integer("repeats", repeats, 1, MAX_REPEATS)
        if self.repeats > 1 and self.shuffle == "block":
            raise ValueError("repeats > 1 spreads a sample's copies over the ranks: it needs shuffle=True (or "
                             "False), not the block shuffle, whose ranks read their own shards")
        if decode is not None and _args.string("decode", decode) not in ("exact", "fast"):
            raise ValueError(f"decode must be 'exact' (full scale: torchvision's pixels) or 'fast' (DCT scaling where "
                             f"the crop is at least twice the output), or None for the server's default; got {decode!r}")
        self.decode: Optional[str] = decode
        self.fields = _args.fields(fields)
        self.targets, self.target_fields = target_names(targets)
        self.max_targets_bytes = None if max_targets_bytes is None else _args.integer("max_targets_bytes", max_targets_bytes, 1, (1 << 64) - 1)
        if self.max_targets_bytes is not None and not {"masks", "overlap_mask", "sem_masks"} & set(self.target_fields):
            raise ValueError("max_targets_bytes bounds the targets with their masks: it needs targets=(..., 'masks') "
                             "or targets=(..., 'overlap_mask')")
        self.mask_ratio = None if mask_ratio is None else _args.integer("mask_ratio", mask_ratio, 1, 1 << 14)
        self.mask_overlap = _args.optional_boolean("mask_overlap", mask_overlap)
        if (self.mask_ratio is not None or self.mask_overlap is not None) and not {"overlap_mask", "sem_masks"} & set(self.target_fields):
            raise ValueError("mask_ratio and mask_overlap are the options of ultralytics' Format mask: they need "
                             "targets=(..., 'overlap_mask') or targets=(..., 'sem_masks')")
        if labels not in ("category_id", "contiguous"):
            raise ValueError(f"labels must be 'category_id' (a COCO file's category ids, as torchvision's "
                             f"wrap_dataset_for_transforms_v2 gives them) or 'contiguous' (each category's rank "
                             f"among the file's, sorted by id: 0..K-1); got {labels!r}")
        if labels != "category_id" and not self.targets:
            raise ValueError("labels says how the targets' labels count a COCO file's categories: it needs targets")
        self.labels = labels
        self.image_list = _args.boolean("image_list", image_list)
        self.max_size: Optional[Tuple[int, int]] = None
        if max_size is not None:
            if isinstance(max_size, (str, bytes)) or not isinstance(max_size, (tuple, list)) or len(max_size) != 2:
                raise TypeError(f"max_size must be a pair (height, width) of ints, got {max_size!r}")
            self.max_size = (_args.integer("max_size[0]", max_size[0], 1, 1 << 14),
                             _args.integer("max_size[1]", max_size[1], 1, 1 << 14))
            self._spec.max_size[:] = self.max_size
        if "targets" in self.fields:
            raise ValueError("fields: 'targets' is asked for with targets=True, not as a field")
        self.stop_epoch = 0 if stop_epoch is None else _args.integer("stop_epoch", stop_epoch, 1, (1 << 64) - 1)
        if stop_ops is not None and stop_epoch is None:
            raise ValueError("stop_ops needs stop_epoch: the epoch (counted from 0) from which they are off")
        self.stop_ops = () if stop_ops is None else _args.stop_ops(stop_ops)
        self.cpu_weight = _args.weight("cpu_weight", cpu_weight)
        self.batch_tokens = None if batch_tokens is None else _args.integer("batch_tokens", batch_tokens, 1, (1 << 64) - 1)
        self.max_field_bytes = None if max_field_bytes is None else _args.integer("max_field_bytes", max_field_bytes, 1, (1 << 32) - 1)
        if self.max_field_bytes is not None and not self.fields and not self.targets:
            raise ValueError("max_field_bytes bounds the fields asked for: it needs fields=...")
        if _args.string("transport", transport) not in TRANSPORTS:
            raise ValueError(f"transport must be one of {', '.join(map(repr, TRANSPORTS))}, got {transport!r}")
        if transport == "shm" and shm_request("shm") is None:
            raise ValueError("transport='shm' needs Linux (a boot id and memfds)")
        self.transport_requested = transport
        # Known before any stream only where no ring is asked for; else the
        # server's answer to the first stream says.
        self._transport: Tuple[Optional[str], str] = (
            ("grpc", "not asked (transport='grpc', or not Linux)") if shm_request(transport) is None
            else (None, "not known yet: the server says whether it offers a ring when the first stream opens"))
        # The connection's arguments, checked (a token bound for plaintext
        # to a remote host is refused here) and the TLS files read.
        self._local: Optional[weakref.finalize] = None
        if self._local_path is None:
            self._endpoint = Endpoint.make(target, token=token, credentials=credentials, tls_ca=tls_ca,
                                           tls_cert=tls_cert, tls_key=tls_key,
                                           allow_insecure_token=allow_insecure_token)
            self.target = self._endpoint.target

        self.epoch = 0
        self.consumed = 0
        # The world size the current epoch began with when it was resumed
        # elastically with positions consumed (Resume.epoch_world_size);
        # 0: this loader's.
        self._epoch_world = 0
        # A job cut by vision tokens resumed elastically: the epoch's
        # resumes before this loader, (world size, steps) pairs flat
        # (Resume.token_resumes, OpenJob.token_resumes); () otherwise.
        self._token_resumes: Tuple[int, ...] = ()
        # The current position: the epoch and its batches taken. _yielded:
        # an iteration took batches of it (and left it mid-epoch, if it is
        # not running): the next iteration runs the next epoch unless
        # _chosen, which set_epoch and load_state_dict set.
        self._progress = Progress()
        self._yielded = False
        self._chosen = False
        self._pin_warned = False
        self._tally = Tally(fail_policy)
        self.sample_errors: List[SampleError] = self._tally.sample_errors
        self.stats: LoaderStats = self._tally.stats
        self.job_info: Optional[pb.JobInfo] = None
        self._resume: Optional[Resume] = None
        self._len_cache: Dict[Tuple[int, int], int] = {}
        self._pool: Optional[_BufferPool] = None
        self._ensure_local()
        self._open_session()

    @property
    def token(self) -> Optional[str]:
        """The bearer token sent on every call (read-only)."""
        return self._endpoint.token

    @property
    def transport(self) -> Optional[str]:
        """How the current (or last) stream's pixels arrive: ``"shm"`` (a
        shared-memory ring) or ``"grpc"`` (chunks); see
        :attr:`transport_reason` for why not ``"shm"``. None until the
        server has answered the first stream (the first ``next()`` of an
        iteration) when a ring was asked for (``transport="auto"`` or
        ``"shm"`` on Linux): only the server knows whether it offers one.
        ``transport="grpc"`` is ``"grpc"`` from the start."""
        return self._transport[0]

    @property
    def transport_reason(self) -> str:
        """Why the current stream's pixels come in chunks, or why
        :attr:`transport` is not known yet ("" when they come through
        shared memory)."""
        return self._transport[1]

    @property
    def credentials(self) -> Optional["grpc.ChannelCredentials"]:
        """The gRPC channel credentials given (read-only)."""
        return self._endpoint.credentials

    def _open_session(self) -> None:
        # The channel and stream live in a _Session that does not refer back
        # to the loader, so the finalizer can close them once the loader is
        # unreachable, or at exit (a call left open must not hold the
        # interpreter; the reader thread is a daemon).
        self._session = _Session()
        self._finalizer = weakref.finalize(self, self._session.close)

    @property
    def batches_consumed(self) -> int:
        """Batches of the current epoch taken so far (in as-ready mode: the
        length of the unbroken prefix of batch numbers taken)."""
        return self._progress.prefix

    def _buffers(self) -> _BufferPool:
        # Made on first use and kept across epochs: a trainer that lets its
        # batches go reuses the same few buffers all run long. Room for the
        # batches in flight, the one being filled and the trainer's.
        if self._pool is None:
            self._pool = _BufferPool(self.prefetch + 2)
        return self._pool

    def __getstate__(self) -> Dict[str, Any]:
        # Picklable for DataLoader workers (spawn): buffers, the channel and
        # the stream are not carried.
        state = self.__dict__.copy()
        for k in ("_pool", "_session", "_finalizer", "_local"):
            state.pop(k, None)
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._pool = None
        self._local = None  # a local server is joined at the first stream
        self._open_session()

    def _ensure_local(self) -> None:
        """With the local default, this process's use of the local server
        (started, or joined), unless it holds it already."""
        if self._local_path is None or (self._local is not None and self._local.alive):
            return
        h = _serve.acquire(self._local_path)
        self._local = weakref.finalize(self, _serve.release, h)
        self._endpoint = Endpoint.make(h.info.addr, token=h.token)
        self.target = self._endpoint.target
        self.stats.local_server = h.info

    def close(self) -> None:
        """Ends the loader's stream and closes its channel. An iteration
        still running raises StokerError("CANCELLED") at its next batch; a
        later iteration opens a new channel. Safe to call twice.

        With the local default, also drops this loader's use of the local
        server, which stops when no loader on this host uses it (a later
        iteration starts one again)."""
        self._session.close()
        if self._local is not None:
            self._local()

    def __enter__(self) -> "Loader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- epochs and resume --------------------------------------------------

    def set_epoch(self, epoch: int) -> None:
        """Sets the epoch the next iteration runs, from its start (like
        DistributedSampler), also when it is the epoch an earlier iteration
        left mid-way. Calling it is optional: without it, each iteration runs
        the epoch after the last one's.

        Every rank must use the same epoch. A pending resume from
        :meth:`load_state_dict` is kept when it is for ``epoch`` (Lightning
        loads the state, then sets the epoch) and dropped otherwise.
        """
        epoch = _args.integer("epoch", epoch, 0, (1 << 64) - 1)
        r = self._resume
        if r is None or r.epoch != epoch:
            if epoch != self.epoch or self._yielded or r is not None:
                self._resume = None
                self._progress = Progress()
                self.consumed, self._epoch_world, self._token_resumes = 0, 0, ()
            self._yielded = False
        self.epoch = epoch
        self._chosen = True

    @property
    def sampler(self) -> "EpochSetter":
        """An object whose ``set_epoch(epoch)`` is :meth:`set_epoch`: loops
        that set the epoch on ``dataloader.sampler`` (Lightning, before each
        epoch) find it here. It is no torch Sampler: it yields nothing."""
        return EpochSetter(self)

    def _job(self) -> Job:
        mix = self.dataset if isinstance(self.dataset, Mix) else None
        return Job("" if mix is not None else self.dataset, self._spec, self.batch_size, self.seed, self.shuffle, self.rank, self.world_size,
                   self.drop_last, self.layout, self.fail_policy, self.shuffle_window, trace=self.trace,
                   max_sample_errors=self.max_sample_errors, repeats=self.repeats, fields=self.fields,
                   max_field_bytes=self.max_field_bytes, mix=mix, cpu_weight=self.cpu_weight, decode=self.decode,
                   targets=self.targets, stop_epoch=self.stop_epoch, stop_ops=self.stop_ops,
                   target_fields=self.target_fields, max_targets_bytes=self.max_targets_bytes,
                   mask_ratio=self.mask_ratio or 0, mask_overlap=self.mask_overlap, batch_tokens=self.batch_tokens or 0,
                   labels=self.labels, ragged=self.image_list or self._vision is not None)

    def state_dict(self) -> Dict[str, Any]:
        """The position to resume from, as plain Python values (fit for
        ``torch.save`` or JSON): the epoch; ``batches_consumed``, the batches
        of it taken so far (in as-ready mode the unbroken prefix of batch
        numbers taken); ``taken``, the batch numbers taken past that prefix
        (as-ready mode; sorted); ``consumed``, the positions of the epoch's
        order consumed before this epoch's stream started (elastic resume;
        else 0); ``epoch_world_size``, the world size the epoch began with
        (the block shuffle's ranks split its order into that many spans,
        which ``consumed`` counts along); the job's parameters (``rank``,
        ``world_size`` and ``batch_size`` among them), the dataset's
        fingerprint and size, checked or used on load."""
        info = self.job_info
        return make_state(
            self.epoch,
            self._progress,
            self.consumed,
            self._job().params(),
            info.fingerprint if info is not None else "",
            int(info.dataset_size) if info is not None else 0,
            self.in_order,
            self._epoch_world,
            self._token_resumes,
        )

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Resumes from :meth:`state_dict`: the next iteration runs the saved
        epoch from where the saved loader was. The dataset, transform, seed,
        shuffle, shuffle_window, batch_size, drop_last and layout must be
        the same (else ValueError); ``rank`` and ``world_size`` may differ.

        The resume holds until an iteration takes a batch of it (one that
        fails before its first batch leaves it for the next), or until
        :meth:`set_epoch` to another epoch.

        Same world size: the next iteration yields exactly the batches an
        uninterrupted run would have yielded after the saved point, byte for
        byte: from the first batch not taken, and in as-ready mode without
        the batches already taken past it (``taken``), so no batch is
        delivered twice. In in-order mode any rank's state_dict will do for
        every rank (all ranks took the same number of batches, as in DDP);
        an as-ready one holds its rank's own batch numbers, and loading it
        into another rank raises ValueError.

        Another world size (elastic resume): the next iteration starts the
        epoch's remaining samples afresh, split among the new ranks: the
        saved job is taken to have consumed exactly the first
        ``consumed + batches_consumed * batch_size * world_size`` positions
        of the epoch's order (the saved values; at most the dataset's size),
        which the server leaves out before cutting the new ranks' shares
        (with ``shuffle="block"``, positions of the order that the epoch's
        first world size split, kept through every resume of the epoch as
        ``epoch_world_size``, so the same arithmetic holds).
        This assumes that every rank of the saved job took the same number
        of batches, ``batches_consumed`` (as in DDP, where ranks step
        together; in as-ready mode, where it is each rank's unbroken prefix,
        pass the state_dict with the smallest one of all ranks), and that
        the seed and the dataset are the same. Then, with ``drop_last``
        False, every sample of the epoch is consumed at least once over the
        runs, and the only duplicates are the end-of-epoch padding (the
        ranks' last shares wrap around to the start of the positions they
        split: the new world's, and the saved one's if its ranks had
        reached their last batch), plus, in as-ready mode, the batches taken
        past the prefix, which are delivered again. Resumes chain: the
        resumed loader's state_dict carries its ``consumed``. A job cut by
        vision tokens (``batch_tokens``) has no positions to count: its
        state_dict carries ``token_resumes``, the (world size, steps) of
        each earlier world of the epoch, and the server packs what they
        left for the new ranks, every sample once.
        """
        info = self.job_info
        r = resume_from(state, self._job().params(), int(info.dataset_size) if info is not None else None)
        self.epoch = r.epoch
        self._progress = Progress(r.start_batch, r.skip_batches)
        self.consumed, self._epoch_world, self._token_resumes = r.consumed, r.epoch_world_size, r.token_resumes
        self._resume = r
        self._yielded = False
        self._chosen = True

    # -- the stream ----------------------------------------------------------

    def _wants_pin(self) -> bool:
        if self.pin_memory is False:
            return False
        import torch

        if self.pin_memory is None:
            return torch.cuda.is_available()
        accelerator = getattr(torch, "accelerator", None)
        if accelerator is not None and accelerator.is_available() or torch.cuda.is_available():
            return True
        if not self._pin_warned:
            self._pin_warned = True
            warnings.warn("stoker.Loader: pin_memory=True, but no accelerator is available: batches are not pinned",
                          UserWarning, stacklevel=4)
        return False

    def _open_stream(self, epoch: int, resume: Optional[Resume]) -> _FeedStream:
        """A new stream starting at ``epoch`` (and ``resume``), replacing the
        session's. The channel is made here on first use: never before a
        fork, as iterations make it on their first next()."""
        session = self._session
        session.drop_stream()
        self._ensure_local()
        conn = session.connection(self._endpoint)
        open_job = self._job().open_job(epoch, resume, self.prefetch, not self.in_order,
                                        shm_request(self.transport_requested))
        session.stream = _FeedStream(conn, open_job, self._wants_pin(), self._buffers(), self.transport_requested)
        return session.stream

    def __len__(self) -> int:
        """Batches this rank gets in the current epoch (from its resume's
        ``consumed``, if any), as the server computes them: asked once per
        (epoch, consumed) with DescribeJob, which makes nothing."""
        key = (self.epoch, self.consumed, self._token_resumes)
        n = self._len_cache.get(key)
        if n is None:
            self._ensure_local()
            conn = self._session.connection(self._endpoint)
            info = conn.describe_job(self._job().spec(), self.epoch, self.consumed,
                                     self.timeout if self.timeout is not None else 60.0, self._token_resumes)
            n = self._len_cache[key] = int(info.batches)
        return n

    def __iter__(self) -> Iterator[Tuple["torch.Tensor", ...]]:
        return self._run()

    def _begin(self) -> Tuple[int, Optional[Resume], Progress]:
        """What an iteration runs (see the class's rule), decided at its
        first next(): the epoch, the resume, and the iteration's Progress,
        which becomes the loader's current position."""
        resume = self._resume
        if resume is not None:
            progress = Progress(resume.start_batch, resume.skip_batches)
            self.epoch, self.consumed, self._epoch_world = resume.epoch, resume.consumed, resume.epoch_world_size
            self._token_resumes = resume.token_resumes
        else:
            if self._yielded and not self._chosen:
                # The last iteration left its epoch early: it is over.
                self.epoch += 1
            progress = Progress()
            self.consumed, self._epoch_world, self._token_resumes = 0, 0, ()
        self._progress = progress
        self._yielded = self._chosen = False
        return self.epoch, resume, progress

    def _epoch_taken(self, epoch: int, progress: Progress, stream: _FeedStream, end_read: bool = False) -> bool:
        """The trainer has every batch of ``epoch``: the loader's position
        moves to the next epoch's start (unless set_epoch or load_state_dict
        moved it meanwhile), and the stream is released for the next
        iteration, with the EpochEnd still to read unless ``end_read``.
        Returns True (released)."""
        if progress is self._progress:
            self.epoch = epoch + 1
            self._progress = Progress()
            self.consumed, self._epoch_world, self._token_resumes = 0, 0, ()
            self._yielded = self._chosen = False
        stream.next_epoch = epoch + 1
        stream.end_pending = not end_read
        return True

    def _run(self) -> Iterator[Tuple["torch.Tensor", ...]]:
        if self.tune_malloc:
            tune_malloc()
        t0 = time.perf_counter()  # the first batch's wait includes opening
        epoch, resume, progress = self._begin()
        fresh = resume is None or (resume.start_batch == 0 and not resume.skip_batches and resume.consumed == 0)
        stream = self._session.idle_stream(epoch) if fresh else None
        reused = stream is not None
        if stream is None:
            stream = self._open_stream(epoch, resume)
        # The job is asked for: the server decodes its first batches while
        # this process imports what the batches become (torch, and with
        # targets torchvision's tv_tensors, which imports torchvision whole:
        # about 5 s of one core in a process that has neither, once). Imported
        # at the first batch, after the job opened, that wait was the first
        # epoch's (a 600-image detr epoch at 135 images/s against 405).
        import torch

        if self.targets:
            import torchvision.tv_tensors  # noqa: F401
        released = False
        try:
            kind, info = stream.job(self.timeout)
            if reused and kind in ("error", "closed"):
                # It broke while waiting between epochs (a server restart, an
                # idle connection cut): the epoch on a new one.
                self._session.drop_stream(stream)
                stream = self._open_stream(epoch, None)
                kind, info = stream.job(self.timeout)
            if kind == "error":
                raise info
            if kind != "job" or info.epoch != epoch:
                raise StokerError("INTERNAL", f"epoch {epoch} opened with {kind!r}, not its JobInfo")
            self.job_info = info
            view_names = [v.name for v in info.views]
            self._transport = ("shm", "") if stream.ring is not None else ("grpc", stream.shm_reason)
            consumed = min(resume.consumed, int(info.dataset_size)) if resume is not None else 0
            if progress is self._progress:  # the loader's current iteration
                self.consumed = consumed
            batches = int(info.batches)
            self._len_cache[(epoch, consumed, resume.token_resumes if resume is not None else ())] = batches
            if resume is not None and resume.fingerprint and info.fingerprint != resume.fingerprint:
                warnings.warn(
                    f"stoker: dataset {self.dataset!r} changed since the state_dict was saved "
                    f"(fingerprint {resume.fingerprint} -> {info.fingerprint}); the resumed epoch's remaining "
                    "batches are not those the interrupted run would have had",
                    RuntimeWarning,
                    stacklevel=2,
                )
            if progress.prefix >= batches:  # nothing to take: an empty epoch, or resumed at its end
                released = self._epoch_taken(epoch, progress, stream)
            step = 0.0  # none before the first batch
            while not released:
                kind, v = stream.get(self.timeout)
                waited = time.perf_counter() - t0
                if stream.closed:  # by close(), or by another iteration's start
                    raise StokerError("CANCELLED", "the loader's stream was closed (Loader.close(), or another "
                                      "iteration of the loader began)")
                if kind == "batch":
                    # Also for an epoch's last batches: the server goes on
                    # with the next epoch's first ones.
                    stream.credit(waited, step)
                    self.stats.wait_seconds += waited
                    if v.header.epoch != epoch:
                        raise StokerError("INTERNAL", f"batch of epoch {v.header.epoch} in epoch {epoch}")
                    out = batch_tensors(v, self.return_indices, torch, view_names, self.fields,
                                        self.target_fields or self.targets, self.image_list)
                    out._vision = self._vision
                    self._tally.batch(v.header)
                    number = int(v.header.number)
                    v = None  # only the yielded tensors hold the buffer now
                    progress.take(number)
                    if progress is self._progress:
                        self._yielded = True
                        if resume is not None and self._resume is resume:
                            self._resume = None  # taken up: a later iteration does not resume again
                    if progress.prefix >= batches:
                        # The epoch's last batch: the epoch is over for the
                        # loader now, before the trainer asks for more (a
                        # state_dict taken while it holds this batch names
                        # the next epoch).
                        released = self._epoch_taken(epoch, progress, stream)
                    yielded = time.perf_counter()
                    yield out
                    out = None  # the trainer's alone now: a ring slot is given back once it lets go
                    t0 = time.perf_counter()
                    step = t0 - yielded  # the trainer's work on the batch
                elif kind == "end":  # before the batches JobInfo announced (never, from a sound server)
                    self.stats.wait_seconds += waited
                    released = self._epoch_taken(epoch, progress, stream, end_read=True)
                elif kind == "error":
                    raise v
                else:  # "closed" without EpochEnd, or a JobInfo twice
                    raise StokerError("INTERNAL", f"the Feed stream ended without EpochEnd ({kind})")
        finally:
            if not released:
                self._session.drop_stream(stream)
        # The trainer asks past the epoch's last batch (a for loop does):
        # read the EpochEnd, unless another iteration has taken the stream
        # over meanwhile, or it was closed.
        if self._session.stream is stream and stream.next_epoch == epoch + 1 and stream.end_pending:
            t0 = time.perf_counter()
            try:
                kind, v = stream.read_end(self.timeout)
            except BaseException:
                self._session.drop_stream(stream)
                raise
            self.stats.wait_seconds += time.perf_counter() - t0
            if kind != "end":
                # Broken between epochs: the next iteration opens a new
                # stream (and reports a lasting error itself).
                self._session.drop_stream(stream)
                if kind not in ("error", "closed"):
                    raise StokerError("INTERNAL", f"{kind!r} after epoch {epoch}'s last batch, not its EpochEnd")

    def __repr__(self) -> str:
        return (
            f"Loader(target={self.target!r}, dataset={self.dataset!r}, transform={self.transform!r}, "
            f"batch_size={self.batch_size}, shuffle={self.shuffle!r}, seed={self.seed}, rank={self.rank}, "
            f"world_size={self.world_size}, epoch={self.epoch})"
        )


def _local_path(target: Any, dataset: Any, *credentials: Any) -> Optional[str]:
    """The dataset path of the local default (no dataset given), else None;
    a ValueError for a directory given as a server's address."""
    if dataset is not None:
        if isinstance(target, str) and "://" not in target and os.path.isdir(os.path.expanduser(target)):
            raise ValueError(f"target {target!r} is a directory, not a server's address: for a local server of it, "
                             f"give the path alone, stoker.Loader({target!r}, transform=...)")
        return None
    path = _args.string("target", target)
    if any(c is not None for c in credentials):
        raise ValueError("the local default (a dataset path and no dataset name) serves on loopback with a token of "
                         "its own: token, credentials and tls_* are for a server someone runs")
    if "://" not in path and not os.path.exists(os.path.expanduser(path)):
        raise ValueError(f"stoker.Loader({path!r}) with no dataset name serves a local dataset path, and {path!r} "
                         f"does not exist; for a server someone runs, give its address and a dataset name: "
                         f"stoker.Loader({path!r}, 'imagenet', ...)")
    return path


class EpochSetter:
    """:attr:`Loader.sampler`: ``set_epoch(epoch)`` calls the loader's, for
    loops that set the epoch on ``dataloader.sampler`` (Lightning). It holds
    the loader weakly, so that the loader is still closed when dropped."""

    __slots__ = ("_loader",)

    def __init__(self, loader: Loader) -> None:
        self._loader = weakref.ref(loader)

    def set_epoch(self, epoch: int) -> None:
        """See :meth:`Loader.set_epoch`."""
        loader = self._loader()
        if loader is not None:
            loader.set_epoch(epoch)

    @property
    def epoch(self) -> Optional[int]:
        """The loader's :attr:`~Loader.epoch` (None once it is gone)."""
        loader = self._loader()
        return None if loader is None else loader.epoch

    def __repr__(self) -> str:
        return f"EpochSetter(epoch={self.epoch})"
