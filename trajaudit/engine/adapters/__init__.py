"""Trace adapters: one registered unit per input format, with auto-detection.

Use :func:`default_adapters` for the registry of built-in formats, in detection order.
"""

from __future__ import annotations

from trajaudit.engine.adapters.base import Adapter, LoadOptions, Sniff
from trajaudit.engine.adapters.ir import IRAdapter
from trajaudit.engine.adapters.mapping import MappingAdapter
from trajaudit.engine.adapters.openai_chat import OpenAIChatAdapter
from trajaudit.engine.adapters.tau import TauAdapter
from trajaudit.engine.adapters.who_and_when import MagenticAdapter, WhoAndWhenAdapter
from trajaudit.registry import Registry


def default_adapters() -> Registry[Adapter]:
    """A fresh registry of the built-in adapters, in auto-detection order (most specific first)."""
    reg: Registry[Adapter] = Registry("format")
    for a in (IRAdapter(), TauAdapter(), WhoAndWhenAdapter(), OpenAIChatAdapter(), MagenticAdapter()):
        reg.register(a.name, a)
    return reg


__all__ = ["Adapter", "LoadOptions", "MappingAdapter", "Sniff", "default_adapters"]
