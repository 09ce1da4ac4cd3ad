"""Generators of bad inputs, shared by the fuzz tests and `tools/reliability_report.py`.

Every value drawn is bad by construction: MLIR that does not parse or that
nothing can be tuned from, pass options outside their domains, log lines that
are not records, API calls with one wrong argument. What a bad input must
get is the same everywhere: one `AnsorError` line naming the input and a
non-zero exit (or, for a log line, a skip with one warning), never a
traceback, a crash, a hang, or a silent success.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import strategies as st

from ansor_mlir.core.measure_result import ErrorKind, MeasureResult
from ansor_mlir.core.schedule import Candidate, ConfigurePipeline, Family, Sketch, TileKnob
from ansor_mlir.core.task import IreeConfig
from ansor_mlir.database.records import Record
from ansor_mlir.mlir.context import MAX_NESTING

# ---- MLIR --------------------------------------------------------------------------------------------------

MATMUL = """func.func @mm(%a: tensor<{m}x{k}x{e}>, %b: tensor<{k}x{n}x{e}>) -> tensor<{m}x{n}x{e}> {{
  %0 = tensor.empty() : tensor<{m}x{n}x{e}>
  %cst = arith.constant {zero} : {e}
  %1 = linalg.fill ins(%cst : {e}) outs(%0 : tensor<{m}x{n}x{e}>) -> tensor<{m}x{n}x{e}>
  %2 = linalg.matmul ins(%a, %b : tensor<{m}x{k}x{e}>, tensor<{k}x{n}x{e}>)
         outs(%1 : tensor<{m}x{n}x{e}>) -> tensor<{m}x{n}x{e}>
  return %2 : tensor<{m}x{n}x{e}>
}}
"""


def matmul(m: object = 64, n: object = 64, k: object = 64, e: str = "f32") -> str:
    zero = "0.0" if e.startswith(("f", "bf")) else "0"
    return MATMUL.format(m=m, n=n, k=k, e=e, zero=zero)


VALID = matmul()
# Element types IREE's Python runtime cannot hand a program: tuning must refuse them before measuring.
UNPASSABLE_ELEMENTS = ("i2", "i4")
JUNK_TOKENS = ("}", "{", "(", ")", "%", "%9", "@", "<", ">", "->", ":", "tensor<", "linalg.", "^bb0", "\"", "#map",
               "arith.addf", "= =", "func.func", "return", ",", "x", "!", "0x", "...", "\\")


def nested(kind: str, depth: int) -> str:
    """A module nesting brackets `depth` deep: more than MLIR's parser survives past a few thousand."""
    inner = {
        "array": "[" * depth + "]" * depth,
        "dict": "{a = " * depth + "1" + "}" * depth,
        "type": "tuple<" * depth + "i32" + ">" * depth,
        "affine": "affine_map<(d0) -> (" + "(" * depth + "d0" + ")" * depth + ")>",
    }
    if kind == "region":
        return '"test.a"() (' + '{ "test.a"() (' * depth + "{}) : () -> ()" + " }) : () -> ()" * depth
    return "func.func @f() attributes {x = " + inner[kind] + "} { return }"


# Inputs nothing can be tuned from, each with the reason an error must give.
UNSUPPORTED = {
    "no function": "module {}\n",
    "empty file": "",
    "only a comment": "// nothing to tune\n",
    "a declaration only": "func.func private @f(%a: tensor<4xf32>) -> tensor<4xf32>\n",
    "scalars only": "func.func @f(%a: f32, %b: f32) -> f32 {\n  %0 = arith.addf %a, %b : f32\n  return %0 : f32\n}\n",
    "memref arguments": (
        "func.func @f(%a: memref<64x64xf32>, %b: memref<64x64xf32>, %c: memref<64x64xf32>) {\n"
        "  linalg.matmul ins(%a, %b : memref<64x64xf32>, memref<64x64xf32>) outs(%c : memref<64x64xf32>)\n"
        "  return\n}\n"),
    "no compute": "func.func @f(%a: tensor<64xf32>) -> (tensor<64xf32>, tensor<64xf32>) {\n"
                  "  return %a, %a : tensor<64xf32>, tensor<64xf32>\n}\n",
    "unregistered op": "func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
                       "  %0 = \"foo.bar\"(%a) : (tensor<4xf32>) -> tensor<4xf32>\n  return %0 : tensor<4xf32>\n}\n",
    "dynamic shape": VALID.replace("%a: tensor<64x64xf32>", "%a: tensor<?x64xf32>", 1),
    "unsupported element type": matmul(e="f80"),
}


