from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Decode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DECODE_UNSPECIFIED: _ClassVar[Decode]
    DECODE_EXACT: _ClassVar[Decode]
    DECODE_FAST: _ClassVar[Decode]

class ShuffleMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SHUFFLE_MODE_UNSPECIFIED: _ClassVar[ShuffleMode]
    SHUFFLE_MODE_GLOBAL: _ClassVar[ShuffleMode]
    SHUFFLE_MODE_BLOCK: _ClassVar[ShuffleMode]

class Layout(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LAYOUT_UNSPECIFIED: _ClassVar[Layout]
    LAYOUT_NCHW: _ClassVar[Layout]
    LAYOUT_NHWC: _ClassVar[Layout]

class FailPolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FAIL_POLICY_UNSPECIFIED: _ClassVar[FailPolicy]
    FAIL_POLICY_PAD: _ClassVar[FailPolicy]
    FAIL_POLICY_DROP: _ClassVar[FailPolicy]

class Dtype(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DTYPE_UNSPECIFIED: _ClassVar[Dtype]
    DTYPE_UINT8: _ClassVar[Dtype]
    DTYPE_FLOAT32: _ClassVar[Dtype]
DECODE_UNSPECIFIED: Decode
DECODE_EXACT: Decode
DECODE_FAST: Decode
SHUFFLE_MODE_UNSPECIFIED: ShuffleMode
SHUFFLE_MODE_GLOBAL: ShuffleMode
SHUFFLE_MODE_BLOCK: ShuffleMode
LAYOUT_UNSPECIFIED: Layout
LAYOUT_NCHW: Layout
LAYOUT_NHWC: Layout
FAIL_POLICY_UNSPECIFIED: FailPolicy
FAIL_POLICY_PAD: FailPolicy
FAIL_POLICY_DROP: FailPolicy
DTYPE_UNSPECIFIED: Dtype
DTYPE_UINT8: Dtype
DTYPE_FLOAT32: Dtype

class FeedRequest(_message.Message):
    __slots__ = ("open", "credit", "shm")
    OPEN_FIELD_NUMBER: _ClassVar[int]
    CREDIT_FIELD_NUMBER: _ClassVar[int]
    SHM_FIELD_NUMBER: _ClassVar[int]
    open: OpenJob
    credit: Credit
    shm: ShmAccept
    def __init__(self, open: _Optional[_Union[OpenJob, _Mapping]] = ..., credit: _Optional[_Union[Credit, _Mapping]] = ..., shm: _Optional[_Union[ShmAccept, _Mapping]] = ...) -> None: ...

class JobSpec(_message.Message):
    __slots__ = ("dataset", "fingerprint", "transform", "batch_size", "seed", "shuffle", "rank", "world_size", "drop_last", "layout", "fail_policy", "shuffle_mode", "shuffle_window", "trace", "max_sample_errors", "repeats", "fields", "max_field_bytes", "mix", "mix_samples", "cpu_weight", "batch_tokens", "decode", "targets", "stop_epoch", "stop_ops", "target_fields", "max_targets_bytes", "mask_ratio", "mask_overlap", "contiguous_labels", "ragged")
    DATASET_FIELD_NUMBER: _ClassVar[int]
    FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    TRANSFORM_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    SHUFFLE_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    WORLD_SIZE_FIELD_NUMBER: _ClassVar[int]
    DROP_LAST_FIELD_NUMBER: _ClassVar[int]
    LAYOUT_FIELD_NUMBER: _ClassVar[int]
    FAIL_POLICY_FIELD_NUMBER: _ClassVar[int]
    SHUFFLE_MODE_FIELD_NUMBER: _ClassVar[int]
    SHUFFLE_WINDOW_FIELD_NUMBER: _ClassVar[int]
    TRACE_FIELD_NUMBER: _ClassVar[int]
    MAX_SAMPLE_ERRORS_FIELD_NUMBER: _ClassVar[int]
    REPEATS_FIELD_NUMBER: _ClassVar[int]
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    MAX_FIELD_BYTES_FIELD_NUMBER: _ClassVar[int]
    MIX_FIELD_NUMBER: _ClassVar[int]
    MIX_SAMPLES_FIELD_NUMBER: _ClassVar[int]
    CPU_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    BATCH_TOKENS_FIELD_NUMBER: _ClassVar[int]
    DECODE_FIELD_NUMBER: _ClassVar[int]
    TARGETS_FIELD_NUMBER: _ClassVar[int]
    STOP_EPOCH_FIELD_NUMBER: _ClassVar[int]
    STOP_OPS_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELDS_FIELD_NUMBER: _ClassVar[int]
    MAX_TARGETS_BYTES_FIELD_NUMBER: _ClassVar[int]
    MASK_RATIO_FIELD_NUMBER: _ClassVar[int]
    MASK_OVERLAP_FIELD_NUMBER: _ClassVar[int]
    CONTIGUOUS_LABELS_FIELD_NUMBER: _ClassVar[int]
    RAGGED_FIELD_NUMBER: _ClassVar[int]
    dataset: str
    fingerprint: str
    transform: TransformSpec
    batch_size: int
    seed: int
    shuffle: bool
    rank: int
    world_size: int
    drop_last: bool
    layout: Layout
    fail_policy: FailPolicy
    shuffle_mode: ShuffleMode
    shuffle_window: int
    trace: bool
    max_sample_errors: SampleErrorLimit
    repeats: int
    fields: _containers.RepeatedScalarFieldContainer[str]
    max_field_bytes: int
    mix: _containers.RepeatedCompositeFieldContainer[MixPart]
    mix_samples: int
    cpu_weight: float
    batch_tokens: int
    decode: Decode
    targets: bool
    stop_epoch: int
    stop_ops: _containers.RepeatedScalarFieldContainer[str]
    target_fields: _containers.RepeatedScalarFieldContainer[str]
    max_targets_bytes: int
    mask_ratio: int
    mask_overlap: bool
    contiguous_labels: bool
    ragged: bool
    def __init__(self, dataset: _Optional[str] = ..., fingerprint: _Optional[str] = ..., transform: _Optional[_Union[TransformSpec, _Mapping]] = ..., batch_size: _Optional[int] = ..., seed: _Optional[int] = ..., shuffle: _Optional[bool] = ..., rank: _Optional[int] = ..., world_size: _Optional[int] = ..., drop_last: _Optional[bool] = ..., layout: _Optional[_Union[Layout, str]] = ..., fail_policy: _Optional[_Union[FailPolicy, str]] = ..., shuffle_mode: _Optional[_Union[ShuffleMode, str]] = ..., shuffle_window: _Optional[int] = ..., trace: _Optional[bool] = ..., max_sample_errors: _Optional[_Union[SampleErrorLimit, _Mapping]] = ..., repeats: _Optional[int] = ..., fields: _Optional[_Iterable[str]] = ..., max_field_bytes: _Optional[int] = ..., mix: _Optional[_Iterable[_Union[MixPart, _Mapping]]] = ..., mix_samples: _Optional[int] = ..., cpu_weight: _Optional[float] = ..., batch_tokens: _Optional[int] = ..., decode: _Optional[_Union[Decode, str]] = ..., targets: _Optional[bool] = ..., stop_epoch: _Optional[int] = ..., stop_ops: _Optional[_Iterable[str]] = ..., target_fields: _Optional[_Iterable[str]] = ..., max_targets_bytes: _Optional[int] = ..., mask_ratio: _Optional[int] = ..., mask_overlap: _Optional[bool] = ..., contiguous_labels: _Optional[bool] = ..., ragged: _Optional[bool] = ...) -> None: ...

class MixPart(_message.Message):
    __slots__ = ("dataset", "weight")
    DATASET_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    dataset: str
    weight: float
    def __init__(self, dataset: _Optional[str] = ..., weight: _Optional[float] = ...) -> None: ...

class SampleErrorLimit(_message.Message):
    __slots__ = ("count", "fraction")
    COUNT_FIELD_NUMBER: _ClassVar[int]
    FRACTION_FIELD_NUMBER: _ClassVar[int]
    count: int
    fraction: float
    def __init__(self, count: _Optional[int] = ..., fraction: _Optional[float] = ...) -> None: ...

class OpenJob(_message.Message):
    __slots__ = ("job", "epoch", "epochs", "credits", "as_ready", "start_batch", "skip_batches", "consumed", "shm", "epoch_world_size", "token_resumes")
    JOB_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    EPOCHS_FIELD_NUMBER: _ClassVar[int]
    CREDITS_FIELD_NUMBER: _ClassVar[int]
    AS_READY_FIELD_NUMBER: _ClassVar[int]
    START_BATCH_FIELD_NUMBER: _ClassVar[int]
    SKIP_BATCHES_FIELD_NUMBER: _ClassVar[int]
    CONSUMED_FIELD_NUMBER: _ClassVar[int]
    SHM_FIELD_NUMBER: _ClassVar[int]
    EPOCH_WORLD_SIZE_FIELD_NUMBER: _ClassVar[int]
    TOKEN_RESUMES_FIELD_NUMBER: _ClassVar[int]
    job: JobSpec
    epoch: int
    epochs: int
    credits: int
    as_ready: bool
    start_batch: int
    skip_batches: _containers.RepeatedScalarFieldContainer[int]
    consumed: int
    shm: ShmRequest
    epoch_world_size: int
    token_resumes: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, job: _Optional[_Union[JobSpec, _Mapping]] = ..., epoch: _Optional[int] = ..., epochs: _Optional[int] = ..., credits: _Optional[int] = ..., as_ready: _Optional[bool] = ..., start_batch: _Optional[int] = ..., skip_batches: _Optional[_Iterable[int]] = ..., consumed: _Optional[int] = ..., shm: _Optional[_Union[ShmRequest, _Mapping]] = ..., epoch_world_size: _Optional[int] = ..., token_resumes: _Optional[_Iterable[int]] = ...) -> None: ...

class ShmRequest(_message.Message):
    __slots__ = ("boot_id", "targets_in_slot")
    BOOT_ID_FIELD_NUMBER: _ClassVar[int]
    TARGETS_IN_SLOT_FIELD_NUMBER: _ClassVar[int]
    boot_id: str
    targets_in_slot: bool
    def __init__(self, boot_id: _Optional[str] = ..., targets_in_slot: _Optional[bool] = ...) -> None: ...

class ShmOffer(_message.Message):
    __slots__ = ("declined", "socket", "token", "slots", "slot_bytes")
    DECLINED_FIELD_NUMBER: _ClassVar[int]
    SOCKET_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    SLOT_BYTES_FIELD_NUMBER: _ClassVar[int]
    declined: str
    socket: str
    token: bytes
    slots: int
    slot_bytes: int
    def __init__(self, declined: _Optional[str] = ..., socket: _Optional[str] = ..., token: _Optional[bytes] = ..., slots: _Optional[int] = ..., slot_bytes: _Optional[int] = ...) -> None: ...

class ShmAccept(_message.Message):
    __slots__ = ("ok", "reason")
    OK_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    ok: bool
    reason: str
    def __init__(self, ok: _Optional[bool] = ..., reason: _Optional[str] = ...) -> None: ...

class DescribeJobRequest(_message.Message):
    __slots__ = ("job", "epoch", "consumed", "token_resumes")
    JOB_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    CONSUMED_FIELD_NUMBER: _ClassVar[int]
    TOKEN_RESUMES_FIELD_NUMBER: _ClassVar[int]
    job: JobSpec
    epoch: int
    consumed: int
    token_resumes: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, job: _Optional[_Union[JobSpec, _Mapping]] = ..., epoch: _Optional[int] = ..., consumed: _Optional[int] = ..., token_resumes: _Optional[_Iterable[int]] = ...) -> None: ...

