#!/usr/bin/env python3
"""CLIP-style training on image-text WebDataset shards: the images come
augmented from stoker, their captions with them, and the captions are
tokenized here, in the trainer, as open_clip does.

    # shards of KEY.jpg + KEY.txt (+ KEY.json), no .cls: LAION's, DataComp's,
    # or your own (webdataset's ShardWriter, img2dataset)
    bin/stoker serve --listen 127.0.0.1:7070 --dataset pairs=/data/pairs
    python examples/clip_train.py --target 127.0.0.1:7070 --dataset pairs

stoker.Loader(..., fields=("txt", "json", "__key__")) sends each sample's
caption, metadata and key beside its pixels; batch.fields["txt"][i] is
sample i's caption as the shard holds it (bytes, not decoded; None when a
sample has none). The dataset has no classes: its labels are -1, unused
here. The tokenizer is a byte-level one of a few lines (each UTF-8 byte a
token, as ByT5's), so the example needs nothing from the network; swap in
open_clip's (open_clip.get_tokenizer("ViT-B-32")) for real training.
"""
from __future__ import annotations

import argparse
import json
import math
from typing import List, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

import stoker
from stoker import transforms as T

#: Tokens per caption (open_clip's context length is 77).
CONTEXT = 64
#: Byte values 0..255, then padding, start and end.
PAD, BOS, EOS = 256, 257, 258
VOCAB = 259


def tokenize(captions: List[Optional[bytes]]) -> torch.Tensor:
    """Byte-level tokens of each caption, [B, CONTEXT]: start, the
    caption's bytes (cut to fit), end, padding. A caption in invalid UTF-8
    is tokenized as the bytes it is; a sample without one gets start and
    end only."""
    out = torch.full((len(captions), CONTEXT), PAD, dtype=torch.long)
    for i, c in enumerate(captions):
        ids = [BOS, *(c or b"")[: CONTEXT - 2], EOS]
        out[i, : len(ids)] = torch.tensor(ids)
    return out


class TinyCLIP(nn.Module):
    """An image tower and a text tower into one embedding space, with
    CLIP's learned temperature."""

    def __init__(self, dim: int = 64) -> None:
        super().__init__()
        self.image = nn.Sequential(
            nn.Conv2d(3, 32, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, dim))
        self.embed = nn.Embedding(VOCAB, dim, padding_idx=PAD)
        self.text = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, dim))
        self.logit_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07)))

    def forward(self, images: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        img = F.normalize(self.image(images), dim=-1)
        mask = (tokens != PAD).unsqueeze(-1).float()
        txt = (self.embed(tokens) * mask).sum(1) / mask.sum(1)
        txt = F.normalize(self.text(txt), dim=-1)
        logits = self.logit_scale.exp().clamp(max=100) * img @ txt.t()
        target = torch.arange(len(logits))
        return (F.cross_entropy(logits, target) + F.cross_entropy(logits.t(), target)) / 2


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default="127.0.0.1:7070")
    ap.add_argument("--dataset", default="pairs")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--size", type=int, default=224, help="the crop's side (open_clip trains at 224)")
    ap.add_argument("--report", help="write each step's epoch, keys, captions and loss here (JSON)")
    a = ap.parse_args()

    # open_clip's training transform: a RandomResizedCrop of scale
    # (0.9, 1.0), bicubic; Normalize on the GPU (stoker.normalize).
    transform = T.Compose([T.RandomResizedCrop(a.size, scale=(0.9, 1.0), interpolation="bicubic")])
    loader = stoker.Loader(a.target, a.dataset, transform=transform, batch_size=a.batch_size,
                           shuffle="block", fields=("txt", "json", "__key__"))
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = TinyCLIP().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    report = []
    with loader:
        for epoch in range(a.epochs):
            loader.set_epoch(epoch)
            for b in loader:
                images = stoker.normalize(b.images.to(device, non_blocking=True))
                tokens = tokenize(b.fields["txt"]).to(device)
                loss = model(images, tokens)
                opt.zero_grad()
                loss.backward()
                opt.step()
                # The metadata, when a sample has it: img2dataset's .json
                # has the caption again, the URL, the original size.
                meta = [json.loads(m) if m is not None else None for m in b.fields["json"]]
                report.append({
                    "epoch": epoch,
                    "keys": [k.decode() for k in b.fields["__key__"]],
                    "captions": [c.hex() if c is not None else None for c in b.fields["txt"]],
                    "with_meta": sum(m is not None for m in meta),
                    "loss": float(loss),
                })
            print(f"epoch {epoch}: {len(report)} steps, loss {report[-1]['loss']:.3f}, "
                  f"{loader.stats.sample_errors} sample errors")
    if a.report:
        with open(a.report, "w") as f:
            json.dump(report, f)


if __name__ == "__main__":
    main()
