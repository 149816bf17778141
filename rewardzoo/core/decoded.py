"""A sample's pixels to come from its latent: the handle the decode stage (:mod:`rewardzoo.core.decode`) puts in a
sample's ``image`` or ``video``, read by the field converters (:mod:`rewardzoo.core.fields`). Light: no torch, no
VAE imported here."""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["DecodeBatch", "DecodedLatent", "pixels_of"]


class DecodeBatch:
    """The latents of one batch for one decoder; the first read decodes them all (once, thread-safe)."""

    def __init__(self, decoder: Any) -> None:
        self.decoder = decoder
        self.latents: list[Any] = []
        self.pixels: list[Any] | None = None
        self._lock = threading.Lock()

    def add(self, latent: Any) -> DecodedLatent | None:
        """The handle of ``latent``'s pixels to come; None once the batch is decoded (start another)."""
        with self._lock:
            if self.pixels is not None:
                return None
            self.latents.append(latent)
            return DecodedLatent(self, len(self.latents) - 1)

    def get(self, index: int) -> Any:
        with self._lock:
            if self.pixels is None:
                self.pixels = self.decoder.decode(self.latents)
                self.latents = []
            return self.pixels[index]


class DecodedLatent:
    """A sample's pixels to come from its latent (what :meth:`~rewardzoo.core.decode.LatentDecoder.attach` puts in ``image`` or
    ``video``): :meth:`pixels` decodes its batch on first use (see the module docstring)."""

    __slots__ = ("_batch", "_index")

    def __init__(self, batch: DecodeBatch, index: int) -> None:
        self._batch, self._index = batch, index

    def pixels(self) -> Any:
        """The decoded pixels: float32 ``(3, H, W)`` or ``(T, 3, H, W)`` in [0, 1], on the CPU."""
        return self._batch.get(self._index)

    def __repr__(self) -> str:
        return f"DecodedLatent({self._index} of a batch for {self._batch.decoder!r})"

    def __reduce__(self) -> Any:  # never pickled with its VAE: what travels are the pixels
        return (_identity, (self.pixels(),))


def _identity(value: Any) -> Any:
    return value


def pixels_of(value: Any) -> Any:
    """``value``'s decoded pixels when it is a :class:`DecodedLatent`, else ``value`` (the field converters)."""
    return value.pixels() if isinstance(value, DecodedLatent) else value