def unsupported_modules() -> st.SearchStrategy[tuple[str, str]]:
    """(what, MLIR): catalogued constructs, zero-size and huge shapes, element types no runtime passes."""
    catalogue = st.sampled_from(sorted(UNSUPPORTED.items()))
    zero = st.tuples(st.integers(0, 2), st.sampled_from(["f32", "f16", "i8"])).map(
        lambda t: ("zero-size tensor", matmul(*[0 if i == t[0] else 16 for i in range(3)], e=t[1])))
    huge = st.tuples(st.integers(100_000, 10**7), st.integers(100_000, 10**7)).map(
        lambda t: ("huge inputs", matmul(m=t[0], k=t[1], n=16)))
    narrow = st.sampled_from(UNPASSABLE_ELEMENTS).map(lambda e: (f"{e} operands", matmul(16, 16, 16, e)))
    return st.one_of(catalogue, zero, huge, narrow)


def deep_modules() -> st.SearchStrategy[tuple[str, str]]:
    kinds = st.sampled_from(["array", "dict", "type", "affine", "region"])
    return st.tuples(kinds, st.integers(MAX_NESTING + 1, 20_000)).map(
        lambda t: (f"{t[0]} nested {t[1]} deep", nested(*t)))


def syntax_mutations() -> st.SearchStrategy[tuple[str, str]]:
    """The valid matmul truncated, cut or with junk inserted; filtered to what MLIR's parser rejects."""
    last_brace = VALID.rindex("}")
    truncated = st.integers(0, last_brace - 1).map(lambda k: ("truncated", VALID[:k] if k else " "))
    cut = st.tuples(st.integers(0, len(VALID) - 1), st.integers(1, 40)).map(
        lambda t: ("cut", VALID[:t[0]] + VALID[t[0] + t[1]:]))
    inserted = st.tuples(st.integers(0, len(VALID)), st.sampled_from(JUNK_TOKENS)).map(
        lambda t: ("junk inserted", VALID[:t[0]] + t[1] + VALID[t[0]:]))
    text = st.text(min_size=1, max_size=200).map(lambda s: ("random text", s))
    return st.one_of(truncated, cut, inserted, text).filter(lambda case: not parses(case[1]))


def parses(text: str) -> bool:
    """Whether MLIR parses and verifies `text` (guarded: deep nesting is refused, not parsed)."""
    from iree.compiler import ir

    from ansor_mlir.errors import AnsorError
    from ansor_mlir.mlir.context import parse_module

    try:
        parse_module(text, "fuzz").operation.verify()
    except (AnsorError, ir.MLIRError):
        return False
    return True


def raw_bytes() -> st.SearchStrategy[tuple[str, bytes]]:
    """Files that are not UTF-8 text, or hold a NUL character."""
    not_utf8 = st.binary(min_size=1, max_size=200).filter(lambda b: not _utf8(b))
    with_nul = st.integers(0, len(VALID)).map(lambda k: VALID[:k].encode() + b"\0" + VALID[k:].encode())
    return st.one_of(not_utf8.map(lambda b: ("not UTF-8", b)), with_nul.map(lambda b: ("NUL character", b)))


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def unparsable_modules() -> st.SearchStrategy[tuple[str, bytes]]:
    """(what, file bytes) that MLIR's parser must never be handed or that it rejects: no IREE compile needed."""
    text = st.one_of(syntax_mutations(), deep_modules()).map(lambda case: (case[0], case[1].encode("utf-8")))
    return st.one_of(text, raw_bytes())


