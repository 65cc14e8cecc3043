"""The sweep harness's pure parts: config shrinking, classification, summary grouping.
No model runs here (one tiny transformers build, marked slow)."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "experiments"))

from sweep_report import Outcome, classify, refusal_group, summarize  # noqa: E402


def _rec(name, *, graphs=1, breaks=0, exported=True, matches=True, stitch=None, **extra):
    rec = {"model": name, "stage": "done", "build": {"ok": True}, "eager": {"ok": True,
                                                                            "deterministic": True},
           "dynamo": {"ok": True, "graphs": graphs, "breaks": breaks},
           "torch_export": {"ok": exported, **({"matches": matches} if exported else {})},
           "stitch": stitch or {"result": "StitchedProgram", "matches": True}}
    rec.update(extra)
    return rec


REFUSED = {"result": "refused", "error_class": "UnfixableBreaksError",
           "message": "UnfixableBreaksError: 2 breaks", "kinds_left": ["dynamic_shape"]}


def test_classify_each_outcome():
    assert classify(_rec("a")).outcome == Outcome.ONE_GRAPH
    assert classify(_rec("b", stitch=REFUSED)).outcome == Outcome.REFUSED
    crash = {"result": "crash", "error": "TypeError: boom"}
    assert classify(_rec("c", stitch=crash)).outcome == Outcome.CRASH
    differs = {"result": "StitchedProgram", "matches": False, "why_not": "output 0"}
    assert classify(_rec("d", stitch=differs)).outcome == Outcome.MISMATCH
    assert classify(_rec("e", timeout=240, stage="stitch")).outcome == Outcome.TIMEOUT
    assert classify({"model": "f", "stage": "done",
                     "build": {"ok": False, "error": "x"}}).outcome == Outcome.NOT_BUILT
    assert classify(_rec("g", eager={"ok": False, "error": "e"})).outcome == Outcome.EAGER_FAILED
    partial = {"result": "PartialProgram", "kinds_left": ["loop"]}
    assert classify(_rec("h", stitch=partial)).outcome == Outcome.PARTIAL
    died = _rec("i", stage="stitch", died="exit -11")
    assert classify(died).outcome == Outcome.CRASH
    start = {"model": "j", "stage": "start", "harness_error": "ImportError: x"}
    assert classify(start).outcome == Outcome.HARNESS_ERROR


def test_nondeterministic_eager_is_no_mismatch():
    rec = _rec("a", stitch={"result": "StitchedProgram", "matches": False},
               eager={"ok": True, "deterministic": False})
    assert classify(rec).outcome == Outcome.ONE_GRAPH


def test_breaking_means_dynamo_breaks_or_export_refuses():
    assert classify(_rec("a", graphs=3, breaks=2)).breaks
    assert classify(_rec("b", exported=False)).breaks
    assert classify(_rec("c", matches=False)).breaks
    assert not classify(_rec("d")).breaks


def test_refusal_groups_drop_paths_and_numbers():
    assert refusal_group(REFUSED) == "UnfixableBreaksError: left dynamic_shape"
    a = refusal_group({"error_class": "VerificationError",
                       "message": "VerificationError: output 3 differs at /x/y/m.py:12"})
    b = refusal_group({"error_class": "VerificationError",
                       "message": "VerificationError: output 5 differs at /z/n.py:40"})
    assert a == b == "VerificationError: output # differs at <file>#"


def test_summary_figures_and_groups():
    records = [_rec("ok1", graphs=2, breaks=1), _rec("ok2"),
               _rec("ref1", graphs=2, breaks=1, exported=False, stitch=REFUSED),
               _rec("ref2", stitch=REFUSED),  # torch.export exports it, stitch refused: listed
               _rec("bad", graphs=2, breaks=1, stitch={"result": "crash", "error": "E: x"}),
               {"model": "nb", "stage": "done", "build": {"ok": False, "error": "no rule"}}]
    s = summarize(records)
    assert (s["records"], s["ran"]) == (6, 5)
    assert (s["breaking"], s["breaking_one_graph"]) == (3, 1)
    assert s["breaking_one_graph_share"] == pytest.approx(1 / 3, abs=1e-3)
    assert s["exported_but_stitch_did_not"] == ["bad", "ref2"]  # a crash counts too
    assert s["refusals"] == {"UnfixableBreaksError: left dynamic_shape": ["ref1", "ref2"]}
    assert s["crashes"] == {"bad": "E: x"} and s["mismatches"] == {}
    assert s["not_run"] == {"not_built: no rule": ["nb"]}


def test_guarded_programs_are_counted_apart_from_the_default():
    guarded = {"result": "StitchedProgram", "matches": True, "inputs": ["match", "match"]}
    data = {"result": "StitchedProgram", "matches": True, "inputs": ["match", "guard"]}
    wrong = {"result": "StitchedProgram", "matches": False, "inputs": ["differs", "match"]}
    records = [_rec("ok", graphs=2, breaks=1),
               _rec("pinned", graphs=2, breaks=1, stitch=REFUSED, stitch_guarded=guarded),
               _rec("wrong", graphs=2, breaks=1, stitch=REFUSED, stitch_guarded=wrong),
               _rec("plain", graphs=2, breaks=1, stitch=REFUSED),
               _rec("data", graphs=2, breaks=1, stitch=REFUSED, stitch_guarded=data)]
    s = summarize(records)
    assert (s["breaking"], s["breaking_one_graph"]) == (5, 1)  # the default is unchanged
    assert s["breaking_one_graph_with_guards"] == 2
    assert s["guarded_one_graph"] == ["pinned"] and s["guarded_mismatches"] == ["wrong"]
    assert s["guards_refuse_inputs"] == ["data"]  # pinned to one input's data: not counted
    assert classify(records[1]).outcome == Outcome.REFUSED
    # the time limit reached in the guarded stage: the default's refusal stands
    late = _rec("late", graphs=2, breaks=1, stitch=REFUSED, timeout=900, stage="stitch_guarded")
    assert classify(late).outcome == Outcome.REFUSED
    assert summarize([late])["guarded_timeouts"] == ["late"]


def test_shrink_sizes_subconfigs_and_token_ids():
    transformers = pytest.importorskip("transformers")
    from sweep_hf import shrink

    config = transformers.CLIPConfig()
    config.text_config.eos_token_id = 49407
    changed = shrink(config)
    assert config.text_config.hidden_size == 32 and config.vision_config.num_hidden_layers == 2
    assert config.text_config.vocab_size == 128 and config.text_config.eos_token_id < 128
    assert "text_config.hidden_size" in changed
    swin = transformers.SwinConfig()
    shrink(swin)
    assert swin.depths == [1, 1, 1, 1] and swin.num_heads == [1, 2, 4, 8]
    assert swin.embed_dim == 32


def test_shallow_plan_keeps_every_width():
    """The fallback plan shrinks only counts (layers, stages, experts, vocabulary), so widths
    that must agree keep their defaults."""
    transformers = pytest.importorskip("transformers")
    from sweep_hf import PLANS, shrink

    assert list(PLANS) == ["tiny", "shallow", "narrow8", "narrow32"]  # tried in this order
    config = transformers.CLIPConfig()
    changed = shrink(config, *PLANS["shallow"])
    assert config.text_config.hidden_size == transformers.CLIPTextConfig().hidden_size
    assert config.vision_config.num_hidden_layers == 2 and config.text_config.vocab_size == 128
    assert "text_config.num_hidden_layers" in changed and "text_config.hidden_size" not in changed
    swin = transformers.SwinConfig()
    shrink(swin, *PLANS["shallow"])
    assert swin.depths == [1, 1, 1, 1] and swin.embed_dim == transformers.SwinConfig().embed_dim
    assert swin.num_heads == transformers.SwinConfig().num_heads


def test_narrow_plan_divides_every_width_by_one_factor():
    """Widths the tiny plan does not know by name are divided too, by the same factor, so
    sums and multiples between them still hold; ids, rates and positions are left."""
    transformers = pytest.importorskip("transformers")
    from sweep_hf import PLANS, shrink

    config = transformers.LlamaConfig(hidden_size=4096, intermediate_size=11008,
                                      num_attention_heads=32, head_dim=128,
                                      max_position_embeddings=4096, bos_token_id=1)
    config.some_projection_width = 2 * 4096  # a width no rule names
    config.sampling_rate, config.odd_width = 16000, 1001
    changed = shrink(config, *PLANS["narrow8"])
    assert (config.hidden_size, config.intermediate_size, config.head_dim) == (512, 1376, 16)
    assert config.some_projection_width == 2 * config.hidden_size
    assert config.num_attention_heads * config.head_dim == config.hidden_size
    assert (config.num_hidden_layers, config.vocab_size) == (2, 128)
    assert config.max_position_embeddings == 4096 and config.sampling_rate == 16000
    assert config.odd_width == 1001  # not a multiple of 8: left
    assert "some_projection_width" in changed and "max_position_embeddings" not in changed


@pytest.mark.slow
def test_builds_a_tiny_bert_with_inputs():
    pytest.importorskip("transformers")
    from sweep_hf import build, make_inputs

    model, config, _ = build("bert", "BertModel")
    args, kwargs = make_inputs(model, config)
    assert args[0].shape == (1, 16) and "attention_mask" in kwargs
    assert sum(p.numel() for p in model.parameters()) < 1_000_000
    model(*args, **kwargs)


@pytest.mark.slow
def test_builds_a_vision_tower_from_patches_and_grid():
    """A Qwen-style vision tower takes flattened patches and their (t, h, w) grid: the rule
    makes as many patches as the grid holds, each as wide as the patch embedding views it."""
    pytest.importorskip("transformers")
    import sweep_hf

    # hidden_states + grid_thw; pixel_values as the main input, its temporal patch and merge
    # named otherwise (patch_temporal, merge_size)
    for name in ("qwen2_5_vl_vision", "muse_glimmer_vision"):
        if name not in sweep_hf.architectures():
            pytest.skip(f"{name} is not in this transformers")
        model, config, _ = sweep_hf.build(name, sweep_hf.architectures()[name])
        args, kwargs = sweep_hf.make_inputs(model, config)
        t, h, w = kwargs["grid_thw"][0].tolist()
        patches = kwargs.get("hidden_states", args[0] if args else None)
        assert patches.shape[0] == t * h * w and "input_ids" not in kwargs
        model(*args, **kwargs)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["patchtst", "timesfm", "informer", "videomae", "qwen2_vl",
                                  "deepseek_v32"])
def test_builds_time_series_video_and_mrope_models(name):
    """Time series take ``past_values`` (plus lags, time features and an observed mask for
    the forecasting transformers, whose config needs a prediction length); video models
    take (batch, frames, channels, height, width) pixels; multimodal rotary sections are
    made to sum to half the shrunk head; latent attention's derived head sizes (query/key
    head = no-rope + rope part, rotary head = rope part) hold again after shrinking. Each
    builds and runs eagerly."""
    pytest.importorskip("transformers")
    import sweep_hf

    if name not in sweep_hf.architectures():
        pytest.skip(f"{name} is not in this transformers")
    model, config, _ = sweep_hf.build(name, sweep_hf.architectures()[name])
    args, kwargs = sweep_hf.make_inputs(model, config)
    main = (args or [kwargs.get("past_values"), kwargs.get("pixel_values")])[0]
    if name == "videomae":
        assert main.dim() == 5 and main.shape[1] == config.num_frames
    if name == "informer":
        lags = max(config.lags_sequence)
        assert kwargs["past_observed_mask"].shape[1] == config.context_length + lags
    if name == "deepseek_v32":
        assert config.qk_head_dim == config.qk_nope_head_dim + config.qk_rope_head_dim
        assert config.head_dim == config.qk_rope_head_dim
    if name == "qwen2_vl":
        text = config.text_config
        head = text.hidden_size // text.num_attention_heads
        assert sum(text.rope_parameters["mrope_section"]) == head // 2
    model(*args, **kwargs)


def test_until_is_the_next_such_minute_across_midnight():
    """``--until 00:14`` given at 23:59 means a quarter of an hour, not "already past"."""
    import time

    from sweep import _deadline

    one_minute_ago = time.strftime("%H:%M", time.gmtime(time.time() - 60))
    assert 23 * 3600 < _deadline(one_minute_ago) - time.time() <= 24 * 3600
    in_two = time.strftime("%H:%M", time.gmtime(time.time() + 120))
    assert 0 < _deadline(in_two) - time.time() <= 180


def test_the_bench_takes_the_breaking_models_stitch_fixed(tmp_path):
    """bench_sweep's rows: models that break (or that torch.export refuses) and came out
    one verified graph; not those that do not break, nor refusals, nor mismatches."""
    import json

    from bench_sweep import fixed_by_stitch

    differs = {"result": "StitchedProgram", "matches": False, "why_not": "output 0"}
    records = [_rec("fixed", breaks=2), _rec("calm"), _rec("refused", breaks=1, stitch=REFUSED),
               _rec("unexportable", exported=False), _rec("wrong", breaks=1, stitch=differs)]
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps({"suites": {"hf": {"records": records},
                                           "torchvision": {"records": []}}}))
    assert fixed_by_stitch(str(path)) == [("hf", "fixed"), ("hf", "unexportable")]


def test_the_bench_takes_guarded_models_with_guards(tmp_path):
    """A model one graph only with guards on request gets a row, exported with guards."""
    import json

    from bench_sweep import fixed_by_stitch, guarded_only

    pinned = {"result": "StitchedProgram", "matches": True, "inputs": ["match", "match"]}
    data = {"result": "StitchedProgram", "matches": True, "inputs": ["match", "guard"]}
    records = [_rec("fixed", breaks=2),
               _rec("tower", breaks=2, stitch=REFUSED, stitch_guarded=pinned),
               _rec("rcnn", breaks=2, stitch=REFUSED, stitch_guarded=data)]
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps({"suites": {"hf": {"records": records}}}))
    assert fixed_by_stitch(str(path)) == [("hf", "fixed"), ("hf", "tower")]
    assert guarded_only(str(path)) == {"tower"}


def test_the_library_bench_takes_the_fastest_exports_first(tmp_path, monkeypatch):
    """The library suites' rows across suites by the sweep's export time, so a run cut
    short has measured the most rows it could."""
    import json

    import bench_sweep

    slow, quick = _rec("slow", breaks=1), _rec("quick", breaks=1)
    slow["seconds"], quick["seconds"] = {"stitch": 300.0}, {"stitch": 4.0}
    path = tmp_path / "sweep_libs.json"
    path.write_text(json.dumps({"suites": {"timm": {"records": [slow]},
                                           "kornia": {"records": [quick]}}}))
    monkeypatch.setattr(bench_sweep, "SOURCE", "libs")
    assert bench_sweep.fixed_by_stitch(str(path)) == [("kornia", "quick"), ("timm", "slow")]
