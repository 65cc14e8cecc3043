"""The census on real transformers models (tiny configs, random weights, no hub)."""

from __future__ import annotations

import functools
import json

import pytest
from conftest import run_legacy

pytestmark = pytest.mark.hf


@functools.cache
def hf_census(name: str):
    from capture import explain
    from tests.zoo import hf

    model, args, kwargs, examples = getattr(hf, name)()
    return explain(model, args, kwargs, examples=examples)


def _line(filename: str, lineno: int) -> str:
    with open(filename) as f:
        return f.readlines()[lineno - 1]


@pytest.mark.parametrize("name, cls", [("longformer", "LongformerEncoder"), ("led", "LEDEncoder")])
def test_global_attention_flag_read(name, cls):
    census = hf_census(name)
    site = census.sites[0]
    # the truth: the encoder reads the flag with .item() on exactly this line
    assert "is_global_attn" in _line(site.filename, site.lineno)
    assert ".item()" in _line(site.filename, site.lineno)
    assert site.kind.value == "scalar_read"
    assert site.function == f"{cls}.forward"
    assert site.module_path == "encoder"
    assert census.break_count >= 1


def test_longformer_global_path_sites_are_inside_self_attention():
    census = hf_census("longformer")
    deep = [s for s in census.sites if s.function.startswith("LongformerSelfAttention")]
    assert deep, str(census)
    for s in deep:
        assert s.module_paths == ("encoder.layer.0.attention.self",
                                  "encoder.layer.1.attention.self")
    assert any(s.kind.value == "dynamic_shape" and "nonzero" in s.source_line for s in deep)
    # global attention runs only for the second example: more fragments there
    assert len(census.examples[1].fragment_order) > len(census.examples[0].fragment_order)


LEGACY_CODE = """
import json
from capture import explain
from tests.zoo import hf
model, args, kwargs, examples = hf.{name}()
print("CENSUS" + json.dumps(explain(model, args, kwargs, examples=examples).to_json()))
"""


@functools.cache
def legacy_census(name: str) -> dict:
    done = run_legacy(LEGACY_CODE.format(name=name))
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith("CENSUS"))
    return json.loads(line[len("CENSUS"):])


@pytest.mark.hf_legacy
@pytest.mark.parametrize("name, function, module", [
    ("t5_cond_gen", "T5Stack.forward", "decoder"),
    ("bart_cond_gen", "BartDecoder.forward", "model.decoder"),
])
def test_legacy_warning_once(name, function, module):
    data = legacy_census(name)
    (site,) = data["sites"]
    assert site["kind"] == "side_effect"
    assert "logger.warning_once(" in _line(site["filename"], site["lineno"])
    assert "/transformers/" in site["filename"]
    assert site["function"] == function
    assert site["module_path"] == module
    assert data["graph_count"] >= 2
    assert data["break_count"] == sum(s["count"] for s in data["sites"]) >= 1
