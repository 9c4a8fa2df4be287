#!/usr/bin/env python3
"""Supervised fine-tuning of a Qwen2-VL model, its images from stoker.

    bin/stoker serve --listen 127.0.0.1:7070 --dataset photos=testdata/photos &
    .venv/bin/python examples/vlm_sft.py --target 127.0.0.1:7070 --dataset photos --steps 5

The server decodes and resizes each image to its own size (the processor's
``smart_resize``, via ``stoker.transforms.from_hf``) and sends the batch
ragged, the images back to back; ``batch.vision_inputs(device)`` makes the
processor's ``pixel_values`` and ``image_grid_thw`` on the trainer's device.
With ``--conversations`` the dataset is a LLaVA or ShareGPT file served as
one (``--dataset sft=IMAGES --annotations sft=FILE.json``): each batch's
records come as the field ``json`` (a record of several images whole, its
images' placeholders one after another), and the first human turn is the
question, the first answer the reply. Without it the dataset is an
ImageFolder and the conversation synthetic ("What is in the image?",
answered with the image's class). The model here is a small Qwen2-VL built
from a config (random weights, no download), its text tokenized by bytes: with a real checkpoint,
load ``Qwen2VLForConditionalGeneration.from_pretrained`` and build the text
with its processor's ``apply_chat_template`` and tokenizer; the image side
stays as here. Each image's placeholder is ``grid_t * grid_h * grid_w /
merge_size**2`` image tokens, as the processor expands ``<|image_pad|>``.
"""
from __future__ import annotations

import argparse
import json
import math
from typing import Dict, List, Tuple

import torch
from transformers import Qwen2VLConfig, Qwen2VLForConditionalGeneration, Qwen2VLImageProcessor

import stoker

# The tiny model's special tokens (a byte tokenizer: ids 0..255 are bytes).
PAD, IMAGE, VIDEO, START, END, VOCAB = 256, 257, 258, 259, 260, 288


def tiny_model(merge: int) -> Qwen2VLForConditionalGeneration:
    cfg = Qwen2VLConfig(
        text_config=dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=8192,
                         rope_scaling={"type": "mrope", "mrope_section": [2, 3, 3]},
                         bos_token_id=None, eos_token_id=None, pad_token_id=PAD),
        vision_config=dict(depth=2, embed_dim=32, hidden_size=64, num_heads=4, mlp_ratio=2, patch_size=14,
                           spatial_merge_size=merge, temporal_patch_size=2, in_channels=3),
        image_token_id=IMAGE, video_token_id=VIDEO, vision_start_token_id=START, vision_end_token_id=END)
    return Qwen2VLForConditionalGeneration(cfg)


def conversation(tokens: List[int], question: str, answer: str) -> tuple:
    """A sample's input ids and labels: each of its images' placeholders
    (its vision tokens each), the question, the answer (the only tokens the
    loss counts)."""
    prompt = [x for n in tokens for x in [START] + [IMAGE] * n + [END]] + list(question.encode())
    reply = list(answer.encode())
    return prompt + reply, [-100] * len(prompt) + reply


def turns(record: bytes) -> Tuple[str, str]:
    """A LLaVA record's (question, answer): its first human and gpt turns;
    or a ShareGPT record's first user and assistant messages; the image
    placeholder taken out of the question (the model's own goes before)."""
    r = json.loads(record)
    if "conversations" in r:
        q = next(t["value"] for t in r["conversations"] if t["from"] == "human")
        a = next(t["value"] for t in r["conversations"] if t["from"] == "gpt")
    else:
        q = next(m["content"] for m in r["messages"] if m["role"] == "user")
        a = next(m["content"] for m in r["messages"] if m["role"] == "assistant")
    return q.replace("<image>", "").strip() + " ", a


def collate(grid: torch.Tensor, merge: int, qa: List[Tuple[str, str]], counts: List[int]) -> Dict[str, torch.Tensor]:
    """The text side of a batch: a sample a record of counts[i] images (in
    the grid's order), its question and answer qa[i]."""
    tokens = [int(t * h * w) // merge**2 for t, h, w in grid.tolist()]
    per, at = [], 0
    for n in counts:
        per.append(tokens[at:at + n])
        at += n
    ids, labels = zip(*(conversation(t, q, a) for t, (q, a) in zip(per, qa)))
    n = max(map(len, ids))
    input_ids = torch.full((len(ids), n), PAD)
    lab = torch.full((len(ids), n), -100)
    mask = torch.zeros((len(ids), n), dtype=torch.long)
    for i, (x, y) in enumerate(zip(ids, labels)):
        input_ids[i, : len(x)], lab[i, : len(y)], mask[i, : len(x)] = torch.tensor(x), torch.tensor(y), 1
    return {"input_ids": input_ids, "labels": lab, "attention_mask": mask, "mm_token_type_ids": (input_ids == IMAGE).long()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default="127.0.0.1:7070")
    ap.add_argument("--dataset", default="photos", help="an ImageFolder: each image's class is its answer")
    ap.add_argument("--conversations", action="store_true",
                    help="the dataset is a LLaVA or ShareGPT file (--annotations): its records' turns are the text")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--max-pixels", type=int, default=28 * 28 * 64, help="the processor's max_pixels (a small model: few tokens)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--report", help="write each step's loss and vision tokens here (JSON)")
    a = ap.parse_args()

    proc = Qwen2VLImageProcessor(min_pixels=56 * 56, max_pixels=a.max_pixels)
    merge = proc.merge_size
    classes = next(d for d in stoker.list_datasets(a.target) if d.name == a.dataset).classes
    fields = ("json",) if a.conversations else ()
    torch.manual_seed(0)
    model = tiny_model(merge).to(a.device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    report = []
    with stoker.Loader(a.target, a.dataset, transform=stoker.transforms.from_hf(proc), batch_size=a.batch_size,
                       fields=fields) as ld:
        step = 0
        while step < a.steps:
            for batch in ld:
                vis = batch.vision_inputs(device=a.device)  # pixel_values [sum of patches, 1176], image_grid_thw [N, 3]
                counts = [1] * len(vis["image_grid_thw"])
                if a.conversations:  # a record of several images comes whole: its text once, its images in order
                    qa = [turns(r) for r in batch.record_fields("json")]
                    if batch.images_per_record is not None:
                        counts = batch.images_per_record.tolist()
                else:
                    qa = [("What is in the image? ", classes[int(c)]) for c in batch.labels]
                text = collate(vis["image_grid_thw"].cpu(), merge, qa, counts)
                text = {k: v.to(a.device) for k, v in text.items()}
                out = model(**text, **vis)
                out.loss.backward()
                opt.step()
                opt.zero_grad()
                tokens = int(vis["image_grid_thw"].prod(1).sum()) // merge**2
                print(f"step {step}: loss {out.loss.item():.4f}, {len(batch.labels)} images, {tokens} vision tokens, "
                      f"{vis['pixel_values'].shape[0]} patches")
                report.append({"loss": out.loss.item(), "tokens": tokens, "patches": int(vis["pixel_values"].shape[0]),
                               "image_tokens": int((text["input_ids"] == IMAGE).sum()), "samples": len(qa),
                               "images": sum(counts)})
                step += 1
                if step == a.steps:
                    break
    assert all(math.isfinite(r["loss"]) for r in report)
    if a.report:
        with open(a.report, "w") as f:
            json.dump(report, f)


if __name__ == "__main__":
    main()
