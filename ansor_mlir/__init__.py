"""ansor-mlir: an Ansor-style auto-scheduler for linalg on IREE."""

__version__ = "0.1.0"
