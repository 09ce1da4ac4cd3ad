"""Each suite entry as PyTorch CPU computes it natively (optional: `pip install torch==2.13.0`).

PyTorch's convolutions are NCHW / OIHW; the workloads are channels-last with
HWCF filters. Each op gets its inputs once in PyTorch's own layout (converted
before timing, like weights a deployed model stores in that layout) and its
output is converted back only for the correctness check, so the timed call
is exactly the framework op. Ops that are layout changes by definition (TBS's
transposes) keep them inside the timed call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class TorchOp:
    """A timed call and how to read its result back in the workload's layout."""

    call: Callable[[], object]
    fetch: Callable[[], list[np.ndarray]]


def import_torch(threads: int = 1):
    """Import torch with its intra- and inter-op pools pinned, or raise ImportError."""
    import torch

    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(threads)
    except RuntimeError:
        pass  # already set once in this process; it cannot change afterwards
    return torch


def _channels_first(x: np.ndarray):
    """N, spatial..., C -> N, C, spatial... as a contiguous tensor."""
    import torch

    return torch.from_numpy(x).movedim(-1, 1).contiguous()


def _filter_oi(w: np.ndarray):
    """spatial..., CI, CO -> CO, CI, spatial... as a contiguous tensor."""
    import torch

    rank = w.ndim - 2
    return torch.from_numpy(w).permute(rank + 1, rank, *range(rank)).contiguous()


def _to_channels_last(y) -> np.ndarray:
    return y.movedim(1, -1).contiguous().numpy()


def _conv_fn(torch, rank: int):
    return {1: torch.nn.functional.conv1d, 2: torch.nn.functional.conv2d, 3: torch.nn.functional.conv3d}[rank]


def _conv(torch, a: dict[str, int], t: list[np.ndarray], rank: int, dilation: int = 1) -> Callable[[], object]:
    x, w = _channels_first(t[0]), _filter_oi(t[1])
    conv = _conv_fn(torch, rank)
    return lambda: conv(x, w, stride=a["s"], padding=a["p"], dilation=dilation)


def _grp(torch, a: dict[str, int], t: list[np.ndarray]) -> Callable[[], object]:
    g, k = a["groups"], a["k"]
    x = _channels_first(t[0])
    w = torch.from_numpy(t[1]).reshape(a["CO"], k, k, a["CI"] // g).permute(0, 3, 1, 2).contiguous()
    f = torch.nn.functional.conv2d
    return lambda: f(x, w, stride=a["s"], padding=a["p"], dilation=a["dilation"], groups=g)


def _dep(torch, a: dict[str, int], t: list[np.ndarray]) -> Callable[[], object]:
    x = _channels_first(t[0])
    w = torch.from_numpy(t[1]).permute(2, 0, 1).unsqueeze(1).contiguous()
    f = torch.nn.functional.conv2d
    return lambda: f(x, w, stride=a["s"], padding=a["p"], groups=a["C"])


def _t2d(torch, a: dict[str, int], t: list[np.ndarray]) -> Callable[[], object]:
    x = _channels_first(t[0])
    w = torch.from_numpy(t[1]).permute(2, 3, 0, 1).contiguous()
    f = torch.nn.functional.conv_transpose2d
    return lambda: f(x, w, stride=a["s"], padding=a["p"])


def _cap(torch, a: dict[str, int], t: list[np.ndarray]) -> tuple[Callable[[], object], Callable[[object], np.ndarray]]:
    """The capsule conv as one grouped-free conv2d: capsule row i joins the batch, (c, rc) the channels."""
    n, ci, co = a["N"], a["CI"], a["CO"]
    cap = t[0].shape[3]
    x = torch.from_numpy(t[0]).permute(0, 3, 4, 5, 1, 2).reshape(n * cap, cap * ci, a["H"], a["W"]).contiguous()
    w = torch.from_numpy(t[1]).permute(3, 5, 2, 4, 0, 1).reshape(cap * co, cap * ci, a["k"], a["k"]).contiguous()
    f = torch.nn.functional.conv2d

    def back(y) -> np.ndarray:
        oh, ow = y.shape[2], y.shape[3]
        return y.reshape(n, cap, cap, co, oh, ow).permute(0, 4, 5, 1, 2, 3).contiguous().numpy()

    return (lambda: f(x, w, stride=a["s"], padding=a["p"])), back


def torch_op(name: str, args: dict[str, int], inputs: list[np.ndarray], threads: int = 1) -> TorchOp:
    """The PyTorch contender for one workload; KeyError if the entry has no PyTorch form."""
    torch = import_torch(threads)
    nograd = torch.inference_mode()
    back: Callable[[object], np.ndarray] = _to_channels_last
    if name == "GMM":
        a, b = (torch.from_numpy(x) for x in inputs)
        call, back = (lambda: torch.bmm(a, b)), (lambda y: y.numpy())
    elif name in ("C1D", "C2D", "C3D"):
        call = _conv(torch, args, inputs, {"C1D": 1, "C2D": 2, "C3D": 3}[name])
    elif name == "DIL":
        call = _conv(torch, args, inputs, 2, args["dilation"])
    elif name == "GRP":
        call = _grp(torch, args, inputs)
    elif name == "DEP":
        call = _dep(torch, args, inputs)
    elif name == "T2D":
        call = _t2d(torch, args, inputs)
    elif name == "CAP":
        call, back = _cap(torch, args, inputs)
    elif name == "NRM":
        x = torch.from_numpy(inputs[0])
        call, back = (lambda: torch.linalg.vector_norm(x, dim=(1, 2))), (lambda y: y.numpy())
    elif name == "ConvLayer":
        conv = _conv(torch, args, inputs[:2], 2)
        bias, scale, shift = (torch.from_numpy(v).reshape(1, -1, 1, 1) for v in inputs[2:])
        call = lambda: torch.relu((conv() + bias) * scale + shift)  # noqa: E731
    elif name == "TBS":
        q, k = (torch.from_numpy(x) for x in inputs)
        call, back = (lambda: torch.matmul(q.permute(0, 2, 1, 3), k.permute(0, 2, 3, 1))), (lambda y: y.numpy())
    elif name == "softmax":
        x = torch.from_numpy(inputs[0])
        call, back = (lambda: torch.softmax(x, dim=-1)), (lambda y: y.numpy())
    else:
        raise KeyError(name)

    def timed() -> object:
        with nograd:
            return call()

    return TorchOp(timed, lambda: [back(timed())])