class DescribeJobResponse(_message.Message):
    __slots__ = ("info",)
    INFO_FIELD_NUMBER: _ClassVar[int]
    info: JobInfo
    def __init__(self, info: _Optional[_Union[JobInfo, _Mapping]] = ...) -> None: ...

class TransformSpec(_message.Message):
    __slots__ = ("preset", "ops", "views", "max_size")
    PRESET_FIELD_NUMBER: _ClassVar[int]
    OPS_FIELD_NUMBER: _ClassVar[int]
    VIEWS_FIELD_NUMBER: _ClassVar[int]
    MAX_SIZE_FIELD_NUMBER: _ClassVar[int]
    preset: str
    ops: _containers.RepeatedCompositeFieldContainer[Op]
    views: _containers.RepeatedCompositeFieldContainer[ViewGroup]
    max_size: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, preset: _Optional[str] = ..., ops: _Optional[_Iterable[_Union[Op, _Mapping]]] = ..., views: _Optional[_Iterable[_Union[ViewGroup, _Mapping]]] = ..., max_size: _Optional[_Iterable[int]] = ...) -> None: ...

class ViewGroup(_message.Message):
    __slots__ = ("name", "count", "transform", "several_images", "one_image")
    NAME_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    TRANSFORM_FIELD_NUMBER: _ClassVar[int]
    SEVERAL_IMAGES_FIELD_NUMBER: _ClassVar[int]
    ONE_IMAGE_FIELD_NUMBER: _ClassVar[int]
    name: str
    count: int
    transform: TransformSpec
    several_images: bool
    one_image: bool
    def __init__(self, name: _Optional[str] = ..., count: _Optional[int] = ..., transform: _Optional[_Union[TransformSpec, _Mapping]] = ..., several_images: _Optional[bool] = ..., one_image: _Optional[bool] = ...) -> None: ...