def bad_modules() -> st.SearchStrategy[tuple[str, bytes]]:
    """(what, file bytes) of every MLIR kind above."""
    unsupported = unsupported_modules().map(lambda case: (case[0], case[1].encode("utf-8")))
    return st.one_of(unparsable_modules(), unsupported)


# ---- pass options -------------------------------------------------------------------------------------------

INT_RANGES = {"trials": (0, 1_000_000), "seed": (0, 2**32 - 1), "batch-size": (1, 4096), "verify": (0, 64),
              "progress": (0, 1), "threads": (1, 1024)}
CHOICE_OPTIONS = ("policy", "target", "model", "cpu")


def _outside(low: int, high: int) -> st.SearchStrategy[str]:
    ints = st.one_of(st.integers(max_value=low - 1), st.integers(min_value=high + 1)).map(str)
    words = st.text(alphabet="abcxyz.-+e _", min_size=1, max_size=8).filter(lambda s: not _is_int(s))
    floats = st.floats(allow_nan=True, allow_infinity=True).map(repr).filter(lambda s: not _is_int(s))
    return st.one_of(ints, words, floats, st.just(""))


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def _quote(value: str) -> str:
    return "'" + value.replace("'", "") + "'" if not value or any(c in value for c in " ,{}\"") else value


def bad_tune_options(special_paths: dict[str, str]) -> st.SearchStrategy[tuple[str, str]]:
    """(what, `--ansor-tune=` text): one option outside its domain, an unknown key, or malformed text.

    `special_paths` names files no log may be: a FIFO, a directory, `/dev/full`, a path in a missing directory.
    """
    bad_int = st.sampled_from(sorted(INT_RANGES)).flatmap(
        lambda key: _outside(*INT_RANGES[key]).map(lambda v: (f"{key} out of range", f"{key}={_quote(v)}")))
    bad_choice = st.tuples(st.sampled_from(["policy", "target", "model"]),
                           st.text(alphabet="abcdefghijklmnopqrstuvwxyz-_0123456789", min_size=1, max_size=12)).filter(
        lambda t: t[1] not in ("evolutionary", "random", "llvm-cpu", "shipped", "none")).map(
        lambda t: (f"bad {t[0]}", f"{t[0]}={t[1]}"))
    bad_log = st.sampled_from(sorted(special_paths.items())).map(lambda t: (f"log is {t[0]}", f"log={t[1]}"))
    unknown = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=10).filter(
        lambda k: k not in {"trials", "log", "seed", "policy", "model", "verify", "progress", "target",
                            "cpu", "threads"}).map(lambda k: ("unknown option", f"{k}=1"))
    malformed = st.sampled_from(["trials", "trials=", "=3", "trials=2 trials=3", "trials='2", 'log="x', "trials==2",
                                 "trials=2,,seed", "{trials=2}", "trials=2 }"]).map(lambda t: ("malformed", t))
    return st.one_of(bad_int, bad_choice, bad_log, unknown, malformed)


def bad_pipelines() -> st.SearchStrategy[tuple[str, str]]:
    """(what, `--pass-pipeline=` text) that is not a pipeline of known passes with valid options."""
    passes = ["ansor-extract-tasks", "ansor-tune", "ansor-apply-best", "ansor-generate-sketches"]
    unbalanced = st.sampled_from(["builtin.module(ansor-tune{trials=2)", "builtin.module(ansor-tune{trials=2}",
                                  "builtin.module(ansor-tune}", "builtin.module(", "builtin.module)",
                                  "builtin.module(ansor-tune{trials=\"2})", "builtin.module(,)", "builtin.module()",
                                  "func.func(ansor-tune)", "ansor-tune{trials=2}"]).map(lambda t: ("malformed", t))
    unknown = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=20).filter(
        lambda p: p not in passes and p.strip("-") != "").map(lambda p: ("unknown pass", f"builtin.module({p})"))
    junk = st.text(max_size=60).filter(lambda t: not t.startswith("builtin.module(")).map(lambda t: ("junk", t))
    apply_without_log = st.just(("missing log", "builtin.module(ansor-apply-best)"))
    return st.one_of(unbalanced, unknown, junk, apply_without_log)


# ---- log lines ----------------------------------------------------------------------------------------------

