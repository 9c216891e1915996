"""The trainer's data order: a seeded permutation per epoch (:func:`epoch_seed`), cut into
batches by :class:`EpochBatchSampler`, which resumes mid-epoch by skipping consumed batches."""

from __future__ import annotations

import math

import numpy as np
import torch
from torch.utils.data import Sampler


def epoch_seed(seed: int, epoch: int, stream: int = 0) -> int:
    """A 63-bit seed for ``(seed, epoch, stream)``, well mixed by NumPy's ``SeedSequence``.

    Distinct triples give unrelated seeds (unlike ``seed * 1000 + epoch``, which collides once
    epochs reach 1000).
    """
    state = np.random.SeedSequence([seed, epoch, stream]).generate_state(1, dtype=np.uint64)[0]
    return int(state) >> 1


class EpochBatchSampler(Sampler[list[int]]):
    """Batches of a seeded per-epoch permutation of a map-style dataset, resumable mid-epoch.

    Epoch ``e`` shuffles ``range(num_samples)`` with a ``torch.Generator`` seeded with
    ``epoch_seed(seed, e)`` and cuts it into batches of ``batch_size`` (the last one shorter
    unless ``drop_last``). With ``num_replicas > 1`` processes the batch list is padded, by
    repeating its first batches, to a multiple of ``num_replicas``, so that accelerate can deal
    batches round-robin without wrapping around on its own (which would not survive a resume).

    The sampler deliberately has no ``batch_size`` attribute: accelerate then treats its batches
    as given and does not re-split them.

    Args:
        num_samples: ``len(dataset)``.
        batch_size: examples per batch.
        seed: base seed (``TrainConfig.seed``).
        shuffle: ``False`` keeps the dataset order (evaluation-style passes).
        drop_last: drop the last, shorter batch.
        num_replicas: number of processes that share the batches.
    """

    def __init__(
        self,
        num_samples: int,
        batch_size: int,
        *,
        seed: int,
        shuffle: bool = True,
        drop_last: bool = False,
        num_replicas: int = 1,
    ) -> None:
        if num_samples < 1:
            raise ValueError(f"num_samples must be >= 1, got {num_samples}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if drop_last and num_samples < batch_size:
            raise ValueError(
                f"drop_last with {num_samples} samples < batch_size {batch_size} leaves no batch"
            )
        self.num_samples = num_samples
        self.samples_per_batch = batch_size
        self.seed = seed
        self.shuffle = shuffle
        self.drop_last = drop_last
        self.num_replicas = num_replicas
        self.order_generator = torch.Generator()
        self.epoch = 0
        self.skip_batches = 0

    @property
    def num_batches(self) -> int:
        """Batches in a full epoch, padding for ``num_replicas`` included."""
        if self.drop_last:
            n = self.num_samples // self.samples_per_batch
        else:
            n = math.ceil(self.num_samples / self.samples_per_batch)
        return math.ceil(n / self.num_replicas) * self.num_replicas

    def start_epoch(self, epoch: int, skip_batches: int = 0) -> None:
        """Select the permutation of ``epoch`` and skip its first ``skip_batches`` batches."""
        if not 0 <= skip_batches <= self.num_batches:
            raise ValueError(
                f"skip_batches must be in [0, {self.num_batches}], got {skip_batches}"
            )
        self.epoch = epoch
        self.skip_batches = skip_batches

    def permutation(self, epoch: int) -> torch.Tensor:
        """The order of the examples in ``epoch``: ``(num_samples,)`` int64."""
        if not self.shuffle:
            return torch.arange(self.num_samples)
        self.order_generator.manual_seed(epoch_seed(self.seed, epoch))
        return torch.randperm(self.num_samples, generator=self.order_generator)

    def batches(self, epoch: int) -> list[list[int]]:
        """Every batch of ``epoch`` (before skipping), padded for ``num_replicas``."""
        order = self.permutation(epoch).tolist()
        size = self.samples_per_batch
        batches = [order[i : i + size] for i in range(0, len(order), size)]
        if self.drop_last and len(batches[-1]) < size:
            batches.pop()
        padding = self.num_batches - len(batches)
        return batches + [batches[i % len(batches)] for i in range(padding)]

    def __iter__(self):
        yield from self.batches(self.epoch)[self.skip_batches :]

    def __len__(self) -> int:
        return self.num_batches - self.skip_batches


__all__ = ["EpochBatchSampler", "epoch_seed"]
