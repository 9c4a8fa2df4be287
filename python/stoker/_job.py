"""The job a Loader asks for: its parameters as the wire's JobSpec and
OpenJob, and as the plain values a state_dict records and checks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple, Union

from stoker._state import Resume
from stoker._targets import server_fields
from stoker.v1 import stoker_pb2 as pb

__all__ = ["Job", "layout_enum", "FAIL_POLICIES"]

_LAYOUTS = {"NCHW": pb.LAYOUT_NCHW, "NHWC": pb.LAYOUT_NHWC}
FAIL_POLICIES = {"pad": pb.FAIL_POLICY_PAD, "drop": pb.FAIL_POLICY_DROP, None: pb.FAIL_POLICY_UNSPECIFIED}
#: Loader(decode=...): None leaves it to the server (stoker serve --decode).
DECODES = {None: pb.DECODE_UNSPECIFIED, "exact": pb.DECODE_EXACT, "fast": pb.DECODE_FAST}
#: JobInfo.decode and BatchHeader.decode back to their names.
DECODE_NAMES = {pb.DECODE_EXACT: "exact", pb.DECODE_FAST: "fast"}


def layout_enum(layout: str) -> int:
    """The wire's Layout for ``"NCHW"`` or ``"NHWC"`` (any case)."""
    try:
        return _LAYOUTS[layout.upper()]
    except KeyError:
        raise ValueError(f"layout must be 'NCHW' or 'NHWC', got {layout!r}") from None


