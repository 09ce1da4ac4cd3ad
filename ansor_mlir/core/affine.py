"""Affine maps as pure data: the indexing maps of linalg ops, typed from extraction on.

Extraction converts the bindings' `ir.AffineMap` into these values
(`frontend.affine_maps`); the DAG roles, tile resolution and features read
them through queries, never by parsing printed maps. A result of a linalg
indexing map is almost always linear in the loop dims (`d1 * 2 + d4`); any
other result (mod, floordiv, ceildiv, a symbol, a product of dims) is kept as
a non-linear expression that only names the dims it reads, so no query can
mistake it for a linear one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import prod


@dataclass(frozen=True)
class AffineExpr:
    """One result of an affine map: `sum(coefficient * d_dim) + constant`, or a non-linear expression.

    `terms` keep the order MLIR prints them in (`d1 * 2 + d4` is `((1, 2), (4, 1))`),
    one term per dim, no zero coefficients. When `linear` is False the
    expression is not a linear function of the dims: `terms` then lists the
    dims it reads with coefficient 1 and `constant` is 0; `coefficient`
    refuses to answer for it.
    """

    terms: tuple[tuple[int, int], ...] = ()
    constant: int = 0
    linear: bool = True

    @staticmethod
    def dim(position: int, coefficient: int = 1) -> AffineExpr:
        return AffineExpr(((position, coefficient),) if coefficient else ())

    @staticmethod
    def const(value: int) -> AffineExpr:
        return AffineExpr((), value)

    @staticmethod
    def nonlinear(dims: Sequence[int]) -> AffineExpr:
        """A non-linear expression (mod, floordiv, symbols, ...) reading `dims`."""
        return AffineExpr(tuple((d, 1) for d in dict.fromkeys(dims)), 0, linear=False)

    def __add__(self, other: AffineExpr) -> AffineExpr:
        if not (self.linear and other.linear):
            return AffineExpr.nonlinear(self.dims() + other.dims())
        coefficients = dict(self.terms)
        for d, c in other.terms:
            coefficients[d] = coefficients.get(d, 0) + c
        terms = tuple((d, c) for d, c in coefficients.items() if c)
        return AffineExpr(terms, self.constant + other.constant)

    def scaled(self, factor: int) -> AffineExpr:
        if not self.linear:
            return self
        if factor == 0:
            return AffineExpr()
        return AffineExpr(tuple((d, c * factor) for d, c in self.terms), self.constant * factor)

    def dims(self) -> tuple[int, ...]:
        """The loops the expression reads, in printed order."""
        return tuple(d for d, _ in self.terms)

    def is_dim(self) -> bool:
        """A plain loop index `d3` (a projected-permutation result)."""
        return self.linear and self.constant == 0 and len(self.terms) == 1 and self.terms[0][1] == 1

    def is_constant(self) -> bool:
        return self.linear and not self.terms

    @property
    def position(self) -> int | None:
        """The loop of a plain `d3` result, else None."""
        return self.terms[0][0] if self.is_dim() else None

    def coefficient(self, dim: int) -> int:
        """How far the access moves per step of loop `dim` (0 when it does not read it)."""
        if not self.linear:
            raise ValueError(f"no coefficient of d{dim}: the expression is not linear in the loop dims")
        return dict(self.terms).get(dim, 0)

    def span(self, sizes: Sequence[int]) -> int:
        """Elements this access covers when each loop `d` takes `sizes[d]` consecutive values.

        Exact for linear accesses (`d1 * 2 + d4` over 4 x 3 values: 2*3 + 2 + 1 = 9);
        a non-linear one is bounded as if each loop it reads had coefficient 1.
        """
        return 1 + sum(abs(c) * (sizes[d] - 1) for d, c in self.terms)

    def to_json(self) -> dict:
        data: dict = {"terms": [list(t) for t in self.terms], "constant": self.constant}
        if not self.linear:
            data["linear"] = False
        return data

    @staticmethod
    def from_json(data: dict) -> AffineExpr:
        return AffineExpr(
            tuple((int(d), int(c)) for d, c in data["terms"]), int(data["constant"]), bool(data.get("linear", True))
        )


@dataclass(frozen=True)
class AffineMap:
    """An indexing map `(d0, .., d{num_dims-1}) -> (results)` of a linalg op."""

    num_dims: int
    results: tuple[AffineExpr, ...]
    num_symbols: int = 0

    @staticmethod
    def projection(num_dims: int, dims: Sequence[int]) -> AffineMap:
        """`(d0, ..) -> (d_i, d_j, ..)`: a projected permutation (matmul's `(d0, d2)`)."""
        return AffineMap(num_dims, tuple(AffineExpr.dim(d) for d in dims))

    def dims(self) -> frozenset[int]:
        """Every loop some result reads."""
        return frozenset(d for expr in self.results for d in expr.dims())

    def result_dims(self) -> tuple[int | None, ...]:
        """Per result, the loop of a plain `d` result, else None."""
        return tuple(expr.position for expr in self.results)

    def is_projected_permutation(self) -> bool:
        positions = self.result_dims()
        return None not in positions and len(set(positions)) == len(positions)

    def spans(self, sizes: Sequence[int]) -> tuple[int, ...]:
        """Per result, the elements a tile of `sizes` loop values covers."""
        return tuple(expr.span(sizes) for expr in self.results)

    def footprint(self, sizes: Sequence[int]) -> int:
        """Elements of the operand one tile of `sizes` loop values touches."""
        return prod(self.spans(sizes))

    def to_json(self) -> dict:
        return {"dims": self.num_dims, "symbols": self.num_symbols, "results": [e.to_json() for e in self.results]}

    @staticmethod
    def from_json(data: dict) -> AffineMap:
        return AffineMap(
            int(data["dims"]), tuple(AffineExpr.from_json(e) for e in data["results"]), int(data.get("symbols", 0))
        )
