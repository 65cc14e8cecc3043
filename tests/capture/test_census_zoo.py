"""The census against the truth written in the zoo's source (``# BREAK: <kind>`` markers)."""

from __future__ import annotations

import inspect
import json

import pytest

from capture import BreakKind
from tests.zoo import CASES, make


def marked_breaks(model) -> dict[tuple[str, int], str]:
    """(file, line) -> kind for every ``# BREAK:`` marker in the classes the model uses."""
    marks = {}
    classes = {type(m) for m in model.modules()}
    for cls in classes:
        try:
            lines, start = inspect.getsourcelines(cls)
        except (OSError, TypeError):
            continue
        filename = inspect.getsourcefile(cls)
        for offset, text in enumerate(lines):
            if "# BREAK:" in text:
                marks[(filename, start + offset)] = text.split("# BREAK:")[1].split()[0]
    # module-level helpers called from forward
    return marks


@pytest.mark.parametrize("name", sorted(CASES))
def test_sites_match_marked_lines(name, census_of):
    census = census_of(name)
    model = make(name)[0]
    expected = marked_breaks(model)
    found = {(s.filename, s.lineno): s.kind.value for s in census.sites}
    assert found == expected, str(census)
    assert {s.kind.value for s in census.sites} == set(CASES[name].kinds)


@pytest.mark.parametrize("name", sorted(CASES))
def test_counts_agree_with_fragments(name, census_of):
    census = census_of(name)
    assert census.graph_count == len(census.fragments) >= 1
    # the summary's total is the sum of its rows (graphs also count recompiles)
    assert census.break_count == sum(s.count for s in census.sites) >= 1
    for ex in census.examples:
        assert all(0 <= f < census.graph_count for f in ex.fragment_order)
        ran = [s.fragment for s in ex.timeline if s.kind == "fragment"]
        assert tuple(ran) == ex.fragment_order
    for s in census.sites:
        assert s.count >= 1
        assert s.function and "." in s.function
        assert s.source_line and s.source_line in open(s.filename).read()


def test_branch_outcomes_cover_both_sides(census_of):
    census = census_of("branch_on_item")
    conds = census.condition_map
    taken = {t for ex in census.examples for loc, t in ex.branches(conds)}
    assert taken == {"then", "else"}
    # the branch taken decides which fragment runs after the break
    after = {ex.branches(conds)[0][1]: ex.fragment_order[1:] for ex in census.examples}
    assert after["then"] != after["else"]


def test_flag_read_then_branch_is_traced_as_data_dependent(census_of):
    census = census_of("flag_then_branch")
    (site,) = census.sites
    conds = [c for c in census.conditions if c.data_dependent]
    assert [c.lineno for c in conds] == [site.lineno + 1]
    outcomes = {o.taken for ex in census.examples for o in ex.outcomes}
    assert outcomes == {"then", "else"}


def test_nested_site_attributed_to_every_layer(census_of):
    census = census_of("nested_encoder")
    (site,) = census.sites
    assert site.function == "GatedAttention.forward"
    assert site.module_paths == ("layers.0.attn", "layers.1.attn")
    assert site.module_path == "layers.0.attn"
    assert any("Encoder.forward" in frame for frame in site.call_chain)


def test_loop_fragments_differ_per_trip_count(census_of):
    census = census_of("tensor_counted_loop")
    assert census.sites[0].kind == BreakKind.LOOP
    orders = [ex.fragment_order for ex in census.examples]
    assert orders[0] != orders[1]  # Dynamo specialises on the trip count: one graph each


def test_print_is_kept_not_dropped(census_of):
    census = census_of("print_stats")
    assert all("hidden mean:" in ex.stdout for ex in census.examples)


def test_flow_graph_has_data_edges_between_fragments(census_of):
    census = census_of("print_stats")
    flow = census.flow
    assert {"F0", "F1"} <= set(flow.nodes)
    glue = [n for n, d in flow.nodes(data=True) if d["kind"] == "glue" and d["sites"]]
    assert glue and flow.has_edge("F0", glue[0]) and flow.has_edge(glue[0], "F1")
    assert "data" in flow.edges["F0", "F1"]["kinds"]  # h flows from F0 into F1


def test_json_round_trips_and_table_renders(census_of):
    census = census_of("nested_encoder")
    data = json.loads(census.dumps())
    assert data["graph_count"] == census.graph_count
    assert data["sites"][0]["kind"] == "branch"
    assert data["sites"][0]["module_paths"] == ["layers.0.attn", "layers.1.attn"]
    assert "graph_module" not in json.dumps(data["fragments"])
    assert {"nodes", "edges"} <= set(data["flow"])
    text = str(census)
    assert "GatedAttention.forward" in text and "layers.0.attn" in text


def test_source_names_of_fragment_inputs(census_of):
    census = census_of("print_stats")
    sources = census.fragments[0].input_sources
    assert any("_parameters['weight']" in s for s in sources)
    assert "L['x']" in sources
