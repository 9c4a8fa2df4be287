"""Several views of every image (SimCLR, MoCo, BYOL, DINO, DINOv2): the
server decodes each image once and makes every view of it, each its own
geometry and ops drawn apart."""

from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple, Union

from stoker._spec import one_view_spec
from stoker.v1 import stoker_pb2 as pb

__all__ = ["MultiView", "MAX_VIEWS", "VIEW_PRESETS"]

#: The most views a transform makes (the server's bound).
MAX_VIEWS = 32

#: Presets of several views the server knows (docs/transforms.md): each a
#: name for ``transform=``, whose batches carry a list of views.
VIEW_PRESETS = ("simclr", "dino", "dinov2")


class MultiView:
    """Several views of every image, for ``Loader(transform=...)``::

        from stoker import transforms as T
        global_tf = T.Compose([T.RandomResizedCrop(224, scale=(0.32, 1), interpolation="bicubic"), ...])
        local_tf = T.Compose([T.RandomResizedCrop(96, scale=(0.05, 0.32), interpolation="bicubic"), ...])
        loader = stoker.Loader(addr, "imagenet", transform=T.MultiView([("global", 2, global_tf),
                                                                          ("local", 8, local_tf)]))
        for images, labels in loader:     # images: a list of 10 uint8 tensors, [B, 3, 224, 224] x2, [B, 3, 96, 96] x8
            ...

    ``groups`` is a list of ``(count, transform)`` or ``(name, count,
    transform)``: ``count`` views made by ``transform`` (a one-view preset
    name, a :class:`~stoker.transforms.Compose`, an op, or a list of ops),
    each view its own draw of it. The server decodes each image once (the
    union of the views' regions, at the coarsest DCT scale that serves them
    all) and makes every view; a batch's images are then the list of views,
    in order (DINO's collate shape), and ``batch.views[name]`` the named
    groups' (groups may share a name: DINO's two global crops). At most
    :data:`MAX_VIEWS` views; every view's transform must start with its
    geometry, and all or none end in Normalize.
    """

    #: The Normalize the views shared, in [0, 1] units, when
    #: :func:`~stoker.transforms.from_torchvision` made the MultiView (pass
    #: them to :func:`stoker.normalize`); None otherwise.
    normalize_mean: Optional[Tuple[float, float, float]] = None
    normalize_std: Optional[Tuple[float, float, float]] = None

    def __init__(self, groups: Sequence[Union[Tuple[int, Any], Tuple[str, int, Any]]]) -> None:
        if isinstance(groups, (str, bytes)) or not isinstance(groups, Sequence):
            raise TypeError(f"MultiView takes a list of (count, transform) or (name, count, transform), got {groups!r}")
        if len(groups) == 0:
            raise ValueError("MultiView: no views: give at least one (count, transform) pair")
        self.groups: List[Tuple[str, int, pb.TransformSpec]] = []
        total = 0
        for g, group in enumerate(groups):
            if not isinstance(group, (tuple, list)) or len(group) not in (2, 3):
                raise TypeError(f"MultiView: group {g} is {group!r}: want (count, transform) or (name, count, transform)")
            name, count, transform = ("", *group) if len(group) == 2 else group
            if not isinstance(name, str):
                raise TypeError(f"MultiView: group {g}'s name must be a str, got {name!r}")
            if isinstance(count, bool) or not isinstance(count, int):
                raise TypeError(f"MultiView: group {g}'s count must be an int, got {count!r}")
            if count < 1:
                raise ValueError(f"MultiView: group {g}: count {count}: want at least 1")
            total += count
            if total > MAX_VIEWS:
                raise ValueError(f"MultiView: {total} views or more: the limit is {MAX_VIEWS}")
            if isinstance(transform, MultiView):
                raise TypeError(f"MultiView: group {g} is itself a MultiView: give each group one view's transform")
            if isinstance(transform, str) and transform in VIEW_PRESETS:
                raise ValueError(f"MultiView: group {g}: preset {transform!r} makes several views itself")
            self.groups.append((name, count, one_view_spec(transform)))

    @property
    def views(self) -> int:
        """How many views each sample makes."""
        return sum(count for _, count, _ in self.groups)

    def to_spec(self) -> pb.TransformSpec:
        """The wire's TransformSpec of the views."""
        return pb.TransformSpec(views=[pb.ViewGroup(name=name, count=count, transform=spec)
                                       for name, count, spec in self.groups])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MultiView) and self.to_spec() == other.to_spec()

    def __repr__(self) -> str:
        return "MultiView([" + ", ".join(f"({n!r}, {c}, ...)" if n else f"({c}, ...)" for n, c, _ in self.groups) + "])"
