"""One view's TransformSpec: the part of :func:`stoker.transforms.to_spec`
that :class:`stoker.transforms.MultiView` needs for each of its groups.

It lives apart so that ``_views`` and ``transforms`` import it and not each
other: ``transforms`` re-exports ``MultiView``, and a MultiView converts its
groups' transforms here.
"""

from __future__ import annotations

from typing import Any

from stoker._ops_base import Transform
from stoker._ops_containers import Compose, flatten
from stoker.v1 import stoker_pb2 as pb


def one_view_spec(transform: Any) -> pb.TransformSpec:
    """Returns the wire's TransformSpec for a preset name, a Compose (nested
    ones flattened), one op, a list of ops, or a TransformSpec (a copy)."""
    if isinstance(transform, pb.TransformSpec):
        spec = pb.TransformSpec()
        spec.CopyFrom(transform)
        return spec
    if isinstance(transform, str):
        return pb.TransformSpec(preset=transform)
    if isinstance(transform, Transform):
        ops = flatten([transform])
    elif isinstance(transform, (list, tuple)):
        ops = flatten(Compose(transform).transforms)
    else:
        hint = (" (for torchvision's, use stoker.transforms.from_torchvision)"
                if type(transform).__module__.startswith("torchvision") else "")
        raise TypeError(f"transform must be a preset name or stoker.transforms ops, got {transform!r}{hint}")
    return pb.TransformSpec(ops=[op.to_proto() for op in ops])
