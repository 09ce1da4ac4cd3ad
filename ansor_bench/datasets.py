"""The repository's data directory and its manifest.

`data/MANIFEST.json` lists every dataset file (paths relative to `data/`):
what it is, the command that produced it, its record count and sha256, and
the model files it trains. Retraining the shipped cost model reads the list
from here, so the model is rebuilt from exactly the logs it was built from,
and a log that changed on disk is refused instead of silently used.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from ansor_mlir.errors import AnsorError

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "data"
MANIFEST = DATA / "MANIFEST.json"
SHIPPED_MODEL = "ansor_mlir/data/cost_model.json"


@dataclass(frozen=True)
class DataFile:
    """One manifest entry."""

    path: str
    kind: str
    what: str
    produced_by: str
    records: int
    sha256: str
    trains: tuple[str, ...] = ()
    # The LLVM CPU (`--iree-llvmcpu-target-cpu`) the records were measured on, for logs whose records carry no
    # fingerprint (schema 2); "" when the records name it.
    cpu: str = ""


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def count_records(path: Path) -> int:
    """Records of a JSON-lines file: its non-blank lines (counted without parsing, so any schema version)."""
    return sum(1 for line in path.read_text().splitlines() if line.strip())


def load_manifest(manifest: Path = MANIFEST) -> tuple[DataFile, ...]:
    try:
        entries = json.loads(manifest.read_text())["files"]
        return tuple(DataFile(**{**e, "trains": tuple(e.get("trains", ()))}) for e in entries)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise AnsorError(f"{manifest}: not a readable data manifest ({exc}); restore it from git") from None


def problem(entry: DataFile, root: Path = DATA) -> str | None:
    """Why the file on disk does not match its manifest entry, or None when it does."""
    path = root / entry.path
    if not path.is_file():
        return f"{entry.path}: listed in the manifest but missing"
    if (digest := sha256_of(path)) != entry.sha256:
        return f"{entry.path}: sha256 {digest[:12]}... differs from the manifest's {entry.sha256[:12]}..."
    if (count := count_records(path)) != entry.records:
        return f"{entry.path}: {count} records, the manifest says {entry.records}"
    return None


def training_logs(model: str = SHIPPED_MODEL, manifest: Path = MANIFEST) -> list[Path]:
    """The verified logs the manifest says train `model` (a repository-relative path)."""
    return list(training_log_cpus(model, manifest))


def training_log_cpus(model: str = SHIPPED_MODEL, manifest: Path = MANIFEST) -> dict[Path, str]:
    """The verified logs the manifest says train `model`, each with the CPU its entry names ("" for none)."""
    root = manifest.parent
    entries = [e for e in load_manifest(manifest) if model in e.trains]
    if not entries:
        raise AnsorError(f"{manifest}: no file trains {model}; list its logs there or pass --logs")
    problems = [p for e in entries if (p := problem(e, root))]
    if problems:
        raise AnsorError(f"{manifest}: {'; '.join(problems)}; restore the file or update its entry")
    return {root / e.path: e.cpu for e in entries}
