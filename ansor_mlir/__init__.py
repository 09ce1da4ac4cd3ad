"""ansor-mlir: an Ansor-style auto-scheduler for linalg on IREE."""

__version__ = "0.1.0"

# `ansor_mlir.compile(model, target=..., log=...)` and `ansor_mlir.load_model(...)`, imported on first use so that
# `import ansor_mlir` stays cheap.
_API_NAMES = ("compile", "load_model")


def __getattr__(name: str):
    if name in _API_NAMES:
        from ansor_mlir import api

        return getattr(api, name)
    raise AttributeError(f"module 'ansor_mlir' has no attribute {name!r}")
