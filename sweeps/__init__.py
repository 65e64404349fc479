"""Sweeps of the Transformer: specs, the Ray runner, the ``tsweep`` CLI, and ``load_sweep`` for notebooks."""

__all__ = ["Sweep", "load_sweep"]


def __getattr__(name: str):
    """``from sweeps import load_sweep``: the analysis stack (pandas, the verdict engine) is imported only then,
    not by every module of the package (the CLI and Ray workers import sweeps.* too)."""
    if name in __all__:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'sweeps' has no attribute {name!r}")