class Op(_message.Message):
    __slots__ = ("named",)
    NAMED_FIELD_NUMBER: _ClassVar[int]
    named: NamedOp
    def __init__(self, named: _Optional[_Union[NamedOp, _Mapping]] = ...) -> None: ...

class NamedOp(_message.Message):
    __slots__ = ("name", "args")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    name: str
    args: _containers.RepeatedCompositeFieldContainer[NamedArg]
    def __init__(self, name: _Optional[str] = ..., args: _Optional[_Iterable[_Union[NamedArg, _Mapping]]] = ...) -> None: ...

class NamedArg(_message.Message):
    __slots__ = ("name", "number", "numbers", "text", "flag", "none", "ops", "typed_fill")
    NAME_FIELD_NUMBER: _ClassVar[int]
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    NUMBERS_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    FLAG_FIELD_NUMBER: _ClassVar[int]
    NONE_FIELD_NUMBER: _ClassVar[int]
    OPS_FIELD_NUMBER: _ClassVar[int]
    TYPED_FILL_FIELD_NUMBER: _ClassVar[int]
    name: str
    number: float
    numbers: Numbers
    text: str
    flag: bool
    none: bool
    ops: OpList
    typed_fill: TypedFill
    def __init__(self, name: _Optional[str] = ..., number: _Optional[float] = ..., numbers: _Optional[_Union[Numbers, _Mapping]] = ..., text: _Optional[str] = ..., flag: _Optional[bool] = ..., none: _Optional[bool] = ..., ops: _Optional[_Union[OpList, _Mapping]] = ..., typed_fill: _Optional[_Union[TypedFill, _Mapping]] = ...) -> None: ...

class OpList(_message.Message):
    __slots__ = ("ops",)
    OPS_FIELD_NUMBER: _ClassVar[int]
    ops: _containers.RepeatedCompositeFieldContainer[Op]
    def __init__(self, ops: _Optional[_Iterable[_Union[Op, _Mapping]]] = ...) -> None: ...

class TypedFill(_message.Message):
    __slots__ = ("image", "mask")
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    MASK_FIELD_NUMBER: _ClassVar[int]
    image: Numbers
    mask: float
    def __init__(self, image: _Optional[_Union[Numbers, _Mapping]] = ..., mask: _Optional[float] = ...) -> None: ...

class Numbers(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, values: _Optional[_Iterable[float]] = ...) -> None: ...

class Credit(_message.Message):
    __slots__ = ("credits", "wait_seconds", "batches", "step_seconds", "released_slots")
    CREDITS_FIELD_NUMBER: _ClassVar[int]
    WAIT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    BATCHES_FIELD_NUMBER: _ClassVar[int]
    STEP_SECONDS_FIELD_NUMBER: _ClassVar[int]
    RELEASED_SLOTS_FIELD_NUMBER: _ClassVar[int]
    credits: int
    wait_seconds: float
    batches: int
    step_seconds: float
    released_slots: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, credits: _Optional[int] = ..., wait_seconds: _Optional[float] = ..., batches: _Optional[int] = ..., step_seconds: _Optional[float] = ..., released_slots: _Optional[_Iterable[int]] = ...) -> None: ...

class FeedResponse(_message.Message):
    __slots__ = ("job", "batch", "chunk", "end", "shm")
    JOB_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    SHM_FIELD_NUMBER: _ClassVar[int]
    job: JobInfo
    batch: BatchHeader
    chunk: Chunk
    end: EpochEnd
    shm: ShmOffer
    def __init__(self, job: _Optional[_Union[JobInfo, _Mapping]] = ..., batch: _Optional[_Union[BatchHeader, _Mapping]] = ..., chunk: _Optional[_Union[Chunk, _Mapping]] = ..., end: _Optional[_Union[EpochEnd, _Mapping]] = ..., shm: _Optional[_Union[ShmOffer, _Mapping]] = ...) -> None: ...

