"""The examples in examples/, run as a user would (each in its own process,
against the real `stoker serve` of the session, on the CPU): Lightning,
torchrun DDP on 2 ranks, plain loops, Accelerate, today's recipes."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Callable, Dict, List, Optional

import pytest
import torch
from google.protobuf.json_format import MessageToDict

from helpers import TINY_N, collect, indices, loader

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
#: Generous: a slow, loaded 2-core machine imports torch and Lightning
#: slowly; a hang still ends as a failure.
TIMEOUT = 600


@pytest.fixture
def run_example(run_script) -> Callable[..., str]:
    """``run_example(args, cwd, tmpdir=None)`` runs an example in ``cwd``
    (with ``TMPDIR=tmpdir`` when given) and returns its output: in its own
    process, as `python ARGS` (conftest's run_script, which forks it from
    an interpreter that imported torch and the frameworks once)."""

    def run(args: List[str], cwd: Path, tmpdir: Optional[Path] = None) -> str:
        env = dict(os.environ)
        if tmpdir is not None:
            tmpdir.mkdir(exist_ok=True)
            env["TMPDIR"] = str(tmpdir)
        env["PYTHONPATH"] = os.pathsep.join([str(REPO / "python"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        env.setdefault("OMP_NUM_THREADS", "1")
        r = run_script(args, cwd=cwd, env=env, timeout=TIMEOUT)
        if r.returncode != 0:
            pytest.fail(f"{' '.join(args)} exited with {r.returncode}:\n{r.stdout}\n{r.stderr}")
        return r.stdout

    return run


def epoch_indices(server: str, epoch: int, batch_size: int, **kw) -> List[List[int]]:
    """Each batch's indices of ``epoch`` of a fresh loader (seed 0, as the
    examples): the order depends on the seed and the epoch, not on the
    transform."""
    with loader(server, batch_size=batch_size, return_indices=True, **kw) as ld:
        ld.set_epoch(epoch)
        return [b[2].tolist() for b in collect(ld)]


def loader_states(ckpt_dir: Path) -> Dict[int, dict]:
    """The loader state Lightning saved in each checkpoint, by global step."""
    out = {}
    for f in ckpt_dir.glob("*.ckpt"):
        ckpt = torch.load(f, weights_only=False)
        (state,) = ckpt["loops"]["fit_loop"]["state_dict"]["combined_loader"]
        out[int(ckpt["global_step"])] = state
    return out


def test_lightning(server: str, run_example, tmp_path: Path) -> None:
    common = ["--target", server, "--dataset", "tiny", "--epochs", "3", "--batch-size", "8", "--ckpt-every", "2"]
    # 48 images, batches of 8: 6 steps an epoch, a checkpoint every 2.
    run_example([str(EXAMPLES / "lightning_train.py"), *common, "--ckpt-dir", "a", "--report", "a.json"], tmp_path)
    steps = json.loads((tmp_path / "a.json").read_text())
    assert [(e, i) for e, i, _ in steps] == [(e, i) for e in range(3) for i in range(6)]
    for epoch in range(3):
        got = [ix for e, _, ix in steps if e == epoch]
        assert got == epoch_indices(server, epoch, 8)  # epoch e of the plan, not epoch 0 again
    firsts = [steps[6 * e][2] for e in range(3)]
    assert firsts[0] != firsts[1] and firsts[1] != firsts[2] and firsts[0] != firsts[2]

    # The loader state in Lightning's checkpoints names the right epoch;
    # after an epoch's last batch, the next one.
    states = loader_states(tmp_path / "a")
    assert sorted(states) == list(range(2, 19, 2))
    for step, state in states.items():
        assert (state["epoch"], state["batches_consumed"]) == divmod(step, 6), step

    # A checkpoint taken mid-epoch (epoch 1, after its batch 2) resumes at
    # the same batch: the rest of the run is the same batches.
    (mid,) = (tmp_path / "a").glob("epoch=1-step=8.ckpt")
    run_example([str(EXAMPLES / "lightning_train.py"), *common, "--ckpt-dir", "b", "--resume", str(mid),
                 "--report", "b.json"], tmp_path)
    resumed = json.loads((tmp_path / "b.json").read_text())
    assert resumed == steps[8:]

    # A new Loader every epoch (reload_dataloaders_every_n_epochs=1) starts
    # at epoch 0 by itself: Lightning's set_epoch on loader.sampler moves it.
    # Without --ckpt-dir, the checkpoints go to a new temporary directory,
    # named at the end, and nothing into the directory it runs in.
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    out = run_example([str(EXAMPLES / "lightning_train.py"), *common, "--reload", "--report", str(tmp_path / "c.json")],
                      cwd, tmpdir=tmp_path / "tmp")
    assert json.loads((tmp_path / "c.json").read_text()) == steps
    assert list(cwd.iterdir()) == []
    (ckpt_dir,) = (tmp_path / "tmp").glob("stoker-lightning-*")
    assert f"checkpoints in {ckpt_dir}" in out
    assert sorted(loader_states(ckpt_dir)) == list(range(2, 19, 2))


def test_torchrun_ddp(server: str, run_example, tmp_path: Path) -> None:
    run_example(["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                 str(EXAMPLES / "torchrun_ddp.py"), "--target", server, "--dataset", "tiny", "--epochs", "2",
                 "--batch-size", "5", "--out", "out"], tmp_path)
    ranks = [json.loads((tmp_path / "out" / f"rank{r}.json").read_text()) for r in range(2)]
    assert [(r["rank"], r["world_size"]) for r in ranks] == [(0, 2), (1, 2)]  # from the environment
    for epoch in range(2):
        shares = [[i for b in r["epochs"][epoch] for i in b] for r in ranks]
        # 24 samples each: 5 batches (the last of 4) on both ranks.
        assert [len(r["epochs"][epoch]) for r in ranks] == [5, 5]
        assert not set(shares[0]) & set(shares[1])  # disjoint
        assert sorted(shares[0] + shares[1]) == list(range(TINY_N))  # every index once
    assert ranks[0]["epochs"][0] != ranks[0]["epochs"][1]


def test_plain_loops(server: str, run_example, tmp_path: Path) -> None:
    out = run_example([str(EXAMPLES / "plain_loop.py"), "--target", server, "--dataset", "tiny",
                       "--batch-size", "8", "--report", "r.json"], tmp_path)
    assert "after the break: epoch 2, 2 batches taken" in out
    report = json.loads((tmp_path / "r.json").read_text())
    assert [(how, epoch, len(b)) for how, epoch, b in report] == [
        ("for", 0, 6), ("zip", 1, 6), ("break", 2, 2), ("after break", 3, 6)]
    for _, epoch, batches in report:
        assert batches == epoch_indices(server, epoch, 8)[: len(batches)]


def test_accelerate(server: str, run_example, tmp_path: Path) -> None:
    common = [str(EXAMPLES / "accelerate_train.py"), "--cpu", "--target", server, "--dataset", "tiny",
              "--epochs", "3", "--batch-size", "8"]
    # 9 steps (epoch 1, after its batch 2), save_state, stop; then resume.
    # Without --state-dir the state goes under the temporary directory,
    # nothing into the directory it runs in.
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    run_example([*common, "--save-at", "9", "--report", str(tmp_path / "a.json")], cwd, tmpdir=tmp_path / "tmp")
    assert list(cwd.iterdir()) == [] and (tmp_path / "tmp" / "stoker-accelerate-state").is_dir()
    run_example([*common, "--resume", "--report", str(tmp_path / "b.json")], cwd, tmpdir=tmp_path / "tmp")
    assert list(cwd.iterdir()) == []
    steps = json.loads((tmp_path / "a.json").read_text()) + json.loads((tmp_path / "b.json").read_text())
    want = [[e, ix] for e in range(3) for ix in epoch_indices(server, e, 8)]
    assert steps == want  # each epoch once, its own order, across the save and the resume


def _recipe_views() -> Dict[str, Dict[str, list]]:
    """Each recipe's views, as examples/recipes.py must build them: the
    presets' ops (test_from_torchvision.PRESET_OPS)."""
    from test_from_torchvision import PRESET_OPS

    from stoker import transforms as T

    dino_global2 = [*PRESET_OPS["dino-global"][:4], T.RandomApply([T.GaussianBlur(23, (0.1, 2.0))], p=0.1),
                    T.RandomSolarize(128, p=0.2)]
    views = {
        "tv-resnet50-v2": {"image": PRESET_OPS["tv-resnet50-v2"]},
        "deit": {"image": PRESET_OPS["deit"]},
        "simclr": {"view": PRESET_OPS["simclr-view"]},
        "dino": {"global1": PRESET_OPS["dino-global"], "global2": dino_global2, "local": PRESET_OPS["dino-local"]},
        "clip": {"image": PRESET_OPS["clip"]},
    }
    return {r: {v: _canon([MessageToDict(op) for op in T.to_spec(ops).ops]) for v, ops in vs.items()}
            for r, vs in views.items()}


