"""The field reader of config.json (``Fields``: a field by any of its names, else its class
default, reported as assumed; every field looked at is recorded, the rest refused by hfconfig)
and ``Geometry``, what the attention fields say before the layers are read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..core.text import short as _short
from .families.understood import Family
from .limits import cap_of, over_cap

# The names one recurrent-state field goes by across the Mamba families (MambaConfig,
# Mamba2Config, JambaConfig, FalconH1Config, NemotronHConfig...), in the order they are read:
# the first one set wins, the same for the cache (hfconfig) and the parameter count (params).
STATE_SIZE = ("ssm_state_size", "mamba_d_state", "state_size")
CONV_KERNEL = ("conv_kernel", "mamba_d_conv", "d_conv")
EXPAND = ("mamba_expand", "expand")


class Fields:
    """Config fields by any of their names, validated with messages that name the field."""

    def __init__(self, cfg: dict, defaults: dict):
        self.cfg = cfg
        self.defaults = defaults
        self.seen: set[str] = set()  # config fields looked at
        self.top: dict = cfg  # the whole config.json (a wrapper's, when cfg is its text_config)
        self.model_type = ""
        self.family: Family | None = None  # the model_type's record (kvcalc.config.families)
        self._defaults_used: dict[str, Any] = {}

    def has(self, *names: str) -> bool:
        """True when any of ``names`` is set, by the config or by its class default. A field
        whose presence decides the reading counts as read."""
        self.seen.update(names)
        return any(self.cfg.get(n) is not None or self._default(n) is not None for n in names)

    def _default(self, name: str) -> Any:
        """The class default of a field the config leaves out. A field written as null is not
        left out: the class then takes None, which each reader handles as the class does."""
        return None if name in self.cfg else self.defaults.get(name)

    def raw(self, *names: str, default: Any = None) -> Any:
        self.seen.update(names)
        for n in names:
            if self.cfg.get(n) is not None:
                return self.cfg[n]
        for n in names:
            if self._default(n) is not None:
                self._defaults_used[n] = self.defaults[n]
                return self.defaults[n]
        return default

    def obj(self, name: str) -> dict | None:
        """A sub-object such as MPT's attn_config, or None when absent."""
        value = self.raw(name)
        if value is not None and not isinstance(value, dict):
            raise ValueError(f"config field '{name}' must be an object")
        return value

    def defaults_used(self) -> list[tuple[str, Any]]:
        return [(k, v) for k, v in self._defaults_used.items() if k != "last_layer_full"]

    def unread(self) -> set[str]:
        return {k for k in set(self.cfg) - self.seen if self.cfg[k] is not None}

    def int(
        self,
        *names: str,
        default: Any = None,
        minimum: int = 1,
        required: bool = True,
        maximum: int | None = None,
    ):
        """A whole number from the first of ``names`` that is set, at least ``minimum`` and at
        most ``maximum`` (by default the cap of its kind of size, kvcalc.config.limits)."""
        value = self.raw(*names, default=default)
        label = " / ".join(names)
        if value is None:
            if required:
                raise ValueError(f"config field '{names[0]}' is missing (looked for {label})")
            return None
        integral = isinstance(value, float) and math.isfinite(value) and value == int(value)
        if isinstance(value, bool) or not (isinstance(value, int) or integral):
            raise ValueError(f"config field '{label}' must be a whole number, got {_short(value)}")
        value = int(value)
        if value < minimum:
            raise ValueError(
                f"config field '{label}' must be at least {minimum}, got {_short(value)}"
            )
        found = next((n for n in names if self.cfg.get(n) is not None), None) or next(
            (n for n in names if self._default(n) is not None), names[0]
        )
        refused = over_cap(found, value, cap_of(found) if maximum is None else maximum)
        if refused:
            raise ValueError(refused)
        return value

    def bool(self, name: str, default: bool) -> bool:
        value = self.raw(name, default=default)
        if not isinstance(value, bool):
            raise ValueError(f"config field '{name}' must be true or false, got {_short(value)}")
        return value


def per_layer(name: str, value: Any, n: int, allowed, said: str, verb: str = "list") -> list:
    """``value`` (config field ``name``): a list of one of ``allowed`` for each of ``n`` layers,
    else a ValueError that names the field and ``said``, the allowed values in words."""
    if (
        not isinstance(value, list)
        or len(value) != n
        or any(not isinstance(v, str) or v not in allowed for v in value)
    ):
        raise ValueError(f"config field '{name}' must {verb} {said} for each of the {n} layers")
    return value


def refuse_unknown(name: str, unknown: list[str]) -> None:
    """The keys of sub-object ``name`` that kvcalc does not understand, refused by name."""
    if unknown:
        raise ValueError(
            f"config field '{name}' has "
            + ", ".join(_short(u) for u in unknown)
            + ", which kvcalc does not understand"
        )


def whole(value: Any, label: str, cap: int) -> int:
    """``value`` (config field ``label``) when it is a whole number from 1 to ``cap``."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= cap:
        raise ValueError(f"config field '{label}' must be a whole number from 1 to {cap:,}")
    return value


@dataclass
class Geometry:
    hidden: int | None
    q_heads: int
    kv_heads: int
    head_dim: int
    notes: list = field(default_factory=list)
    assumptions: list = field(default_factory=list)
