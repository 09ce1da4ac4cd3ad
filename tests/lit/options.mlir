// Every pass option is checked before any work: a bad value is one error line naming the pass and
// listing what is accepted.
// RUN: not ansor-opt %s --ansor-extract-tasks="target=quantum" 2>&1 | FileCheck %s --check-prefix=TARGET
// RUN: not ansor-opt %s --ansor-generate-sketches="cpu=pentium9" 2>&1 | FileCheck %s --check-prefix=CPU
// RUN: not ansor-opt %s --ansor-tune="threads=0" 2>&1 | FileCheck %s --check-prefix=THREADS
// RUN: not ansor-opt %s --ansor-tune="trials=-1" 2>&1 | FileCheck %s --check-prefix=TRIALS
// RUN: not ansor-opt %s --ansor-tune="log=%t.no-such-dir/log.jsonl" 2>&1 | FileCheck %s --check-prefix=TUNE-LOG
// RUN: not ansor-opt %s --ansor-tune="seed=x" 2>&1 | FileCheck %s --check-prefix=SEED
// RUN: not ansor-opt %s --ansor-tune="policy=greedy" 2>&1 | FileCheck %s --check-prefix=POLICY
// RUN: not ansor-opt %s --ansor-tune="model=%t.no-such-model.json" 2>&1 | FileCheck %s --check-prefix=MODEL
// RUN: not ansor-opt %s --ansor-tune="batch-size=0" 2>&1 | FileCheck %s --check-prefix=BATCH
// RUN: not ansor-opt %s --ansor-tune="verify=65" 2>&1 | FileCheck %s --check-prefix=VERIFY
// RUN: not ansor-opt %s --ansor-tune="progress=2" 2>&1 | FileCheck %s --check-prefix=PROGRESS
// RUN: not ansor-opt %s --ansor-tune="one-thread-share=1" 2>&1 | FileCheck %s --check-prefix=SHARE
// RUN: not ansor-opt %s --ansor-print-strategy="seed=0 rule=nosuchrule" 2>&1 | FileCheck %s --check-prefix=RULE
// RUN: not ansor-opt %s --ansor-apply-best="log=" 2>&1 | FileCheck %s --check-prefix=LOG
// RUN: not ansor-opt %s --ansor-emit-tuning-spec 2>&1 | FileCheck %s --check-prefix=REQUIRED
// RUN: not ansor-opt %s --ansor-tune="tirals=3" 2>&1 | FileCheck %s --check-prefix=NAME
// RUN: not ansor-opt %s --ansor-tune="seed=1 seed=2" 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not ansor-opt %s --pass-pipeline="builtin.module(ansor-extract-tasks, ansor-frobnicate)" 2>&1 | FileCheck %s --check-prefix=PASS
// RUN: not ansor-opt %s --pass-pipeline="builtin.module(ansor-tune{trials=1)" 2>&1 | FileCheck %s --check-prefix=BRACES
// RUN: not ansor-opt %s --pass-pipeline="ansor-extract-tasks" 2>&1 | FileCheck %s --check-prefix=ANCHOR

// TARGET: ansor-opt: error: pass 'ansor-extract-tasks': invalid target=quantum: valid choices are llvm-cpu
// CPU: ansor-opt: error: pass 'ansor-generate-sketches': invalid cpu=pentium9: valid choices are host, {{.*}}skylake-avx512{{.*}}znver4
// THREADS: ansor-opt: error: pass 'ansor-tune': invalid threads=0: out of range: expected an integer in [1, 1024]
// TRIALS: ansor-opt: error: pass 'ansor-tune': invalid trials=-1: out of range: expected an integer in [0, 1000000]
// TUNE-LOG: ansor-opt: error: pass 'ansor-tune': invalid log={{.*}}no-such-dir/log.jsonl: directory {{.*}}no-such-dir does not exist
// SEED: ansor-opt: error: pass 'ansor-tune': invalid seed=x: expected an integer in [0, 4294967295]
// POLICY: ansor-opt: error: pass 'ansor-tune': invalid policy=greedy: valid choices are evolutionary, random
// MODEL: ansor-opt: error: pass 'ansor-tune': invalid model={{.*}}no-such-model.json: no such file; valid choices are shipped (the model in the package), none (learn from this run only) or a cost model file
// BATCH: ansor-opt: error: pass 'ansor-tune': invalid batch-size=0: out of range: expected an integer in [1, 4096]
// VERIFY: ansor-opt: error: pass 'ansor-tune': invalid verify=65: out of range: expected an integer in [0, 64]
// PROGRESS: ansor-opt: error: pass 'ansor-tune': invalid progress=2: out of range: expected an integer in [0, 1]
// SHARE: ansor-opt: error: pass 'ansor-tune': invalid one-thread-share=1: out of range: expected a number in [0, 1)
// RULE: ansor-opt: error: pass 'ansor-print-strategy': invalid rule=nosuchrule: valid choices are iree-default, multi-level-tiling, multi-level-tiling-cached, td-multi-level-tiling, td-multi-level-tiling-cached, rfactor, padding, packing, decompose
// LOG: ansor-opt: error: pass 'ansor-apply-best': invalid log=: expected a file name
// REQUIRED: ansor-opt: error: pass 'ansor-emit-tuning-spec': missing required option log=...
// NAME: ansor-opt: error: pass 'ansor-tune': unknown option 'tirals' (accepted: target, cpu, threads, rewrites, trials, trials-per-task, time-budget, task-scheduler, early-stopping, log, seed, policy, model, batch-size, verify, one-thread-share, progress, cluster)
// TWICE: ansor-opt: error: pass 'ansor-tune': option 'seed' given twice
// PASS: ansor-opt: error: unknown pass 'ansor-frobnicate': available passes are ansor-rewrite, ansor-extract-tasks, ansor-generate-sketches, ansor-tune, ansor-apply-best, ansor-emit-tuning-spec, ansor-emit-transform-library, ansor-print-strategy
// BRACES: ansor-opt: error: --pass-pipeline: unbalanced braces in 'ansor-tune{trials=1'
// ANCHOR: ansor-opt: error: --pass-pipeline: expected 'builtin.module(PASS{OPTIONS}, ...)', got 'ansor-extract-tasks'
func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  return %a : tensor<4xf32>
}
