"""How a Dynamo break is classified from its type, its text and the statement at the site
(capture/sites.py ``KIND_RULES``)."""

from __future__ import annotations

import ast

import pytest

from capture.sites import BreakKind, Evidence, classify

# Dynamo's break where torch.cdist tested a row count from data (torch_geometric's MemPooling)
_OP_GUARD = ("UserError", "Could not guard on data-dependent expression u0*u4 > 25 (unhinted: "
             "u0*u4 > 25).  (Size-like symbols: none)")


def _kind(source: str, gb_type: str, reason: str) -> tuple[BreakKind, str]:
    return classify(Evidence(gb_type, reason, ast.parse(source).body[0]))


def test_a_torch_ops_own_test_of_a_size_from_data_is_left_to_torch_export():
    kind, rule = _kind("dist = torch.cdist(k, x.view(B * N, -1), p=2) ** 2", *_OP_GUARD)
    assert kind == BreakKind.DYNAMIC_SHAPE, rule
    assert rule == "torch op's own test of a size from data"


@pytest.mark.parametrize("source", ["if x.shape[0] > 25:\n    x = x * 2",
                                    "y = x * 2 if x.shape[0] > 25 else x",
                                    "while x.shape[0] > 25:\n    x = x[1:]",
                                    "assert x.shape[0] > 25"])
def test_the_users_own_test_of_such_a_size_is_not_the_ops(source):
    kind, rule = _kind(source, *_OP_GUARD)
    assert rule != "torch op's own test of a size from data", kind