class JobInfo(_message.Message):
    __slots__ = ("epoch", "batches", "samples", "dataset_size", "fingerprint", "classes", "sample_shape", "dtype", "max_chunk_bytes", "views", "decode", "sizes_vary", "ragged")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    BATCHES_FIELD_NUMBER: _ClassVar[int]
    SAMPLES_FIELD_NUMBER: _ClassVar[int]
    DATASET_SIZE_FIELD_NUMBER: _ClassVar[int]
    FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    CLASSES_FIELD_NUMBER: _ClassVar[int]
    SAMPLE_SHAPE_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    MAX_CHUNK_BYTES_FIELD_NUMBER: _ClassVar[int]
    VIEWS_FIELD_NUMBER: _ClassVar[int]
    DECODE_FIELD_NUMBER: _ClassVar[int]
    SIZES_VARY_FIELD_NUMBER: _ClassVar[int]
    RAGGED_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    batches: int
    samples: int
    dataset_size: int
    fingerprint: str
    classes: _containers.RepeatedScalarFieldContainer[str]
    sample_shape: _containers.RepeatedScalarFieldContainer[int]
    dtype: Dtype
    max_chunk_bytes: int
    views: _containers.RepeatedCompositeFieldContainer[ViewInfo]
    decode: Decode
    sizes_vary: bool
    ragged: bool
    def __init__(self, epoch: _Optional[int] = ..., batches: _Optional[int] = ..., samples: _Optional[int] = ..., dataset_size: _Optional[int] = ..., fingerprint: _Optional[str] = ..., classes: _Optional[_Iterable[str]] = ..., sample_shape: _Optional[_Iterable[int]] = ..., dtype: _Optional[_Union[Dtype, str]] = ..., max_chunk_bytes: _Optional[int] = ..., views: _Optional[_Iterable[_Union[ViewInfo, _Mapping]]] = ..., decode: _Optional[_Union[Decode, str]] = ..., sizes_vary: _Optional[bool] = ..., ragged: _Optional[bool] = ...) -> None: ...

class ViewInfo(_message.Message):
    __slots__ = ("name", "sample_shape")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SAMPLE_SHAPE_FIELD_NUMBER: _ClassVar[int]
    name: str
    sample_shape: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, name: _Optional[str] = ..., sample_shape: _Optional[_Iterable[int]] = ...) -> None: ...

class BatchHeader(_message.Message):
    __slots__ = ("epoch", "number", "shape", "dtype", "labels", "indices", "errors", "data_bytes", "slot", "traces", "decode", "views", "fields", "sample_sizes", "ragged", "source_sizes", "records", "targets")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    INDICES_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    DATA_BYTES_FIELD_NUMBER: _ClassVar[int]
    SLOT_FIELD_NUMBER: _ClassVar[int]
    TRACES_FIELD_NUMBER: _ClassVar[int]
    DECODE_FIELD_NUMBER: _ClassVar[int]
    VIEWS_FIELD_NUMBER: _ClassVar[int]
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    SAMPLE_SIZES_FIELD_NUMBER: _ClassVar[int]
    RAGGED_FIELD_NUMBER: _ClassVar[int]
    SOURCE_SIZES_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    TARGETS_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    number: int
    shape: _containers.RepeatedScalarFieldContainer[int]
    dtype: Dtype
    labels: _containers.RepeatedScalarFieldContainer[int]
    indices: _containers.RepeatedScalarFieldContainer[int]
    errors: _containers.RepeatedCompositeFieldContainer[SampleError]
    data_bytes: int
    slot: int
    traces: _containers.RepeatedScalarFieldContainer[str]
    decode: Decode
    views: _containers.RepeatedCompositeFieldContainer[Shape]
    fields: _containers.RepeatedCompositeFieldContainer[FieldValues]
    sample_sizes: _containers.RepeatedScalarFieldContainer[int]
    ragged: bool
    source_sizes: _containers.RepeatedScalarFieldContainer[int]
    records: _containers.RepeatedScalarFieldContainer[int]
    targets: BatchTargets
    def __init__(self, epoch: _Optional[int] = ..., number: _Optional[int] = ..., shape: _Optional[_Iterable[int]] = ..., dtype: _Optional[_Union[Dtype, str]] = ..., labels: _Optional[_Iterable[int]] = ..., indices: _Optional[_Iterable[int]] = ..., errors: _Optional[_Iterable[_Union[SampleError, _Mapping]]] = ..., data_bytes: _Optional[int] = ..., slot: _Optional[int] = ..., traces: _Optional[_Iterable[str]] = ..., decode: _Optional[_Union[Decode, str]] = ..., views: _Optional[_Iterable[_Union[Shape, _Mapping]]] = ..., fields: _Optional[_Iterable[_Union[FieldValues, _Mapping]]] = ..., sample_sizes: _Optional[_Iterable[int]] = ..., ragged: _Optional[bool] = ..., source_sizes: _Optional[_Iterable[int]] = ..., records: _Optional[_Iterable[int]] = ..., targets: _Optional[_Union[BatchTargets, _Mapping]] = ...) -> None: ...

