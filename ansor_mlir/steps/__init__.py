"""Schedule step kinds: what each primitive of a trace does, one module per kind.

`step_kind` defines the hooks a kind implements (resolve, sampling bounds,
checks, emission) and the state its emitters share; `checks` the validity
checks of any multi-level tiling; `script` the transform-dialect building
blocks; `registry` lists every kind. The drivers walk a sketch's steps:
`space.resolve` (the loop structure), `space.annotation` (sampling and
validity) and `codegen.transform_strategy` (the strategy IREE runs).
"""
