"""stoker.Dataset: a Loader as a torch IterableDataset.

For code built around ``torch.utils.data.DataLoader``::

    ds = stoker.Dataset("host:port", "imagenet", batch_size=256)
    dl = torch.utils.data.DataLoader(ds, batch_size=None)

The batches are made by the server, so DataLoader workers add nothing but a
process hop: use ``num_workers=0`` (the default). With one worker the loader
runs in the worker process, so :meth:`state_dict` and :attr:`loader` in the
main process do not see its progress.

Epochs follow :class:`stoker.Loader`'s rule: each iteration of the
DataLoader is the epoch after the last one, also when the loop stops at
``len(dataloader)`` batches (Lightning does) or breaks early;
:meth:`set_epoch` chooses one.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, Tuple

import torch
import torch.utils.data

from stoker.loader import Loader

__all__ = ["Dataset"]


class Dataset(torch.utils.data.IterableDataset):
    """An IterableDataset that yields a :class:`stoker.Loader`'s batches.

    Takes the same arguments as :class:`stoker.Loader`. Iterate it through
    ``DataLoader(dataset, batch_size=None)``: its items are whole batches.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()
        # No channel here: a Loader makes its channel inside __iter__, after
        # any fork.
        self.loader = Loader(*args, **kwargs)

    def __iter__(self) -> Iterator[Tuple[torch.Tensor, ...]]:
        info = torch.utils.data.get_worker_info()
        if info is not None and info.num_workers > 1:
            raise RuntimeError(
                "stoker.Dataset: the server makes the batches; use DataLoader(num_workers=0) "
                f"(got num_workers={info.num_workers}, which would deliver every batch "
                f"{info.num_workers} times)"
            )
        return iter(self.loader)

    def __len__(self) -> int:
        return len(self.loader)

    def set_epoch(self, epoch: int) -> None:
        """See :meth:`stoker.Loader.set_epoch`."""
        self.loader.set_epoch(epoch)

    def state_dict(self) -> Dict[str, Any]:
        """See :meth:`stoker.Loader.state_dict`."""
        return self.loader.state_dict()

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """See :meth:`stoker.Loader.load_state_dict`."""
        self.loader.load_state_dict(state)

    def close(self) -> None:
        """See :meth:`stoker.Loader.close`."""
        self.loader.close()
