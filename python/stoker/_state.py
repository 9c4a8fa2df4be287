"""Where a Loader is in its epoch, and resuming from there: the batches
taken (in order or as ready), what ``state_dict`` holds, and the resume
``load_state_dict`` computes from it, on the same world size or another
(elastic resume).

The arithmetic of an elastic resume follows the server's plan
(server/plan.go): rank ``r`` of world ``w`` takes positions ``r, r+w, …``
of the epoch's order after its first ``consumed`` positions, so when every
rank of world ``w`` took its first ``b`` batches of ``B`` samples, the job
took exactly the first ``consumed + b*B*w`` positions (at most all of them).
Under the block shuffle that order is the lockstep order of the contiguous
spans the epoch's first world size cut (one per rank), so a resume carries
that world size, ``epoch_world_size``, along with ``consumed``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

__all__ = ["MATCHED_PARAMS", "Progress", "Resume", "elastic_consumed", "make_state", "resume_from"]

#: Job parameters a state_dict must share with the Loader that loads it
#: (``rank`` and ``world_size`` may differ).
MATCHED_PARAMS = ("dataset", "transform", "batch_size", "seed", "shuffle", "shuffle_window", "drop_last", "layout",
                  "repeats", "stop_epoch", "stop_ops", "batch_tokens")


class Progress:
    """The batches of one epoch taken so far: :attr:`prefix`, the length of
    the unbroken run of batch numbers from 0 (everything before the resume
    point counts as taken), and :attr:`taken`, the numbers past it (as-ready
    mode only)."""

    __slots__ = ("prefix", "taken")

    def __init__(self, start: int = 0, taken: Iterable[int] = ()) -> None:
        self.prefix = int(start)
        self.taken = {int(k) for k in taken if int(k) >= self.prefix}
        self._advance()

    def take(self, number: int) -> None:
        """Records batch ``number`` as taken."""
        if number == self.prefix:
            self.prefix += 1
            self._advance()
        elif number > self.prefix:
            self.taken.add(number)

    def _advance(self) -> None:
        while self.prefix in self.taken:
            self.taken.discard(self.prefix)
            self.prefix += 1

    def taken_sorted(self) -> List[int]:
        return sorted(self.taken)


@dataclass(frozen=True)
class Resume:
    """Where an iteration starts, as OpenJob's resume fields say it."""

    epoch: int
    start_batch: int = 0
    skip_batches: Tuple[int, ...] = ()
    consumed: int = 0
    #: The dataset's fingerprint when the state was saved ("" unknown).
    fingerprint: str = ""
    #: The world size the epoch began with, when ``consumed`` counts
    #: positions of its block-shuffle spans (OpenJob.epoch_world_size);
    #: 0 when nothing was consumed: the new world's.
    epoch_world_size: int = 0
    #: A job cut by vision tokens resumed elastically: the epoch's resumes
    #: so far, (world size, steps its ranks took) pairs flat
    #: (OpenJob.token_resumes); consumed is then their batches, > 0.
    token_resumes: Tuple[int, ...] = ()


def elastic_consumed(
    consumed: int, batches: int, batch_size: int, world_size: int, dataset_size: Optional[int]
) -> int:
    """Positions of the epoch's order consumed when every rank of a world
    of ``world_size`` took its first ``batches`` batches of ``batch_size``
    after the first ``consumed`` positions; at most ``dataset_size`` when
    known (the server caps it too)."""
    n = int(consumed) + int(batches) * int(batch_size) * int(world_size)
    return min(n, int(dataset_size)) if dataset_size else n


def make_state(
    epoch: int,
    progress: Progress,
    consumed: int,
    params: Mapping[str, Any],
    fingerprint: str,
    dataset_size: int,
    in_order: bool,
    epoch_world_size: int = 0,
    token_resumes: Sequence[int] = (),
) -> Dict[str, Any]:
    """A state_dict: plain Python values, fit for ``torch.save`` or JSON.
    ``epoch_world_size`` is the world size the epoch began with (0: this
    loader's)."""
    sd: Dict[str, Any] = {
        "epoch": int(epoch),
        "batches_consumed": progress.prefix,
        "taken": progress.taken_sorted(),
        "consumed": int(consumed),
        "in_order": bool(in_order),
        "epoch_world_size": int(epoch_world_size) or int(params["world_size"]),
        "token_resumes": [int(x) for x in token_resumes],
    }
    sd.update(params)
    sd["fingerprint"] = fingerprint
    sd["dataset_size"] = int(dataset_size)
    return sd


def resume_from(
    state: Mapping[str, Any], params: Mapping[str, Any], dataset_size: Optional[int] = None
) -> Resume:
    """The resume a Loader whose job parameters are ``params`` makes of
    ``state`` (see Loader.load_state_dict). ``dataset_size`` caps an
    elastic resume's ``consumed`` when the state does not say it. Raises
    ValueError if the state is from another job."""
    diff = [k for k in MATCHED_PARAMS if k in state and k in params and state[k] != params[k]]
    if diff:
        raise ValueError(
            "state_dict is from a different job: "
            + ", ".join(f"{k}: saved {state[k]!r}, now {params[k]!r}" for k in diff)
        )
    epoch = int(state["epoch"])
    batches = int(state["batches_consumed"])
    consumed = int(state.get("consumed", 0) or 0)
    world, rank = int(params["world_size"]), int(params["rank"])
    saved_world = int(state.get("world_size", world))
    saved_rank = int(state.get("rank", rank))
    fingerprint = state.get("fingerprint", "") or ""
    # The world size the saved epoch began with: the saved one's, unless
    # that was itself resumed elastically (older states do not say).
    began = int(state.get("epoch_world_size", 0) or 0) or saved_world
    if epoch < 0 or batches < 0 or consumed < 0 or saved_world < 1 or began < 1:
        raise ValueError(f"state_dict has invalid values: epoch {epoch}, batches_consumed {batches}, "
                         f"consumed {consumed}, world_size {saved_world}, epoch_world_size {began}")
    resumes = tuple(int(x) for x in state.get("token_resumes", ()) or ())
    if len(resumes) % 2 or any(x < 0 for x in resumes):
        raise ValueError(f"state_dict has invalid token_resumes {list(resumes)[:8]}: want (world size, steps) pairs")
    if params.get("batch_tokens") and saved_world != world:
        # Cut by vision tokens: the steps each rank of the saved world took
        # are one more resume of the epoch, which the server packs after
        # (its batches are not positions of an order).
        resumes += (saved_world, batches)
        done = consumed + batches * saved_world
        return Resume(epoch, 0, (), max(done, 1), fingerprint, began, token_resumes=resumes)
    if saved_world == world:
        taken = tuple(sorted({int(k) for k in state.get("taken", ()) if int(k) > batches}))
        if saved_rank != rank and (taken or not state.get("in_order", True)):
            raise ValueError(
                f"this state_dict was saved by rank {saved_rank} in as-ready mode (in_order=False), whose "
                f"batches taken are its own: load each rank's own state_dict into rank {rank}"
            )
        return Resume(epoch, batches, taken, consumed, fingerprint, began if consumed else 0, token_resumes=resumes)
    size = int(state.get("dataset_size", 0) or 0) or dataset_size
    consumed = elastic_consumed(consumed, batches, int(params["batch_size"]), saved_world, size)
    return Resume(epoch, 0, (), consumed, fingerprint, began if consumed else 0)