@dataclass
class Job:
    """What identifies a job (see JobSpec in proto/stoker/v1/stoker.proto):
    batch ``k`` of epoch ``e`` is a function of it, ``e`` and ``k``."""

    dataset: str
    transform: pb.TransformSpec
    batch_size: int
    seed: int
    shuffle: Union[bool, str]  # True (global), False, or "block"
    rank: int
    world_size: int
    drop_last: bool
    layout: str  # "NCHW" or "NHWC"
    fail_policy: Optional[str]  # "pad", "drop" or None (the server's: pad, or drop for records of several images)
    shuffle_window: Optional[int] = None  # "block": shards per window; None: the server's default
    # Failed samples an epoch tolerates: an int count, a float fraction of
    # the epoch; None: the server's default.
    max_sample_errors: Optional[Union[int, float]] = None
    trace: bool = False  # report what each sample's ops drew (no pixel changes: not a param of the batches)
    repeats: int = 1  # repeated augmentation: each sample this many times an epoch (RASampler)
    # Fields sent with each sample, and each one's bound (None: the
    # server's default); neither changes a pixel or the order.
    fields: Tuple[str, ...] = ()
    max_field_bytes: Optional[int] = None
    # A mix of datasets (stoker.Mix) instead of one: dataset is then "".
    mix: Optional[Any] = None
    # The job's weight in the server's share of its cores (by CPU time),
    # within what the server's --max-cpu-weight allows.
    cpu_weight: float = 1.0
    # How JPEGs are decoded: "exact" (full scale, torchvision's pixels),
    # "fast" (a DCT scale where the crop allows); None: the server's default.
    decode: Optional[str] = None
    # Each sample's boxes and labels moved with its pixels (the server's
    # field "targets", after the fields above).
    targets: bool = False
    # The DETR family's stop_epoch: from this epoch on (0: none) the ops of
    # the kinds stop_ops names are off (empty: D-FINE's three).
    stop_epoch: int = 0
    stop_ops: Tuple[str, ...] = ()
    # The targets' keys asked for (empty: every one but "masks"), and the
    # bound of a sample's targets with masks (None: the server's).
    target_fields: Tuple[str, ...] = ()
    max_targets_bytes: Optional[int] = None
    # The "overlap_mask" target's Format options (0, None: ultralytics'
    # defaults, mask_ratio=4 and mask_overlap=True).
    mask_ratio: int = 0
    mask_overlap: Optional[bool] = None
    # Batches cut by vision tokens (0: off, batches of batch_size); the
    # server does not serve them yet, and refuses the job saying so.
    batch_tokens: int = 0
    # A COCO dataset's target labels: "category_id" (the file's ids, as
    # torchvision's wrapper gives them) or "contiguous" (their ranks).
    labels: str = "category_id"
    # Samples of their own sizes sent back to back, unpadded (image_list,
    # the vision-language transforms); no pixel changes.
    ragged: bool = False

    def spec(self) -> pb.JobSpec:
        """The JobSpec of OpenJob and DescribeJob."""
        spec = pb.JobSpec(
            dataset=self.dataset,
            transform=self.transform,
            batch_size=self.batch_size,
            seed=self.seed,
            shuffle=bool(self.shuffle),
            shuffle_mode=pb.SHUFFLE_MODE_BLOCK if self.shuffle == "block" else pb.SHUFFLE_MODE_UNSPECIFIED,
            shuffle_window=self.shuffle_window or 0,
            rank=self.rank,
            world_size=self.world_size,
            drop_last=self.drop_last,
            layout=layout_enum(self.layout),
            fail_policy=FAIL_POLICIES[self.fail_policy],
            max_sample_errors=self._error_limit(),
            trace=self.trace,
            repeats=self.repeats if self.repeats > 1 else 0,
            fields=self.fields,
            max_field_bytes=self.max_field_bytes or 0,
            mix=self.mix.to_proto() if self.mix is not None else None,
            mix_samples=(self.mix.samples or 0) if self.mix is not None else 0,
            cpu_weight=self.cpu_weight if self.cpu_weight != 1 else 0,
            decode=DECODES[self.decode],
            targets=self.targets,
            stop_epoch=self.stop_epoch,
            stop_ops=self.stop_ops,
            target_fields=server_fields(self.target_fields),
            max_targets_bytes=self.max_targets_bytes or 0,
            mask_ratio=self.mask_ratio,
            batch_tokens=self.batch_tokens,
            contiguous_labels=self.labels == "contiguous",
            ragged=self.ragged,
        )
        if self.mask_overlap is not None:
            spec.mask_overlap = self.mask_overlap
        return spec

    def _error_limit(self) -> Optional[pb.SampleErrorLimit]:
        m = self.max_sample_errors
        if m is None:
            return None
        if isinstance(m, float):
            return pb.SampleErrorLimit(fraction=m)
        return pb.SampleErrorLimit(count=m)

    def open_job(self, epoch: int, resume: Optional[Resume], credits: int, as_ready: bool,
                 shm: Optional[pb.ShmRequest] = None) -> pb.OpenJob:
        """The OpenJob of a stream that runs from ``epoch`` (from
        ``resume``'s point in it, if any) until the trainer closes it,
        asking for a shared-memory ring with ``shm``."""
        r = resume or Resume(epoch)
        return pb.OpenJob(
            job=self.spec(),
            epoch=epoch,
            epochs=0,
            credits=credits,
            as_ready=as_ready,
            start_batch=r.start_batch,
            skip_batches=r.skip_batches,
            consumed=r.consumed,
            epoch_world_size=r.epoch_world_size,
            token_resumes=list(r.token_resumes),
            shm=shm,
        )

    def params(self) -> Dict[str, Any]:
        """The parameters a state_dict records, as plain values."""
        from google.protobuf import json_format

        return {
            "dataset": self.mix.key() if self.mix is not None else self.dataset,
            "transform": json_format.MessageToDict(self.transform),
            "batch_size": self.batch_size,
            "seed": self.seed,
            "shuffle": self.shuffle,
            "shuffle_window": self.shuffle_window,
            "rank": self.rank,
            "world_size": self.world_size,
            "drop_last": self.drop_last,
            "layout": self.layout,
            "repeats": self.repeats,
            "stop_epoch": self.stop_epoch,
            "stop_ops": list(self.stop_ops),
            "batch_tokens": self.batch_tokens,
        }