class BatchTargets(_message.Message):
    __slots__ = ("offsets", "canvas", "image_ids", "keypoints_per_instance", "box_format", "boxes", "labels", "iscrowd", "keypoints", "keypoints_visibility", "masks", "mask_offsets", "mask_runs", "in_slot", "overlap_mask", "overlap_masks", "mask_fill_offsets", "mask_fills", "mask_ratio", "mask_overlap")
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    CANVAS_FIELD_NUMBER: _ClassVar[int]
    IMAGE_IDS_FIELD_NUMBER: _ClassVar[int]
    KEYPOINTS_PER_INSTANCE_FIELD_NUMBER: _ClassVar[int]
    BOX_FORMAT_FIELD_NUMBER: _ClassVar[int]
    BOXES_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    ISCROWD_FIELD_NUMBER: _ClassVar[int]
    KEYPOINTS_FIELD_NUMBER: _ClassVar[int]
    KEYPOINTS_VISIBILITY_FIELD_NUMBER: _ClassVar[int]
    MASKS_FIELD_NUMBER: _ClassVar[int]
    MASK_OFFSETS_FIELD_NUMBER: _ClassVar[int]
    MASK_RUNS_FIELD_NUMBER: _ClassVar[int]
    IN_SLOT_FIELD_NUMBER: _ClassVar[int]
    OVERLAP_MASK_FIELD_NUMBER: _ClassVar[int]
    OVERLAP_MASKS_FIELD_NUMBER: _ClassVar[int]
    MASK_FILL_OFFSETS_FIELD_NUMBER: _ClassVar[int]
    MASK_FILLS_FIELD_NUMBER: _ClassVar[int]
    MASK_RATIO_FIELD_NUMBER: _ClassVar[int]
    MASK_OVERLAP_FIELD_NUMBER: _ClassVar[int]
    offsets: _containers.RepeatedScalarFieldContainer[int]
    canvas: _containers.RepeatedScalarFieldContainer[int]
    image_ids: _containers.RepeatedScalarFieldContainer[int]
    keypoints_per_instance: _containers.RepeatedScalarFieldContainer[int]
    box_format: int
    boxes: bytes
    labels: bytes
    iscrowd: bytes
    keypoints: bytes
    keypoints_visibility: bytes
    masks: bool
    mask_offsets: bytes
    mask_runs: bytes
    in_slot: TargetsInSlot
    overlap_mask: bool
    overlap_masks: bytes
    mask_fill_offsets: bytes
    mask_fills: bytes
    mask_ratio: int
    mask_overlap: bool
    def __init__(self, offsets: _Optional[_Iterable[int]] = ..., canvas: _Optional[_Iterable[int]] = ..., image_ids: _Optional[_Iterable[int]] = ..., keypoints_per_instance: _Optional[_Iterable[int]] = ..., box_format: _Optional[int] = ..., boxes: _Optional[bytes] = ..., labels: _Optional[bytes] = ..., iscrowd: _Optional[bytes] = ..., keypoints: _Optional[bytes] = ..., keypoints_visibility: _Optional[bytes] = ..., masks: _Optional[bool] = ..., mask_offsets: _Optional[bytes] = ..., mask_runs: _Optional[bytes] = ..., in_slot: _Optional[_Union[TargetsInSlot, _Mapping]] = ..., overlap_mask: _Optional[bool] = ..., overlap_masks: _Optional[bytes] = ..., mask_fill_offsets: _Optional[bytes] = ..., mask_fills: _Optional[bytes] = ..., mask_ratio: _Optional[int] = ..., mask_overlap: _Optional[bool] = ...) -> None: ...

class TargetsInSlot(_message.Message):
    __slots__ = ("boxes", "labels", "iscrowd", "keypoints", "keypoints_visibility", "mask_offsets", "mask_runs", "overlap_masks", "mask_fill_offsets", "mask_fills")
    BOXES_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    ISCROWD_FIELD_NUMBER: _ClassVar[int]
    KEYPOINTS_FIELD_NUMBER: _ClassVar[int]
    KEYPOINTS_VISIBILITY_FIELD_NUMBER: _ClassVar[int]
    MASK_OFFSETS_FIELD_NUMBER: _ClassVar[int]
    MASK_RUNS_FIELD_NUMBER: _ClassVar[int]
    OVERLAP_MASKS_FIELD_NUMBER: _ClassVar[int]
    MASK_FILL_OFFSETS_FIELD_NUMBER: _ClassVar[int]
    MASK_FILLS_FIELD_NUMBER: _ClassVar[int]
    boxes: SlotRange
    labels: SlotRange
    iscrowd: SlotRange
    keypoints: SlotRange
    keypoints_visibility: SlotRange
    mask_offsets: SlotRange
    mask_runs: SlotRange
    overlap_masks: SlotRange
    mask_fill_offsets: SlotRange
    mask_fills: SlotRange
    def __init__(self, boxes: _Optional[_Union[SlotRange, _Mapping]] = ..., labels: _Optional[_Union[SlotRange, _Mapping]] = ..., iscrowd: _Optional[_Union[SlotRange, _Mapping]] = ..., keypoints: _Optional[_Union[SlotRange, _Mapping]] = ..., keypoints_visibility: _Optional[_Union[SlotRange, _Mapping]] = ..., mask_offsets: _Optional[_Union[SlotRange, _Mapping]] = ..., mask_runs: _Optional[_Union[SlotRange, _Mapping]] = ..., overlap_masks: _Optional[_Union[SlotRange, _Mapping]] = ..., mask_fill_offsets: _Optional[_Union[SlotRange, _Mapping]] = ..., mask_fills: _Optional[_Union[SlotRange, _Mapping]] = ...) -> None: ...

class SlotRange(_message.Message):
    __slots__ = ("offset", "length")
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    LENGTH_FIELD_NUMBER: _ClassVar[int]
    offset: int
    length: int
    def __init__(self, offset: _Optional[int] = ..., length: _Optional[int] = ...) -> None: ...

class Shape(_message.Message):
    __slots__ = ("dims",)
    DIMS_FIELD_NUMBER: _ClassVar[int]
    dims: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, dims: _Optional[_Iterable[int]] = ...) -> None: ...

