"""data/MANIFEST.json describes the data directory exactly, and names the logs of the shipped cost model."""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from pathlib import Path

import pytest

import ansor_mlir
from ansor_bench.datasets import DATA, MANIFEST, REPO, SHIPPED_MODEL, load_manifest, problem, training_logs
from ansor_mlir.errors import AnsorError
from ansor_mlir.model.registry import PRETRAINED


def test_every_listed_file_matches_its_count_and_hash():
    entries = load_manifest()
    assert entries
    assert [p for e in entries if (p := problem(e))] == []
    for entry in entries:
        assert entry.kind and entry.what and entry.produced_by


def test_every_data_file_is_listed():
    listed = {e.path for e in load_manifest()}
    on_disk = {str(p.relative_to(DATA)) for p in DATA.rglob("*") if p.is_file() and p != MANIFEST}
    assert on_disk == listed


def test_the_shipped_model_is_where_the_package_loads_it_and_its_logs_are_listed():
    assert REPO / SHIPPED_MODEL == Path(ansor_mlir.__file__).parent / "data" / PRETRAINED
    logs = training_logs()
    assert len(logs) == 179 and all(p.is_file() for p in logs)
    assert set(json.loads(MANIFEST.read_text())["models"]) == {SHIPPED_MODEL}


def test_a_changed_log_is_refused(tmp_path):
    entry = load_manifest()[0]
    (tmp_path / entry.path).parent.mkdir(parents=True)
    (tmp_path / entry.path).write_text((DATA / entry.path).read_text() + "{}\n")
    manifest = tmp_path / "MANIFEST.json"
    manifest.write_text(json.dumps({"files": [{**asdict(entry), "trains": list(entry.trains)}]}))
    assert "sha256" in problem(entry, tmp_path)
    with pytest.raises(AnsorError, match="sha256"):
        training_logs(manifest=manifest)
    with pytest.raises(AnsorError, match="no file trains"):
        training_logs("other/model.json", manifest=manifest)


def test_training_featurizes_each_record_for_the_cpu_it_was_measured_on():
    """A log from an AVX-512 host trained as this host's (an AVX2 Zen 3) taught the model 8-lane programs
    that were 16-lane ones; records now carry their CPU (fingerprint, or the manifest's `cpu`)."""
    from ansor_bench.datasets import load_samples
    from ansor_bench.model_quality import training_set
    from ansor_mlir.core.target import detect_host
    from ansor_mlir.model.program_features import ProgramFeatures

    extractor = ProgramFeatures()
    log = DATA / "logs" / "search" / "GMM(1,128,128,128)_random.jsonl"
    assert next(e.cpu for e in load_manifest() if e.path == str(log.relative_to(DATA))) == "x86-64-v4"
    width = extractor.names.index("target_vector_bytes")
    for cpu, vector_bytes in (("x86-64-v4", 64), ("znver3", 32)):
        (samples,) = load_samples({log: cpu}, detect_host(), extractor)
        assert samples.host == cpu and len(samples.times) > 100 and samples.kind == "contraction_3p1r"
        assert {round(float(v), 4) for v in samples.features[:, width]} == {round(math.log2(1 + vector_bytes), 4)}
    # One task measured on two CPUs: two groups, each labelled against its own best time.
    avx2_log = DATA / "logs" / "search_avx2" / "GMM(1,128,128,128)_random.jsonl"
    both = load_samples({log: "x86-64-v4", avx2_log: "znver3"}, detect_host(), extractor)
    assert sorted(s.host for s in both) == ["x86-64-v4", "znver3"]
    assert sorted(key.split("/")[0] for key in training_set(both).tasks) == ["x86-64-v4", "znver3"]


def test_a_grown_dataset_is_listed_with_its_host_and_tasks(tmp_path):
    """`tools/grow_dataset.py --manifest` lists each log (training the shipped model), the task list and the host."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("grow_dataset", REPO / "tools" / "grow_dataset.py")
    tool = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = tool  # its dataclasses look their module up
    spec.loader.exec_module(tool)
    source = DATA / "logs" / "search" / "GMM(1,128,128,128)_random.jsonl"
    out = tmp_path / "logs" / "dataset" / "host"
    out.mkdir(parents=True)
    (out / "GMM(1,128,128,128).random.jsonl").write_text(source.read_text())
    (out / "tasks.jsonl").write_text('{"key": "k", "name": "t", "source": "s", "kind": "matmul", "module": ""}\n')
    host = {"fingerprint": "llvm-cpu:emeraldrapids:0:t1", "machine": "x86_64", "model_name": "Intel Xeon",
            "hypervisor": "KVM", "cores": 2, "command": "python tools/grow_dataset.py",
            "target": {"resolved_cpu": "emeraldrapids", "vector_bytes": 64}}
    (out / "host.json").write_text(json.dumps(host, indent=1))
    manifest = tmp_path / "MANIFEST.json"
    manifest.write_text(json.dumps({"models": {}, "files": []}))
    assert tool.update_manifest(out, manifest) == 0
    entries = {e.path: e for e in load_manifest(manifest)}
    assert set(entries) == {f"logs/dataset/host/{n}" for n in ("GMM(1,128,128,128).random.jsonl", "tasks.jsonl",
                                                                "host.json")}
    assert [p for e in entries.values() if (p := problem(e, tmp_path))] == []
    log = entries["logs/dataset/host/GMM(1,128,128,128).random.jsonl"]
    assert log.trains == (SHIPPED_MODEL,) and "Intel Xeon" in log.what and "KVM" in log.what
    assert log.records == 200 and not entries["logs/dataset/host/tasks.jsonl"].trains