CONFIG = IreeConfig("DoubleTilingExpert", (("distribution", (8, 8, 0)), ("vector_common_parallel", (1, 8, 0))))
KNOB = TileKnob("d0", 0, 64, ("distribution", "vector_common_parallel"))
SKETCH = Sketch("k1", 1, Family.PIPELINE, "DoubleTilingExpert", ("distribution", "vector_common_parallel"),
                (ConfigurePipeline((KNOB,), "DoubleTilingExpert"),), ("multi-level-tiling",))


def good_record(median_s: float, tile: int, target: str = "llvm-cpu:host:t1") -> Record:
    return Record(target=target, task_key="k1", task_name="t", candidate=Candidate("k1", 1, (("d0", (tile, 8)),)),
                  sketch=SKETCH, config=CONFIG, root_index=0,
                  result=MeasureResult(ErrorKind.NONE, median_s=median_s, spread_s=0.0), timestamp=1.0)


def good_records() -> st.SearchStrategy[list[Record]]:
    times = st.floats(min_value=1e-7, max_value=10.0, allow_nan=False, allow_infinity=False)
    return st.lists(times, min_size=0, max_size=6).map(
        lambda ts: [good_record(t, 2 ** (i % 6 + 1)) for i, t in enumerate(ts)])


BAD_TIMES = [float("nan"), float("inf"), float("-inf"), 0.0, -1.0, -1e-9, "1.0", True, None, [1.0], {"s": 1}]
# (field path, values that field must never accept)
BAD_FIELDS: list[tuple[tuple[str, ...], list[object]]] = [
    (("version",), [0, 4, 99, "3", None, 3.0, True, []]),
    (("target",), [1, None, [], {}, True]),
    (("task",), [1, None, [], {}]),
    (("task_name",), [1, None, []]),
    (("sketch",), [None, 1, "s", [], True]),
    (("sketch", "index"), [None, "1", 1.5, [], True]),
    (("sketch", "rules"), ["rule", [1], {}, None]),
    (("sketch", "trace"), [[], "t", 1, {"family": "nope"}, {"family": "pipeline"}, {"steps": [{"step": "x"}]}]),
    (("values",), [None, [], "v", {"d0": "8"}, {"d0": [1.5]}, {"d0": [None]}, {"d0": 8}, {"d0": [True]}]),
    (("config",), [None, [], "c", {"pipeline": 1, "levels": {}}, {"pipeline": "P", "levels": []}]),
    (("config", "levels"), [None, [], {"distribution": "8"}, {"distribution": [1.5]}]),
    (("root_index",), [-1, None, "0", 0.5, True]),
    (("result",), [None, [], "none", 1]),
    (("result", "error"), ["bogus", None, 1, []]),
    (("result", "median_s"), BAD_TIMES),
    (("result", "spread_s"), [float("nan"), float("inf"), -1.0, "0.1", []]),
    (("result", "compile_s"), [float("nan"), -1.0, "1", None]),
    (("result", "repeats"), [-1, 1.5, "5", None]),
    (("timestamp",), [float("nan"), float("inf"), "now", None, []]),
    (("versions",), [[], "v", {"iree": 3}]),
    (("fingerprint",), [1, [], None]),
    (("program",), [[], "p", 1, {"default_s": 1.0}]),
]
REQUIRED = ["version", "target", "task", "sketch", "values", "config", "root_index", "result", "timestamp"]


def _set(data: dict, path: tuple[str, ...], value: object) -> dict:
    data = json.loads(json.dumps(data))
    node = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return data


def _dumps(value: object) -> bytes:
    return json.dumps(value, allow_nan=True).encode()


