"""Affine maps are typed data from extraction on: read through the bindings' expression tree, queried, not parsed."""

from __future__ import annotations

import json

import pytest

from ansor_mlir.core.affine import AffineExpr, AffineMap
from ansor_mlir.frontend.affine_maps import parse_affine_map

CONV = "affine_map<(d0, d1, d2, d3, d4, d5) -> (d0 * 2 + d3, d1 + d4 * 3, d5)>"


def test_linear_results_keep_coefficients_in_printed_order():
    amap = parse_affine_map(CONV)
    assert amap.num_dims == 6
    assert [e.terms for e in amap.results] == [((0, 2), (3, 1)), ((1, 1), (4, 3)), ((5, 1),)]
    assert amap.results[1].coefficient(4) == 3
    assert amap.results[1].coefficient(0) == 0
    assert amap.result_dims() == (None, None, 5)
    assert amap.dims() == {0, 1, 3, 4, 5}
    assert not amap.is_projected_permutation()


def test_subtraction_constants_and_negation_are_linear():
    amap = parse_affine_map("affine_map<(d0, d1, d2) -> (d0 - d2, d1 + 3, -d2, 7)>")
    diff, offset, negated, constant = amap.results
    assert diff.terms == ((0, 1), (2, -1)) and diff.linear
    assert offset.terms == ((1, 1),) and offset.constant == 3 and not offset.is_dim()
    assert negated.coefficient(2) == -1 and negated.position is None
    assert constant.is_constant() and constant.constant == 7
    # A window read backwards spans as many elements as one read forwards.
    assert diff.span([4, 1, 3]) == 4 + 3 - 1


def test_non_linear_results_are_flagged_not_misread():
    amap = parse_affine_map("affine_map<(d0, d1)[s0] -> (d0 mod 4, d1 floordiv 2 + d0, s0, d1 * s0)>")
    assert [e.linear for e in amap.results] == [False, False, False, False]
    assert amap.results[0].dims() == (0,)
    assert amap.results[1].dims() == (1, 0)
    assert amap.results[2].dims() == ()
    assert amap.num_symbols == 1
    with pytest.raises(ValueError, match="not linear"):
        amap.results[0].coefficient(0)
    assert amap.result_dims() == (None, None, None, None)


def test_span_and_footprint_count_a_strided_window():
    amap = parse_affine_map("affine_map<(d0, d1, d2, d3, d4, d5) -> (d0 * 2 + d3, d1 + d4, d5)>")
    # A 4x4 output tile of a stride-2 3x3 window over 8 channels: (2*3+2+1) x (3+2+1) x 8.
    assert amap.spans((4, 4, 1, 3, 3, 8)) == (9, 6, 8)
    assert amap.footprint((4, 4, 1, 3, 3, 8)) == 9 * 6 * 8


def test_projection_matches_a_parsed_permutation_and_round_trips_json():
    parsed = parse_affine_map("affine_map<(d0, d1, d2) -> (d2, d0)>")
    built = AffineMap.projection(3, (2, 0))
    assert parsed == built and hash(parsed) == hash(built)
    assert built.is_projected_permutation()
    for amap in (parsed, parse_affine_map(CONV), parse_affine_map("affine_map<(d0)[s0] -> (d0 mod 4, s0)>")):
        assert AffineMap.from_json(json.loads(json.dumps(amap.to_json()))) == amap


def test_expressions_add_and_scale_like_sums():
    expr = AffineExpr.dim(1, 2) + AffineExpr.dim(4) + AffineExpr.const(-1)
    assert expr == AffineExpr(((1, 2), (4, 1)), -1)
    assert (expr + AffineExpr.dim(1, -2)).terms == ((4, 1),)
    assert expr.scaled(3).terms == ((1, 6), (4, 3))
    assert not (expr + AffineExpr.nonlinear((0,))).linear