class FieldValues(_message.Message):
    __slots__ = ("name", "values", "missing")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    MISSING_FIELD_NUMBER: _ClassVar[int]
    name: str
    values: _containers.RepeatedScalarFieldContainer[bytes]
    missing: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, name: _Optional[str] = ..., values: _Optional[_Iterable[bytes]] = ..., missing: _Optional[_Iterable[int]] = ...) -> None: ...

class SampleError(_message.Message):
    __slots__ = ("index", "name", "reason")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    index: int
    name: str
    reason: str
    def __init__(self, index: _Optional[int] = ..., name: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class Chunk(_message.Message):
    __slots__ = ("number", "offset", "data")
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    number: int
    offset: int
    data: bytes
    def __init__(self, number: _Optional[int] = ..., offset: _Optional[int] = ..., data: _Optional[bytes] = ...) -> None: ...

class EpochEnd(_message.Message):
    __slots__ = ("epoch", "batches", "samples", "sample_errors")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    BATCHES_FIELD_NUMBER: _ClassVar[int]
    SAMPLES_FIELD_NUMBER: _ClassVar[int]
    SAMPLE_ERRORS_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    batches: int
    samples: int
    sample_errors: int
    def __init__(self, epoch: _Optional[int] = ..., batches: _Optional[int] = ..., samples: _Optional[int] = ..., sample_errors: _Optional[int] = ...) -> None: ...

class ListDatasetsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListDatasetsResponse(_message.Message):
    __slots__ = ("datasets",)
    DATASETS_FIELD_NUMBER: _ClassVar[int]
    datasets: _containers.RepeatedCompositeFieldContainer[DatasetInfo]
    def __init__(self, datasets: _Optional[_Iterable[_Union[DatasetInfo, _Mapping]]] = ...) -> None: ...

class DatasetInfo(_message.Message):
    __slots__ = ("name", "size", "classes", "fingerprint", "format", "category_ids", "fields")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    CLASSES_FIELD_NUMBER: _ClassVar[int]
    FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    CATEGORY_IDS_FIELD_NUMBER: _ClassVar[int]
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    name: str
    size: int
    classes: _containers.RepeatedScalarFieldContainer[str]
    fingerprint: str
    format: str
    category_ids: _containers.RepeatedScalarFieldContainer[int]
    fields: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., size: _Optional[int] = ..., classes: _Optional[_Iterable[str]] = ..., fingerprint: _Optional[str] = ..., format: _Optional[str] = ..., category_ids: _Optional[_Iterable[int]] = ..., fields: _Optional[_Iterable[str]] = ...) -> None: ...

class WorkRequest(_message.Message):
    __slots__ = ("job", "lease", "cancel", "end", "ping")
    JOB_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    PING_FIELD_NUMBER: _ClassVar[int]
    job: WorkJob
    lease: Lease
    cancel: CancelLease
    end: JobEnd
    ping: WorkPing
    def __init__(self, job: _Optional[_Union[WorkJob, _Mapping]] = ..., lease: _Optional[_Union[Lease, _Mapping]] = ..., cancel: _Optional[_Union[CancelLease, _Mapping]] = ..., end: _Optional[_Union[JobEnd, _Mapping]] = ..., ping: _Optional[_Union[WorkPing, _Mapping]] = ...) -> None: ...