def bad_lines(template: Record) -> st.SearchStrategy[tuple[str, bytes]]:
    """(what, line bytes without its newline) that are not records, built around a good record."""
    good = json.loads(template.to_json())
    field_values = st.sampled_from(BAD_FIELDS).flatmap(
        lambda fv: st.sampled_from(fv[1]).map(lambda v, p=fv[0]: (f"bad {'.'.join(p)}", _dumps(_set(good, p, v)))))
    missing = st.sampled_from(REQUIRED).map(
        lambda key: (f"missing {key}", _dumps({k: v for k, v in good.items() if k != key})))
    program = json.loads(template.to_json())
    program["program"] = {"default_s": 1.0, "tuned_s": 1.0, "ratio_low": 1.0, "ratio": 1.0, "ratio_high": 1.0,
                          "rounds": 3, "accepted": True}
    bad_program = st.sampled_from(["default_s", "tuned_s", "ratio", "ratio_low", "ratio_high"]).flatmap(
        lambda key: st.sampled_from(BAD_TIMES).map(
            lambda v, k=key: (f"bad program.{k}", _dumps(_set(program, ("program", k), v)))))
    json_values = st.recursive(st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=10),
                               lambda inner: st.lists(inner, max_size=4), max_leaves=10).map(
        lambda v: ("not an object", _dumps(v)))
    objects = st.dictionaries(st.text(max_size=8), st.integers() | st.text(max_size=5), max_size=5).map(
        lambda d: ("wrong object", _dumps(d)))
    line = template.to_json().encode()
    truncated = st.integers(1, len(line) - 1).map(lambda k: ("truncated line", line[:k]))
    binary = st.binary(min_size=1, max_size=80).filter(lambda b: b"\n" not in b and b.strip()).filter(
        lambda b: not _parses_as_object(b)).map(lambda b: ("random bytes", b))
    deep = st.integers(1_000, 200_000).map(lambda n: ("nested JSON", b"[" * n + b"]" * n))
    huge_int = st.integers(5_000, 20_000).map(lambda n: ("huge integer", _dumps(_set(good, ("root_index",), 0))
                                                          .replace(b'"root_index": 0', b'"root_index": ' + b"9" * n)))
    return st.one_of(field_values, missing, bad_program, json_values, objects, truncated, binary, deep, huge_int)


def _parses_as_object(data: bytes) -> bool:
    try:
        return isinstance(json.loads(data), dict)
    except (ValueError, RecursionError):
        return False


@dataclass(frozen=True)
class CorruptLog:
    """A log's bytes: good records with bad lines between them (and maybe a torn last line)."""

    data: bytes
    good: list[Record]
    bad_lines: list[int]  # 1-based numbers of the lines that are not records
    kinds: list[str] = field(default_factory=list)


def corrupt_logs() -> st.SearchStrategy[CorruptLog]:
    def build(draw) -> CorruptLog:
        good = draw(good_records())
        template = good[0] if good else good_record(1.0, 2)
        bad = draw(st.lists(bad_lines(template), min_size=1, max_size=6))
        lines: list[tuple[str, bytes] | Record] = list(good)
        for item in bad:
            lines.insert(draw(st.integers(0, len(lines))), item)
        torn = draw(st.booleans()) and not isinstance(lines[-1], Record)
        out, numbers, kinds = [], [], []
        for number, item in enumerate(lines, start=1):
            if isinstance(item, Record):
                out.append(item.to_json().encode())
            else:
                out.append(item[1])
                numbers.append(number)
                kinds.append(item[0])
        data = b"\n".join(out) + (b"" if torn else b"\n")
        return CorruptLog(data, good, numbers, kinds)

    return st.composite(lambda draw: build(draw))()


def best_time(records: list[Record]) -> float | None:
    """The fastest correct time among records (what best_records must never undercut with a bad one)."""
    times = [r.result.median_s for r in records if r.result.ok and math.isfinite(r.result.median_s)]
    return min(times) if times else None


# ---- API calls ----------------------------------------------------------------------------------------------


class Opaque:
    """An object of no type the API accepts."""

    def __repr__(self) -> str:
        return "Opaque()"


NOT_INT = [None, "3", 2.5, float("nan"), True, [2], Opaque()]
NOT_STR = [None, 3, 2.5, True, ["x"], b"x", Opaque()]


@dataclass(frozen=True)
class ApiCall:
    """`function(**kwargs)`: kwargs hold exactly one bad argument; `log` must not exist afterwards."""

    function: str
    kwargs: dict
    what: str
    log: str | None = None


