"""data/MANIFEST.json describes the data directory exactly, and names the logs of the shipped cost model."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest

import ansor_mlir
from ansor_bench.datasets import DATA, MANIFEST, REPO, SHIPPED_MODEL, load_manifest, problem, training_logs
from ansor_mlir.errors import AnsorError
from ansor_mlir.model.cost_model import PRETRAINED


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
    assert len(logs) == 47 and all(p.is_file() for p in logs)
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
    import importlib.util

    from ansor_mlir.core.target import detect_host
    from ansor_mlir.model.features import FEATURE_NAMES, _lg

    spec = importlib.util.spec_from_file_location("train_cost_model", REPO / "tools" / "train_cost_model.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    log = DATA / "logs" / "search" / "GMM(1,128,128,128)_random.jsonl"
    assert next(e.cpu for e in load_manifest() if e.path == str(log.relative_to(DATA))) == "x86-64-v4"
    width = FEATURE_NAMES.index("target_vector_bytes")
    for cpu, vector_bytes in (("x86-64-v4", 64), ("znver3", 32)):
        (data,) = tool.training_groups({log: cpu}, ["GMM:0"], detect_host()).values()
        assert data.size > 100
        widths = {round(float(row[width]), 4) for block in data.features for row in block}
        assert widths == {round(_lg(vector_bytes), 4)}
    # One task measured on two CPUs: two groups, each labelled against its own best time.
    avx2_log = DATA / "logs" / "search_avx2" / "GMM(1,128,128,128)_random.jsonl"
    (both,) = tool.training_groups({log: "x86-64-v4", avx2_log: "znver3"}, ["GMM:0"], detect_host()).values()
    assert sorted(key.split("/")[0] for key in both.tasks) == ["x86-64-v4", "znver3"]
