"""The trajectory IR and how runs are read: text decoding, format detection, loading, adapters."""

from trajaudit.engine.trace.adapters import Adapter, LoadOptions, MappingAdapter, default_adapters
from trajaudit.engine.trace.ir import Source, Step, ToolCall, ToolOutput, Trajectory, renumbered
from trajaudit.engine.trace.loader import LoadResult, iter_load, load, load_many, load_path

__all__ = ["Adapter", "LoadOptions", "LoadResult", "MappingAdapter", "Source", "Step", "ToolCall", "ToolOutput",
           "Trajectory", "default_adapters", "iter_load", "load", "load_many", "load_path", "renumbered"]