def bad_api_calls(module: Path, log: Path, special_paths: dict[str, str]) -> st.SearchStrategy[ApiCall]:
    """One bad argument per call; the others valid (`module` a real .mlir file, `log` a fresh path)."""
    from ansor_mlir.tuning.tuner import TuneOptions

    bad_paths = [Path(p) for p in special_paths.values()] + [str(p) for p in special_paths.values()]
    bad_logs = NOT_STR[:3] + [3, Opaque()] + bad_paths
    bad_modules = [None, 3, 2.5, b"func.func", ["x"], {"a": 1}, Opaque(), Path(str(module) + ".missing"),
                   str(module) + ".missing.mlir", Path(module.parent), "model.onnx", "not mlir\n",
                   "func.func @f( {", "module {}", "", "\0", Path(special_paths["a FIFO"])]
    tune_args = {
        # trials=None is the default budget (64 per task), not a bad value.
        "module": bad_modules, "trials": [-1, 1_000_001, *(v for v in NOT_INT if v is not None)],
        "seed": [-1, 2**32, *NOT_INT],
        "policy": ["greedy", "", *NOT_STR], "log": bad_logs, "target": ["cuda9", "", 3, None, Opaque()],
        "progress": [None, 1, "yes", Opaque()], "name": [3, b"x", Opaque()],
        "callbacks": [None, 3, "abc", [3], [Opaque()], [None]],
        "options": [3, "trials=2", Opaque(), TuneOptions(trials=-1, log=log), TuneOptions(batch_size=0, log=log),
                    TuneOptions(seed=-5, log=log), TuneOptions(log=Path(special_paths["a FIFO"])),
                    TuneOptions(policy="nope", log=log), TuneOptions(verify=99, log=log),
                    TuneOptions(run_timeout_s=float("nan"), log=log), TuneOptions(build_workers=0, log=log)],
    }
    tune = st.sampled_from(sorted(tune_args)).flatmap(lambda key: st.sampled_from(tune_args[key]).map(
        lambda v, k=key: ApiCall("tune", {"module": module, "trials": 2, "log": log, "progress": False, k: v},
                                 f"tune {k}", str(log))))
    read_args = {"module": [m for m in bad_modules if m not in ("module {}", "")],
                 "log": [None, 3, Opaque(), Path(str(log) + ".missing"), *bad_paths], "target": ["cuda9", 3, None]}
    readers = st.tuples(st.sampled_from(["apply_best", "emit_tuning_spec", "emit_transform_library"]),
                        st.sampled_from(sorted(read_args))).flatmap(
        lambda t: st.sampled_from(read_args[t[1]]).map(
            lambda v, f=t[0], k=t[1]: ApiCall(f, {"module": module, "log": log, k: v}, f"{f} {k}")))
    others = st.sampled_from([
        ApiCall("extract_tasks", {"module": None}, "extract_tasks module"),
        ApiCall("extract_tasks", {"module": module, "target": 7}, "extract_tasks target"),
        ApiCall("extract_tasks", {"module": Path(special_paths["a FIFO"])}, "extract_tasks FIFO"),
        ApiCall("generate_sketches", {"task": "task"}, "generate_sketches task"),
        ApiCall("generate_sketches", {"task": None}, "generate_sketches task"),
        ApiCall("run_pipeline", {"module": module, "pipeline": 5}, "run_pipeline pipeline"),
        ApiCall("run_pipeline", {"module": module, "pipeline": "builtin.module(ansor-tune{trials=2)"},
                "run_pipeline syntax"),
        ApiCall("run_pipeline", {"module": module, "pipeline": ["ansor-nope"]}, "run_pipeline unknown pass"),
        ApiCall("run_pipeline", {"module": 5, "pipeline": "builtin.module(ansor-extract-tasks)"},
                "run_pipeline module"),
        ApiCall("compile", {"model": 5}, "compile model"),
        ApiCall("compile", {"model": module, "embed_parameters": "yes"}, "compile embed_parameters"),
        ApiCall("compile", {"model": module, "log": 3}, "compile log"),
        ApiCall("resolve_target", {"target": 3}, "resolve_target"),
    ])
    return st.one_of(tune, readers, others)
