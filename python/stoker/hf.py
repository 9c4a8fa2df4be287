"""Hugging Face's ``transformers.Trainer`` fed by a stoker Loader.

::

    import stoker
    from stoker.hf import StokerTrainer

    loader = stoker.Loader("127.0.0.1:7070", "imagenet", transform="imagenet-train", batch_size=64)
    trainer = StokerTrainer(model=model, args=TrainingArguments(...), train_loader=loader,
                            mean=proc.image_mean, std=proc.image_std)
    trainer.train()                      # or train(resume_from_checkpoint=True)

:class:`StokerTrainer` is ``transformers.Trainer`` with its training
dataloader replaced by the stoker Loader given (``get_train_dataloader``):
the Loader shards by rank itself (``torch.distributed``'s group, or
torchrun's ``RANK``/``WORLD_SIZE``), so it is not handed to Accelerate's
``prepare`` (which would shard it again, and cannot prepare an arbitrary
loader: accelerate#2975). Each batch reaches the model as
``{"pixel_values": float32, "labels": int64}``: the uint8 images go to the
device as they are and are scaled there (``/ 255``, then ``mean``/``std``
when given). A checkpoint carries the Loader's ``state_dict`` (one file a
rank, ``stoker_loader_rank{R}.pt``), and resuming from it restores the
Loader's position instead of skipping batches (``ignore_data_skip`` is set):
the resumed run gets the very batches the uninterrupted one had.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Iterator, List, Optional, Sequence

import torch
from transformers import Trainer

import stoker

__all__ = ["StokerTrainer"]


def _rank() -> int:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank()
    return int(os.environ.get("RANK", "0"))


class _Batches:
    """The Loader as the Trainer iterates it: dicts of tensors, the
    Loader's length and ``set_epoch``."""

    def __init__(self, loader: stoker.Loader, image_key: str, label_key: str) -> None:
        self.loader, self.image_key, self.label_key = loader, image_key, label_key
        #: (epoch, the batch's dataset indices) of every batch yielded,
        #: when the Loader returns indices.
        self.seen: List[tuple] = []

    def __len__(self) -> int:
        return len(self.loader)

    def set_epoch(self, epoch: int) -> None:
        self.loader.set_epoch(epoch)

    def __iter__(self) -> Iterator[Dict[str, Any]]:
        for b in self.loader:
            if getattr(b, "indices", None) is not None:
                self.seen.append((b.epoch, [int(i) for i in b.indices]))
            yield {self.image_key: b[0], self.label_key: b[1]}


class StokerTrainer(Trainer):
    """``transformers.Trainer`` whose training batches come from
    ``train_loader`` (a :class:`stoker.Loader`); see the module.

    Args:
        train_loader: the Loader (classification batches: images and labels).
        mean, std: per-channel, in [0, 1] units (an image processor's
            ``image_mean``/``image_std``); None: the images only scaled to
            [0, 1].
        image_key, label_key: the model's argument names
            (``pixel_values``, ``labels``).
        Everything else is ``Trainer``'s.
    """

    def __init__(self, *args: Any, train_loader: stoker.Loader, mean: Optional[Sequence[float]] = None,
                 std: Optional[Sequence[float]] = None, image_key: str = "pixel_values", label_key: str = "labels",
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The Loader resumes from its state_dict; skipping batches would skip them twice.
        self.args.ignore_data_skip = True
        self.stoker_batches = _Batches(train_loader, image_key, label_key)
        self._mean = torch.tensor(mean, dtype=torch.float32).view(1, -1, 1, 1) if mean is not None else None
        self._std = torch.tensor(std, dtype=torch.float32).view(1, -1, 1, 1) if std is not None else None

    @property
    def train_loader(self) -> stoker.Loader:
        return self.stoker_batches.loader

    def get_train_dataloader(self) -> _Batches:  # type: ignore[override]
        return self.stoker_batches

    def _prepare_inputs(self, inputs: Dict[str, Any]) -> Dict[str, Any]:
        inputs = super()._prepare_inputs(inputs)
        x = inputs.get(self.stoker_batches.image_key)
        if isinstance(x, torch.Tensor) and x.dtype == torch.uint8:
            x = x.float().div_(255)
            if self._mean is not None:
                x = x.sub_(self._mean.to(x.device))
            if self._std is not None:
                x = x.div_(self._std.to(x.device))
            inputs[self.stoker_batches.image_key] = x
        return inputs

    def _save_checkpoint(self, model: Any, trial: Any) -> None:
        super()._save_checkpoint(model, trial)
        from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

        out = os.path.join(self._get_output_dir(trial=trial), f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}")
        if os.path.isdir(out):
            torch.save(self.train_loader.state_dict(), os.path.join(out, f"stoker_loader_rank{_rank()}.pt"))

    def _load_from_checkpoint(self, resume_from_checkpoint: str, model: Any = None) -> None:
        super()._load_from_checkpoint(resume_from_checkpoint, model)
        path = os.path.join(resume_from_checkpoint, f"stoker_loader_rank{_rank()}.pt")
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{resume_from_checkpoint} has no {os.path.basename(path)}: it was not saved by a "
                                    "StokerTrainer, or by another number of ranks; the Loader cannot resume from it")
        self.train_loader.load_state_dict(torch.load(path, weights_only=False))
