"""Config rules of the transformers builder (sweep_hf.py) that keep a shrunk config
consistent where the default config's fields depend on each other or are missing: derived
head sizes, multimodal rotary sections, fields a default config lacks."""

from __future__ import annotations

import inspect
from pathlib import Path

# fields a default config derives from others (multi-head latent attention: the query/key
# head is the no-rope part plus the rope part; the rotary head is the rope part): field ->
# the fields it is the sum of
DERIVED = {"qk_head_dim": ("qk_nope_head_dim", "qk_rope_head_dim"),
           "head_dim": ("qk_rope_head_dim",)}


def relations_of(config) -> list[str]:
    """The DERIVED fields that hold in ``config`` as it is (before shrinking)."""
    def value(k):
        v = getattr(config, k, None)
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    return [field for field, parts in DERIVED.items()
            if value(field) is not None and all(value(p) is not None for p in parts)
            and value(field) == sum(value(p) for p in parts)]


def keep_relations(config, relations: list[str], changed: list[str]) -> None:
    """Each relation the default held, made to hold again on the shrunk fields."""
    for field in relations:
        total = sum(getattr(config, p) for p in DERIVED[field])
        if getattr(config, field) != total:
            setattr(config, field, total)
            changed.append(field)


# config fields some default configs refuse to be without (the forecasting transformers)
REQUIRED = {"prediction_length": 4}


def required_fields(model_type: str) -> dict:
    """The REQUIRED fields this model type's config takes and has no default for."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    params = inspect.signature(CONFIG_MAPPING[model_type].__init__).parameters
    return {k: v for k, v in REQUIRED.items()
            if k in params and params[k].default is None}


def _speaks_of(config_class: type, word: str) -> bool:
    """Whether the configuration or modeling source of ``config_class``'s package has
    ``word``."""
    import importlib.util

    name = config_class.__module__
    for module in (name, name.replace(".configuration_", ".modeling_")):
        spec = importlib.util.find_spec(module)
        if spec is not None and spec.origin and word in Path(spec.origin).read_text():
            return True
    return False


def fit_mrope(config, changed: list[str]) -> None:
    """Multimodal rotary sections (Qwen2-VL, GLM-4V: temporal, height, width) must sum to
    half the head size; the code's default ([16, 24, 24]) fits only the full size. Where the
    config's class speaks of them, they are set in the same 2:3:3 proportion for the
    shrunk head."""
    rope = getattr(config, "rope_parameters", None)  # transformers 5
    if not isinstance(rope, dict):
        rope = getattr(config, "rope_scaling", None)  # transformers 4
    heads, hidden = getattr(config, "num_attention_heads", None), getattr(config, "hidden_size", None)
    head = getattr(config, "head_dim", None)
    if not isinstance(head, int) and isinstance(heads, int) and isinstance(hidden, int):
        head = hidden // heads
    if not (isinstance(rope, dict) and isinstance(head, int) and head >= 8):
        return
    if "mrope_section" not in rope and not _speaks_of(type(config), "mrope_section"):
        return
    half = int(head * rope.get("partial_rotary_factor", 1.0)) // 2
    if sum(rope.get("mrope_section") or (16, 24, 24)) == half:
        return  # already fits
    t = half // 4
    rope["mrope_section"] = [t, (half - t) // 2, half - t - (half - t) // 2]
    changed.append("rope_parameters.mrope_section")