def _canon(x):
    """Wire ops (as JSON) with ColorJitter's numbers as the ranges they
    mean: from_torchvision sends the ranges torchvision keeps."""
    if isinstance(x, list):
        return [_canon(v) for v in x]
    if not isinstance(x, dict):
        return x
    x = {k: _canon(v) for k, v in x.items()}
    if x.get("name") == "ColorJitter":
        for a in x.get("args", []):
            if "number" in a:
                v = a.pop("number")
                lo, hi = (-v, v) if a["name"] == "hue" else (max(1 - v, 0.0), 1 + v)
                a["numbers"] = {"values": [lo, hi]}
    return x


@pytest.mark.parametrize("recipe", ["tv-resnet50-v2", "deit", "simclr", "dino", "clip"])
def test_recipes(server: str, run_example, tmp_path: Path, recipe: str) -> None:
    run_example([str(EXAMPLES / "recipes.py"), "--target", server, "--dataset", "tiny", "--recipe", recipe,
                 "--steps", "3", "--batch-size", "8", "--report", "r.json"], tmp_path)
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["recipe"] == recipe and len(report["losses"]) == 3
    assert all(math.isfinite(x) for x in report["losses"])
    assert {v: _canon(r["ops"]) for v, r in report["views"].items()} == _recipe_views()[recipe]
    counts = {"simclr": {"view": 2}, "dino": {"global1": 1, "global2": 1, "local": 8}}
    assert {v: r["count"] for v, r in report["views"].items()} == counts.get(recipe, {"image": 1})
    imagenet = [[0.485, 0.456, 0.406], [0.229, 0.224, 0.225]]
    norms = {v: r["normalize"] for v, r in report["views"].items()}
    assert norms == {"simclr": {"view": None},  # its recipe has no Normalize
                     "clip": {"image": [[0.48145466, 0.4578275, 0.40821073], [0.26862954, 0.26130258, 0.27577711]]},
                     }.get(recipe, {v: imagenet for v in norms})


