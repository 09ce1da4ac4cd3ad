// The driver flags mlir-opt users reach for. With no pass, ansor-opt parses, checks and prints.
// RUN: ansor-opt --version | FileCheck %s --check-prefix=VERSION
// RUN: ansor-opt --help | FileCheck %s --check-prefixes=HELP,PASSES
// RUN: ansor-opt --list-passes | FileCheck %s --check-prefix=PASSES
// RUN: ansor-opt %s --split-input-file --allow-unregistered-dialect --mlir-elide-elementsattrs-if-larger=4 | FileCheck %s
// RUN: not ansor-opt %s --split-input-file 2>&1 >/dev/null | FileCheck %s --check-prefix=UNREGISTERED
// RUN: not ansor-opt %s --ansor-extract-tasks --pass-pipeline="builtin.module(ansor-extract-tasks)" 2>&1 | FileCheck %s --check-prefix=BOTH
// RUN: not ansor-opt %s --no-such-flag 2>&1 | FileCheck %s --check-prefix=FLAG

// VERSION: ansor-mlir {{[0-9]+\.[0-9]+}}
// VERSION-NEXT: IREE 3.13.{{.*}}iree-base-compiler 3.13.{{.*}}iree-base-runtime 3.13.
// VERSION-NEXT: tuning record schema {{[0-9]+}}

// HELP: usage: ansor-opt
// HELP: --pass-pipeline PIPELINE
// HELP: --split-input-file
// HELP: --verify-diagnostics
// HELP: --mlir-print-ir-after-all
// HELP: --mlir-elide-elementsattrs-if-larger N
// HELP: --allow-unregistered-dialect
// HELP: --version
// The options most passes share are stated once, before the passes.
// PASSES: Options of every pass (target, cpu, threads, rewrites; ansor-rewrite takes rewrites only):
// PASSES-NEXT: target=<llvm-cpu|ARCH:CPU> {{ +}}compilation target: this host, or a named CPU (aarch64:neoverse-v1) (default: llvm-cpu)
// PASSES-NEXT: cpu=<host|LLVM CPU name> {{ +}}CPU IREE compiles for (default: host)
// PASSES-NEXT: threads=<1..1024> {{ +}}runtime threads used when timing (default: 1)
// PASSES: --ansor-extract-tasks: the tasks (unique dispatches) as ansor dialect IR
// PASSES-NEXT: --ansor-generate-sketches:
// PASSES: --ansor-tune: tune every task
// PASSES: trials=<0..1000000> {{ +}}measured candidates of all tasks together, IREE's default of each included (0: pick by the cost model alone) (default: 64 per task of the program; with a time budget alone, until it is spent)
// PASSES-NEXT: trials-per-task=<1..1000000> {{ +}}measured candidates per task instead of in all (default: none, trials is the total)
// PASSES-NEXT: time-budget=<DURATION (90s, 30m, 2h)>
// PASSES-NEXT: wall-clock time the search may take, beside trials: it stops when either is spent (default: none, trials alone)
// PASSES-NEXT: task-scheduler=<gradient|round-robin>
// PASSES-NEXT: how tasks share the trials: Ansor's gradient or in turn (default: gradient)
// PASSES: log=<FILE> {{ +}}append-only tuning log (default: OUTPUT with the suffix .jsonl; ansor_tuning.jsonl when writing to stdout)
// PASSES: policy=<evolutionary|random> {{ +}}search policy (default: evolutionary)
// PASSES: model=<shipped|none|FILE> {{ +}}cost model to start from (the API takes a CostModel too) (default: shipped)
// PASSES-NEXT: batch-size=<1..4096> {{ +}}candidates per measured batch (default: 8)
// PASSES: --ansor-apply-best:
// PASSES: log=<FILE> {{ +}}tuning log to read (required)
// PASSES: --ansor-print-strategy:
// PASSES: rule=<iree-default|multi-level-tiling|{{.*}}|decompose|micro-kernel|window-micro-kernel|implicit-gemm|{{.*}}tensor-core{{.*}}>
// PASSES-NEXT: only sketches derived by this rule (default: any rule)

// CHECK: func.func @weights() -> tensor<8xf32>
// CHECK-NEXT: arith.constant dense_resource<__elided__> : tensor<8xf32>
// CHECK: // -----
// CHECK-NEXT: module {
// CHECK-NEXT: "foo.bar"() : () -> ()

// UNREGISTERED: ansor-opt: error: {{.*}}flags.mlir: line {{[0-9]+}}: operation 'foo.bar' of an unregistered dialect: use --allow-unregistered-dialect to accept it
// BOTH: ansor-opt: error: --pass-pipeline cannot be combined with --ansor-* pass flags: use one or the other
// FLAG: ansor-opt: error: unrecognized arguments: --no-such-flag (see --help)

func.func @weights() -> tensor<8xf32> {
  %0 = arith.constant dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]> : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

"foo.bar"() : () -> ()
