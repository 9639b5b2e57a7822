"""What every part of Chetana is built from: a config and priors (each an object, a plain
mapping, or None for the defaults; resolved and validated once, here) and an event callback.
Bhava, Dhyana, Atma-Darshana, Sankalpa and the controller share this constructor and lay out
only their own fresh state in `_start`."""

from __future__ import annotations

from .config import ConfigLike, PriorsLike, resolve_config, resolve_priors
from .events import EventCallback

__all__ = ["Subsystem"]


class Subsystem:
    """Base of the four subsystems and the controller: `Cls(config, on_event, priors)`.

    `config` and `priors` are resolved first, then `_start()` lays out the fresh state, then
    `on_event` is set: the controller's `on_event` is a property that rewires the subsystems
    its `_start` made, so each subclass declares the `on_event` slot (or property) itself.
    """

    __slots__ = ("config", "priors")

    on_event: EventCallback | None

    def __init__(
        self,
        config: ConfigLike = None,
        on_event: EventCallback | None = None,
        priors: PriorsLike = None,
    ) -> None:
        self.config = resolve_config(config)
        self.priors = resolve_priors(priors)
        self._start()
        self.on_event = on_event

    def _start(self) -> None:
        """Lay out the fresh state from `self.config` and `self.priors`."""