def test_clip_train(server: str, run_example, tmp_path: Path) -> None:
    """examples/clip_train.py over the session's ``clip`` shards (captions
    beside the images, no classes): every step's captions are its
    samples' own (by key), both epochs take every sample once (the two
    bad ones padded), and the loss is a number."""
    from conftest import CLIP_SAMPLES, clip_caption

    run_example([str(EXAMPLES / "clip_train.py"), "--target", server, "--dataset", "clip", "--epochs", "2",
                 "--batch-size", "5", "--size", "32", "--report", "r.json"], tmp_path)
    steps = json.loads((tmp_path / "r.json").read_text())
    for epoch in range(2):
        keys = [k for s in steps if s["epoch"] == epoch for k in s["keys"]]
        assert len(keys) == CLIP_SAMPLES + 1  # the key without an image padded too
        assert len(set(keys)) == CLIP_SAMPLES - 1  # the two bad samples' places hold others
    for s in steps:
        assert math.isfinite(s["loss"])
        for key, cap in zip(s["keys"], s["captions"]):
            assert bytes.fromhex(cap) == clip_caption(int(key.split("/")[1])), key


def test_vlm_sft_conversations(stoker_bin: Path, run_example, tmp_path: Path) -> None:
    """examples/vlm_sft.py --conversations: the same fine-tuning on a LLaVA
    file (and ShareGPT records in it, two of several images) over the
    committed photos, served as a conversation dataset: each batch's records
    are the text, a record of several images its placeholders in order."""
    from stoker._local import LocalServer

    photos = sorted((REPO / "testdata" / "photos").glob("*/*.jpg"))[:8]
    img = tmp_path / "images"
    img.mkdir()
    records = []
    for i, p in enumerate(photos):
        (img / f"{i}.jpg").write_bytes(p.read_bytes())
        if i % 2:
            records.append({"messages": [{"role": "user", "content": "<image>Where was this taken?"},
                                         {"role": "assistant", "content": p.parent.name}], "images": [f"{i}.jpg"]})
        else:
            records.append({"id": str(i), "image": f"{i}.jpg", "conversations": [
                {"from": "human", "value": "<image>\nWhat is in the image?"}, {"from": "gpt", "value": p.parent.name}]})
    records += [{"id": "two", "image": ["0.jpg", "3.jpg"], "conversations": [  # records of several images, whole
        {"from": "human", "value": "<image>\n<image>\nWhat are these?"}, {"from": "gpt", "value": "two photos"}]},
                {"messages": [{"role": "user", "content": "<image><image><image>Three?"},
                              {"role": "assistant", "content": "yes"}], "images": ["1.jpg", "2.jpg", "5.jpg"]}]
    (tmp_path / "sft.json").write_text(json.dumps(records))
    with LocalServer(str(stoker_bin), {"sft": str(img)}, workers=1,
                     args=["--annotations", f"sft={tmp_path / 'sft.json'}"], log_path=str(tmp_path / "server.log")) as srv:
        out = run_example([str(EXAMPLES / "vlm_sft.py"), "--target", srv.addr, "--dataset", "sft", "--conversations",
                           "--steps", "4", "--batch-size", "3", "--device", "cpu", "--report", "r.json"], tmp_path)
    report = json.loads((tmp_path / "r.json").read_text())
    assert len(report) == 4, out
    assert any(r["images"] > r["samples"] for r in report), report  # a record of several images trained on
    for r in report:
        assert math.isfinite(r["loss"]) and r["tokens"] > 0
        assert r["image_tokens"] == r["tokens"] and r["patches"] == 4 * r["tokens"], r


def test_vlm_sft(server: str, run_example, tmp_path: Path) -> None:
    """examples/vlm_sft.py: a small Qwen2-VL (from a config) fine-tuned a few
    steps on real photos from stoker (ragged batches, vision_inputs): each
    step's placeholders are the images' vision tokens, its patches merge_size**2
    of each, its loss finite."""
    out = run_example([str(EXAMPLES / "vlm_sft.py"), "--target", server, "--dataset", "eval", "--steps", "3",
                       "--batch-size", "3", "--device", "cpu", "--report", "r.json"], tmp_path)
    report = json.loads((tmp_path / "r.json").read_text())
    assert len(report) == 3, out
    for r in report:
        assert math.isfinite(r["loss"]) and r["tokens"] > 0
        assert r["image_tokens"] == r["tokens"] and r["patches"] == 4 * r["tokens"], r
