"""The atlas's two-level section (issue 42) counts what the rows say, recounted here by hand."""

import math

import pandas as pd

from interp.inspect.studies import atlas_levels


def _row(outcome, routing, code="unmeasured", key_code="unmeasured", dim=math.nan, case=3):
    return dict(case=case, n=10, d_token=8, n_layers=1, architecture="attention-only",
                function="permutation", outcome=outcome, label=routing, routing=routing, code=code,
                key_code=key_code, value_dim=dim)


def test_levels_section_counts_routes_and_codes_of_successful_seeds():
    df = pd.DataFrame([_row("success", "lookup", "circle", "circle", 2.0),
                       _row("success", "lookup", "codebook", "codebook", 7.0),
                       _row("success", "lookup", "codebook", "circle", 9.0),
                       _row("success", "inverted", "unread", "unread"),
                       _row("partial", "lookup", "circle", "circle", 2.0),  # not successful
                       _row("failed", "failed", "failed", "failed")])
    lines = atlas_levels.levels_markdown(df)
    panel = "case 3, 1 layer, attention-only, permutation"
    route = next(line for line in lines if line.startswith(f"| {panel} | 4 |"))
    # lookup 3, mirror 0, inverted 1, mlp-lookup 0, other 0, none 0, untestable 0, unmeasured 0, rest 0
    assert route == f"| {panel} | 4 | 3 | 0 | 1 | 0 | 0 | 0 | 0 | 0 | 0 |"
    code = next(line for line in lines if line.startswith(f"| {panel} | 3 |"))
    # circle 1, uneven 0, low-dim 0, codebook 2, unread 0, untestable 0, unmeasured 0, other 0;
    # keys circle 2, not 1; median dimension of 2, 7, 9 = 7
    assert code == f"| {panel} | 3 | 1 | 0 | 0 | 2 | 0 | 0 | 0 | 0 | 2 | 1 | 7 |"
    shares = atlas_levels.code_shares(df)
    assert shares["lookup"] == 3 and shares["codebook"] == 2 / 3 and shares["circle"] == 1 / 3


def test_an_atlas_before_issue_42_says_it_has_no_levels():
    df = pd.DataFrame([_row("success", "lookup")]).drop(columns=["routing", "code", "key_code"])
    assert "written before issue 42" in atlas_levels.levels_markdown(df)[0]
    assert atlas_levels.code_shares(df) == {"lookup": 0}
