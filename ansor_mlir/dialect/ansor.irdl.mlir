// The `ansor` dialect, defined in IRDL so that stock tools verify our output:
//
//   iree-opt --irdl-file=ansor_mlir/dialect/ansor.irdl.mlir FILE
//
// ansor-opt builds these ops with the MLIR Python bindings in a context that
// allows unregistered dialects and verifies its input against this file; all
// ops are printed in generic form. Notes on what IRDL (as shipped with IREE
// 3.13) can and cannot check:
// - one SSA constraint value used twice means "the same attribute twice", so
//   every attribute gets its own constraint value;
// - integer attributes are checked to be integers, not to be i64;
// - array attributes are checked to be arrays (`[..]`, or `array<i64: ..>`
//   for integer lists), not their element kinds;
// - attributes cannot be optional: an attribute that only some ops carry
//   (`op` of `ansor.knob`) is documented here, not declared;
// - IRDL ops have no traits: a region's block needs a real terminator, so
//   every ansor region ends in `transform.yield`, and `func.func` (a symbol)
//   sits inside a `builtin.module` (a symbol table);
// - IRDL ops cannot implement TransformOpInterface, so they cannot live in a
//   `transform.named_sequence` body; an `ansor.sketch` region is therefore the
//   body of the matcher sequence itself (entry argument `%root`).
irdl.dialect @ansor {
  // One task: its function and its sketches in one block, ended by
  // `transform.yield`.
  irdl.operation @task {
    %key = irdl.base "#builtin.string"
    %name = irdl.base "#builtin.string"
    %weight = irdl.base "#builtin.integer"
    %flops = irdl.base "#builtin.integer"
    %root = irdl.base "#builtin.string"
    %root_index = irdl.base "#builtin.integer"
    %loop_extents = irdl.base "#builtin.dense_array"
    %iterator_types = irdl.base "#builtin.array"
    %pipeline = irdl.base "#builtin.string"
    irdl.attributes {
      "key" = %key,
      "name" = %name,
      "weight" = %weight,
      "flops" = %flops,
      "root" = %root,
      "root_index" = %root_index,
      "loop_extents" = %loop_extents,
      "iterator_types" = %iterator_types,
      "pipeline" = %pipeline
    }
    %body = irdl.region() with size 1
    irdl.regions(body: %body)
  }

  // One sketch: the body of a matcher sequence over `%root`, yielding the
  // root and its configuration (built from knobs, or a constant for sketch 0).
  irdl.operation @sketch {
    %task = irdl.base "#builtin.string"
    %index = irdl.base "#builtin.integer"
    %sequence = irdl.base "#builtin.string"
    %pipeline = irdl.base "#builtin.string"
    %rules = irdl.base "#builtin.array"
    %pipeline_family = irdl.is "pipeline"
    %transform_family = irdl.is "transform"
    %family = irdl.any_of(%pipeline_family, %transform_family)
    irdl.attributes {
      "task" = %task,
      "index" = %index,
      "sequence" = %sequence,
      "pipeline" = %pipeline,
      "rules" = %rules,
      "family" = %family
    }
    %any_op = irdl.is !transform.any_op
    %body = irdl.region(%any_op) with size 1
    irdl.regions(body: %body)
  }

  // A hole: the tile sizes of loop `dim` across `levels`, outer to inner.
  // `padded`: the innermost tile need not divide the one above it (partial
  // tiles are padded). Optional `op` (integer): the loop belongs to that
  // consumer op of the dispatch, not to the root.
  irdl.operation @knob {
    %name = irdl.base "#builtin.string"
    %dim = irdl.base "#builtin.integer"
    %extent = irdl.base "#builtin.integer"
    %spatial = irdl.is "S"
    %reduction = irdl.is "R"
    %kind = irdl.any_of(%spatial, %reduction)
    %levels = irdl.base "#builtin.array"
    %padded_true = irdl.is true
    %padded_false = irdl.is false
    %padded = irdl.any_of(%padded_true, %padded_false)
    irdl.attributes {
      "name" = %name,
      "dim" = %dim,
      "extent" = %extent,
      "kind" = %kind,
      "levels" = %levels,
      "padded" = %padded
    }
    %param = irdl.is !transform.any_param
    irdl.results(tiles: %param)
  }

  // The `compilation_info` a sketch's knobs stand for once filled.
  irdl.operation @compilation_info {
    %pipeline = irdl.base "#builtin.string"
    %levels = irdl.base "#builtin.array"
    irdl.attributes {
      "pipeline" = %pipeline,
      "levels" = %levels
    }
    %knob = irdl.is !transform.any_param
    irdl.operands(knobs: variadic %knob)
    %param = irdl.is !transform.any_param
    irdl.results(config: %param)
  }

  // How a GPU sketch maps the root (in words, for people): which loops its
  // blocks and threads tile, what shared memory holds, what registers hold.
  irdl.operation @gpu_mapping {
    %blocks = irdl.base "#builtin.string"
    %threads = irdl.base "#builtin.string"
    %shared_memory = irdl.base "#builtin.string"
    %registers = irdl.base "#builtin.string"
    irdl.attributes {
      "blocks" = %blocks,
      "threads" = %threads,
      "shared_memory" = %shared_memory,
      "registers" = %registers
    }
  }

  // A categorical hole (fusion level, cache write, vector lowering): the
  // index of one of `options`.
  irdl.operation @choice {
    %name = irdl.base "#builtin.string"
    %options = irdl.base "#builtin.array"
    irdl.attributes {
      "name" = %name,
      "options" = %options
    }
    %param = irdl.is !transform.any_param
    irdl.results(choice: %param)
  }

  // A transform-family sketch's program: the codegen strategy (named
  // `strategy`) its knobs fill in, applied by IREE as
  // `#iree_codegen.transform_dialect_codegen`.
  irdl.operation @strategy {
    %strategy = irdl.base "#builtin.string"
    %root = irdl.base "#builtin.string"
    %levels = irdl.base "#builtin.array"
    irdl.attributes {
      "strategy" = %strategy,
      "root" = %root,
      "levels" = %levels
    }
    %knob = irdl.is !transform.any_param
    irdl.operands(knobs: variadic %knob)
    %param = irdl.is !transform.any_param
    irdl.results(config: %param)
  }
}