class JobEnd(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: int
    def __init__(self, id: _Optional[int] = ...) -> None: ...

class WorkPing(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class WorkJob(_message.Message):
    __slots__ = ("id", "spec")
    ID_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    id: int
    spec: JobSpec
    def __init__(self, id: _Optional[int] = ..., spec: _Optional[_Union[JobSpec, _Mapping]] = ...) -> None: ...

class Lease(_message.Message):
    __slots__ = ("id", "job", "epoch", "number", "indices", "stall", "work", "copies", "progress_ms")
    ID_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    INDICES_FIELD_NUMBER: _ClassVar[int]
    STALL_FIELD_NUMBER: _ClassVar[int]
    WORK_FIELD_NUMBER: _ClassVar[int]
    COPIES_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_MS_FIELD_NUMBER: _ClassVar[int]
    id: int
    job: int
    epoch: int
    number: int
    indices: _containers.RepeatedScalarFieldContainer[int]
    stall: float
    work: float
    copies: _containers.RepeatedScalarFieldContainer[int]
    progress_ms: int
    def __init__(self, id: _Optional[int] = ..., job: _Optional[int] = ..., epoch: _Optional[int] = ..., number: _Optional[int] = ..., indices: _Optional[_Iterable[int]] = ..., stall: _Optional[float] = ..., work: _Optional[float] = ..., copies: _Optional[_Iterable[int]] = ..., progress_ms: _Optional[int] = ...) -> None: ...

class CancelLease(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: int
    def __init__(self, id: _Optional[int] = ...) -> None: ...

class WorkResponse(_message.Message):
    __slots__ = ("worker", "done", "chunk", "failed", "progress")
    WORKER_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    worker: WorkerInfo
    done: LeaseDone
    chunk: Chunk
    failed: LeaseFailed
    progress: LeaseProgress
    def __init__(self, worker: _Optional[_Union[WorkerInfo, _Mapping]] = ..., done: _Optional[_Union[LeaseDone, _Mapping]] = ..., chunk: _Optional[_Union[Chunk, _Mapping]] = ..., failed: _Optional[_Union[LeaseFailed, _Mapping]] = ..., progress: _Optional[_Union[LeaseProgress, _Mapping]] = ...) -> None: ...

class LeaseProgress(_message.Message):
    __slots__ = ("lease",)
    LEASE_FIELD_NUMBER: _ClassVar[int]
    lease: int
    def __init__(self, lease: _Optional[int] = ...) -> None: ...

class WorkerInfo(_message.Message):
    __slots__ = ("workers", "max_leases", "max_chunk_bytes", "decoder", "idle_timeout_ms")
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    MAX_LEASES_FIELD_NUMBER: _ClassVar[int]
    MAX_CHUNK_BYTES_FIELD_NUMBER: _ClassVar[int]
    DECODER_FIELD_NUMBER: _ClassVar[int]
    IDLE_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    workers: int
    max_leases: int
    max_chunk_bytes: int
    decoder: DecoderIdentity
    idle_timeout_ms: int
    def __init__(self, workers: _Optional[int] = ..., max_leases: _Optional[int] = ..., max_chunk_bytes: _Optional[int] = ..., decoder: _Optional[_Union[DecoderIdentity, _Mapping]] = ..., idle_timeout_ms: _Optional[int] = ...) -> None: ...

class DecoderIdentity(_message.Message):
    __slots__ = ("stoker_version", "output_version", "arch", "fused_multiply_add", "decode_path", "simd", "libjpeg_turbo_version", "jpeg_lib_version")
    STOKER_VERSION_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_VERSION_FIELD_NUMBER: _ClassVar[int]
    ARCH_FIELD_NUMBER: _ClassVar[int]
    FUSED_MULTIPLY_ADD_FIELD_NUMBER: _ClassVar[int]
    DECODE_PATH_FIELD_NUMBER: _ClassVar[int]
    SIMD_FIELD_NUMBER: _ClassVar[int]
    LIBJPEG_TURBO_VERSION_FIELD_NUMBER: _ClassVar[int]
    JPEG_LIB_VERSION_FIELD_NUMBER: _ClassVar[int]
    stoker_version: str
    output_version: int
    arch: str
    fused_multiply_add: bool
    decode_path: str
    simd: str
    libjpeg_turbo_version: int
    jpeg_lib_version: int
    def __init__(self, stoker_version: _Optional[str] = ..., output_version: _Optional[int] = ..., arch: _Optional[str] = ..., fused_multiply_add: _Optional[bool] = ..., decode_path: _Optional[str] = ..., simd: _Optional[str] = ..., libjpeg_turbo_version: _Optional[int] = ..., jpeg_lib_version: _Optional[int] = ...) -> None: ...

class LeaseDone(_message.Message):
    __slots__ = ("lease", "batch", "times")
    LEASE_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    TIMES_FIELD_NUMBER: _ClassVar[int]
    lease: int
    batch: BatchHeader
    times: MakeTimes
    def __init__(self, lease: _Optional[int] = ..., batch: _Optional[_Union[BatchHeader, _Mapping]] = ..., times: _Optional[_Union[MakeTimes, _Mapping]] = ...) -> None: ...

class MakeTimes(_message.Message):
    __slots__ = ("queue_seconds", "read_seconds", "decode_seconds", "transform_seconds", "wall_seconds")
    QUEUE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    READ_SECONDS_FIELD_NUMBER: _ClassVar[int]
    DECODE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    TRANSFORM_SECONDS_FIELD_NUMBER: _ClassVar[int]
    WALL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    queue_seconds: float
    read_seconds: float
    decode_seconds: float
    transform_seconds: float
    wall_seconds: float
    def __init__(self, queue_seconds: _Optional[float] = ..., read_seconds: _Optional[float] = ..., decode_seconds: _Optional[float] = ..., transform_seconds: _Optional[float] = ..., wall_seconds: _Optional[float] = ...) -> None: ...

class LeaseFailed(_message.Message):
    __slots__ = ("lease", "code", "message")
    LEASE_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    lease: int
    code: int
    message: str
    def __init__(self, lease: _Optional[int] = ..., code: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class StatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class StatusResponse(_message.Message):
    __slots__ = ("jobs", "workers", "peers_ready", "version")
    JOBS_FIELD_NUMBER: _ClassVar[int]
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    PEERS_READY_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[JobStatus]
    workers: int
    peers_ready: int
    version: str
    def __init__(self, jobs: _Optional[_Iterable[_Union[JobStatus, _Mapping]]] = ..., workers: _Optional[int] = ..., peers_ready: _Optional[int] = ..., version: _Optional[str] = ...) -> None: ...

class JobStatus(_message.Message):
    __slots__ = ("id", "dataset", "rank", "world_size", "epoch", "images_per_second", "bytes_per_second", "input_stall_ratio", "gpu_idle_ratio", "window", "window_min", "window_max", "buffered", "makers", "workers_recommended", "advice", "starvation_signal", "starvation", "shuffle", "trainer_step_ratio", "making", "send_ratio", "credit_wait_ratio", "bottleneck", "verdict", "predicted_cpu_seconds_per_sample", "worst_cpu_seconds_per_sample", "cpu_seconds_per_sample")
    ID_FIELD_NUMBER: _ClassVar[int]
    DATASET_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    WORLD_SIZE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    IMAGES_PER_SECOND_FIELD_NUMBER: _ClassVar[int]
    BYTES_PER_SECOND_FIELD_NUMBER: _ClassVar[int]
    INPUT_STALL_RATIO_FIELD_NUMBER: _ClassVar[int]
    GPU_IDLE_RATIO_FIELD_NUMBER: _ClassVar[int]
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    WINDOW_MIN_FIELD_NUMBER: _ClassVar[int]
    WINDOW_MAX_FIELD_NUMBER: _ClassVar[int]
    BUFFERED_FIELD_NUMBER: _ClassVar[int]
    MAKERS_FIELD_NUMBER: _ClassVar[int]
    WORKERS_RECOMMENDED_FIELD_NUMBER: _ClassVar[int]
    ADVICE_FIELD_NUMBER: _ClassVar[int]
    STARVATION_SIGNAL_FIELD_NUMBER: _ClassVar[int]
    STARVATION_FIELD_NUMBER: _ClassVar[int]
    SHUFFLE_FIELD_NUMBER: _ClassVar[int]
    TRAINER_STEP_RATIO_FIELD_NUMBER: _ClassVar[int]
    MAKING_FIELD_NUMBER: _ClassVar[int]
    SEND_RATIO_FIELD_NUMBER: _ClassVar[int]
    CREDIT_WAIT_RATIO_FIELD_NUMBER: _ClassVar[int]
    BOTTLENECK_FIELD_NUMBER: _ClassVar[int]
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    PREDICTED_CPU_SECONDS_PER_SAMPLE_FIELD_NUMBER: _ClassVar[int]
    WORST_CPU_SECONDS_PER_SAMPLE_FIELD_NUMBER: _ClassVar[int]
    CPU_SECONDS_PER_SAMPLE_FIELD_NUMBER: _ClassVar[int]
    id: str
    dataset: str
    rank: int
    world_size: int
    epoch: int
    images_per_second: float
    bytes_per_second: float
    input_stall_ratio: float
    gpu_idle_ratio: float
    window: int
    window_min: int
    window_max: int
    buffered: int
    makers: _containers.RepeatedCompositeFieldContainer[MakerStatus]
    workers_recommended: float
    advice: str
    starvation_signal: str
    starvation: float
    shuffle: str
    trainer_step_ratio: float
    making: MakingShares
    send_ratio: float
    credit_wait_ratio: float
    bottleneck: str
    verdict: str
    predicted_cpu_seconds_per_sample: float
    worst_cpu_seconds_per_sample: float
    cpu_seconds_per_sample: float
    def __init__(self, id: _Optional[str] = ..., dataset: _Optional[str] = ..., rank: _Optional[int] = ..., world_size: _Optional[int] = ..., epoch: _Optional[int] = ..., images_per_second: _Optional[float] = ..., bytes_per_second: _Optional[float] = ..., input_stall_ratio: _Optional[float] = ..., gpu_idle_ratio: _Optional[float] = ..., window: _Optional[int] = ..., window_min: _Optional[int] = ..., window_max: _Optional[int] = ..., buffered: _Optional[int] = ..., makers: _Optional[_Iterable[_Union[MakerStatus, _Mapping]]] = ..., workers_recommended: _Optional[float] = ..., advice: _Optional[str] = ..., starvation_signal: _Optional[str] = ..., starvation: _Optional[float] = ..., shuffle: _Optional[str] = ..., trainer_step_ratio: _Optional[float] = ..., making: _Optional[_Union[MakingShares, _Mapping]] = ..., send_ratio: _Optional[float] = ..., credit_wait_ratio: _Optional[float] = ..., bottleneck: _Optional[str] = ..., verdict: _Optional[str] = ..., predicted_cpu_seconds_per_sample: _Optional[float] = ..., worst_cpu_seconds_per_sample: _Optional[float] = ..., cpu_seconds_per_sample: _Optional[float] = ...) -> None: ...

class MakingShares(_message.Message):
    __slots__ = ("queue", "read", "decode", "transform", "peer", "network", "seconds_per_batch", "batches")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    READ_FIELD_NUMBER: _ClassVar[int]
    DECODE_FIELD_NUMBER: _ClassVar[int]
    TRANSFORM_FIELD_NUMBER: _ClassVar[int]
    PEER_FIELD_NUMBER: _ClassVar[int]
    NETWORK_FIELD_NUMBER: _ClassVar[int]
    SECONDS_PER_BATCH_FIELD_NUMBER: _ClassVar[int]
    BATCHES_FIELD_NUMBER: _ClassVar[int]
    queue: float
    read: float
    decode: float
    transform: float
    peer: float
    network: float
    seconds_per_batch: float
    batches: int
    def __init__(self, queue: _Optional[float] = ..., read: _Optional[float] = ..., decode: _Optional[float] = ..., transform: _Optional[float] = ..., peer: _Optional[float] = ..., network: _Optional[float] = ..., seconds_per_batch: _Optional[float] = ..., batches: _Optional[int] = ...) -> None: ...

class MakerStatus(_message.Message):
    __slots__ = ("name", "batches_per_second", "in_flight", "ready", "busy_batches_per_second", "busy_ratio", "unavailable", "backoff_seconds", "failures_in_a_row", "lease_seconds", "network_share")
    NAME_FIELD_NUMBER: _ClassVar[int]
    BATCHES_PER_SECOND_FIELD_NUMBER: _ClassVar[int]
    IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    BUSY_BATCHES_PER_SECOND_FIELD_NUMBER: _ClassVar[int]
    BUSY_RATIO_FIELD_NUMBER: _ClassVar[int]
    UNAVAILABLE_FIELD_NUMBER: _ClassVar[int]
    BACKOFF_SECONDS_FIELD_NUMBER: _ClassVar[int]
    FAILURES_IN_A_ROW_FIELD_NUMBER: _ClassVar[int]
    LEASE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    NETWORK_SHARE_FIELD_NUMBER: _ClassVar[int]
    name: str
    batches_per_second: float
    in_flight: int
    ready: bool
    busy_batches_per_second: float
    busy_ratio: float
    unavailable: str
    backoff_seconds: float
    failures_in_a_row: int
    lease_seconds: float
    network_share: float
    def __init__(self, name: _Optional[str] = ..., batches_per_second: _Optional[float] = ..., in_flight: _Optional[int] = ..., ready: _Optional[bool] = ..., busy_batches_per_second: _Optional[float] = ..., busy_ratio: _Optional[float] = ..., unavailable: _Optional[str] = ..., backoff_seconds: _Optional[float] = ..., failures_in_a_row: _Optional[int] = ..., lease_seconds: _Optional[float] = ..., network_share: _Optional[float] = ...) -> None: ...
