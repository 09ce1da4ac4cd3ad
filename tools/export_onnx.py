"""Export a PyTorch model given as `file.py:factory` to ONNX, from the same module and example inputs.

    python tools/export_onnx.py examples/models/resnet.py:resnet50 -o resnet50.onnx

Uses `torch.onnx.export`'s TorchScript exporter (`dynamo=False`: the dynamo
exporter needs onnxscript, which the importers extra does not bring), opset 17,
static shapes, the module in eval mode.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

from ansor_mlir.errors import AnsorError
from ansor_mlir.frontend.torch_import import load_factory

OPSET = 17


def export_onnx(reference: str, out: Path, opset: int = OPSET) -> Path:
    import torch

    module, inputs = load_factory(reference)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notice
        torch.onnx.export(module.eval(), inputs, str(out), dynamo=False, opset_version=opset,
                          input_names=[f"input{i}" for i in range(len(inputs))])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help="file.py:factory, the factory returning (module, example_inputs)")
    parser.add_argument("-o", dest="out", type=Path, required=True, help="the .onnx file to write")
    parser.add_argument("--opset", type=int, default=OPSET)
    args = parser.parse_args(argv)
    try:
        export_onnx(args.model, args.out, args.opset)
    except AnsorError as exc:
        print(f"export_onnx: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
