"""A batch of built programs as files: what a host reached only by copying files needs to measure them.

A bundle is a directory, or one `.zip` file, holding a `manifest.json`, the
programs (`programs/*.vmfb`) and the arrays (`arrays/*.npy`: inputs and
reference outputs, each stored once however many programs share it). Each
item of the manifest is one `RunInput` (program, function, inputs,
references) under an id, plus an opaque `record` the exporting side turns
back into a log record when the results come home. Reading needs numpy and
the standard library only: the measuring host has no compiler.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from dataclasses import dataclass
from pathlib import Path

from ansor_mlir.errors import AnsorError
from ansor_mlir.measure.builder import BuiltProgram
from ansor_mlir.measure.runner import RunInput

MANIFEST = "manifest.json"
FORMAT = "ansor-mlir-batch"
FORMAT_VERSION = 1


@dataclass(frozen=True)
class BatchItem:
    """One program to measure: its run input, and what the exporter needs to log its result."""

    id: str
    run: RunInput
    record: dict


@dataclass(frozen=True)
class Batch:
    """Programs for one target, to be timed with `threads` runtime threads."""

    target: str
    threads: int
    items: tuple[BatchItem, ...]


def write_batch(path: Path, batch: Batch) -> None:
    """Write `batch` to `path`: a `.zip` file, or else a directory (created; must not hold another batch)."""
    files: dict[str, bytes] = {}

    def stored(folder: str, suffix: str, data: bytes) -> str:
        name = f"{folder}/{hashlib.blake2b(data, digest_size=16).hexdigest()}{suffix}"
        files[name] = data
        return name

    items = []
    for item in batch.items:
        run = item.run
        items.append({
            "id": item.id,
            "program": stored("programs", ".vmfb", run.program.vmfb),
            "function": run.program.function,
            "inputs": [stored("arrays", ".npy", data) for data in run.inputs],
            "references": [stored("arrays", ".npy", data) for data in run.references or ()],
            "expected_s": run.expected_s,
            "record": item.record,
        })
    manifest = {"format": FORMAT, "version": FORMAT_VERSION, "target": batch.target, "threads": batch.threads,
                "items": items}
    files[MANIFEST] = json.dumps(manifest, indent=1, sort_keys=True).encode()
    try:
        if path.suffix == ".zip":
            with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
                for name, data in sorted(files.items()):
                    archive.writestr(name, data)
            return
        if (path / MANIFEST).exists():
            raise AnsorError(f"{path} already holds a batch: export to a new directory or a .zip file")
        for name, data in files.items():
            (path / name).parent.mkdir(parents=True, exist_ok=True)
            (path / name).write_bytes(data)
    except OSError as exc:
        raise AnsorError(f"cannot write batch {path}: {exc.strerror or exc}") from None


def read_batch(path: Path) -> Batch:
    """The batch in a `.zip` file or a directory; a malformed one is an `AnsorError` naming what is wrong."""
    try:
        if path.is_file():
            with zipfile.ZipFile(path) as archive:
                files = {name: archive.read(name) for name in archive.namelist()}
            read = files.__getitem__
        elif (path / MANIFEST).is_file():
            def read(name: str) -> bytes:
                if ".." in Path(name).parts:
                    raise KeyError(name)
                return (path / name).read_bytes()
        else:
            raise AnsorError(f"{path}: not a batch (a .zip file or a directory with {MANIFEST})")
        manifest = json.loads(read(MANIFEST))
        if manifest.get("format") != FORMAT or manifest.get("version") != FORMAT_VERSION:
            raise AnsorError(f"{path}: not an {FORMAT} v{FORMAT_VERSION} manifest")
        items = tuple(
            BatchItem(
                str(entry["id"]),
                RunInput(BuiltProgram(read(entry["program"]), str(entry["function"])),
                         tuple(read(name) for name in entry["inputs"]),
                         tuple(read(name) for name in entry["references"]) or None,
                         expected_s=entry.get("expected_s")),
                dict(entry["record"]),
            )
            for entry in manifest["items"]
        )
        return Batch(str(manifest["target"]), int(manifest["threads"]), items)
    except AnsorError:
        raise
    except (OSError, KeyError, TypeError, ValueError, zipfile.BadZipFile) as exc:
        raise AnsorError(f"{path}: unreadable batch ({type(exc).__name__}: {exc}): export it again") from None
