"""stoker.hf.StokerTrainer: a transformers.Trainer run of a few steps from a
stoker Loader (the real server), and a resume from its checkpoint that
continues with the batches the uninterrupted run had."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from helpers import loader
from stoker import transforms as T

from stoker import hf  # pinned in requirements-dev.txt: a missing one fails, never skips

MEAN, STD = (0.5, 0.5, 0.5), (0.25, 0.25, 0.25)


def _model():
    from transformers import ResNetConfig, ResNetForImageClassification

    torch.manual_seed(0)
    cfg = ResNetConfig(num_channels=3, embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], num_labels=3)
    return ResNetForImageClassification(cfg)


def _trainer(server: str, out: Path, max_steps: int):
    from transformers import TrainingArguments

    ld = loader(server, transform=T.Compose([T.RandomResizedCrop(32), T.RandomHorizontalFlip()]), batch_size=8,
                seed=3, return_indices=True)
    args = TrainingArguments(output_dir=str(out), max_steps=max_steps, save_steps=2, save_strategy="steps",
                             per_device_train_batch_size=8, learning_rate=0.01, logging_steps=1, report_to=[],
                             use_cpu=True, dataloader_num_workers=0, seed=0, disable_tqdm=True)
    return hf.StokerTrainer(model=_model(), args=args, train_loader=ld, mean=MEAN, std=STD), ld


def test_trainer_steps_and_resume(server: str, tmp_path: Path) -> None:
    tr, ld = _trainer(server, tmp_path / "run", 8)
    with ld:
        out = tr.train()
    assert out.global_step == 8 and math.isfinite(out.training_loss), out
    full = tr.stoker_batches.seen
    # 48 samples at 8 a batch: 6 batches an epoch, then the next epoch's.
    assert [e for e, _ in full] == [0] * 6 + [1] * 2, full
    assert sorted(i for e, b in full[:6] for i in b) == list(range(48))
    assert (tmp_path / "run" / "checkpoint-4" / "stoker_loader_rank0.pt").is_file()

    # A new process's trainer, resumed at step 4: the batches of steps 5-8.
    tr2, ld2 = _trainer(server, tmp_path / "run", 8)
    with ld2:
        out2 = tr2.train(resume_from_checkpoint=str(tmp_path / "run" / "checkpoint-4"))
    assert out2.global_step == 8
    assert tr2.stoker_batches.seen == full[4:], (tr2.stoker_batches.seen, full[4:])


def test_images_normalized_on_the_device(server: str, tmp_path: Path) -> None:
    """The model sees (x / 255 - mean) / std of the uint8 batch."""
    tr, ld = _trainer(server, tmp_path / "n", 1)
    with ld:
        batch = next(iter(tr.get_train_dataloader()))
        assert batch["pixel_values"].dtype == torch.uint8
        x = tr._prepare_inputs(dict(batch))["pixel_values"]
    want = (batch["pixel_values"].float() / 255 - torch.tensor(MEAN).view(1, 3, 1, 1)) / torch.tensor(STD).view(1, 3, 1, 1)
    assert x.dtype == torch.float32 and torch.allclose(x, want)
    assert torch.equal(batch["labels"], batch["labels"].long())


def test_resume_from_a_foreign_checkpoint_is_refused(server: str, tmp_path: Path) -> None:
    tr, ld = _trainer(server, tmp_path / "x", 2)
    with ld:
        tr.train()
    (tmp_path / "x" / "checkpoint-2" / "stoker_loader_rank0.pt").unlink()
    tr2, ld2 = _trainer(server, tmp_path / "x", 4)
    with ld2, pytest.raises(FileNotFoundError, match="stoker_loader_rank0.pt"):
        tr2.train(resume_from_checkpoint=str(tmp_path / "x" / "checkpoint-2"))
