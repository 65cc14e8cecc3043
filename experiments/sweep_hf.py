"""A generic tiny-model builder for every transformers architecture (5.x and 4.52.4).

No hand-written list: architectures come from transformers' auto mappings, the config
class's defaults are shrunk by field name (``shrink``), the base model class of
``MODEL_MAPPING_NAMES`` is built with random weights (never ``from_pretrained``), and the
inputs are made from the forward's signature and ``model.main_input_name`` (``make_inputs``).
Anything it cannot do raises ``BuildError`` with the reason, which the sweep lists apart.
"""

from __future__ import annotations

import inspect

import torch
from sweep_config_rules import fit_mrope, keep_relations, relations_of, required_fields

SEQ = 16  # text tokens per input
DEC_SEQ = 8  # decoder tokens
VOCAB = 128
MAX_PARAMS = 30_000_000  # a shrunk model larger than this is refused (a field was missed)

# how many of each thing there is: layers, experts (and how many a token takes), vocabulary
COUNTS: dict[str, int] = {
    **dict.fromkeys(["num_hidden_layers", "num_layers", "n_layer", "n_layers",
                     "encoder_layers", "decoder_layers", "num_decoder_layers",
                     "num_encoder_layers", "depth", "encoder_depth", "decoder_depth"], 2),
    **dict.fromkeys(["vocab_size", "n_vocab"], VOCAB),
    **dict.fromkeys(["num_experts", "num_local_experts", "n_routed_experts",
                     "moe_num_experts"], 4),
    **dict.fromkeys(["num_experts_per_tok", "moe_topk", "top_k"], 2),
}
# field name -> tiny value; applied to the config and to every sub-config
SIZES: dict[str, int] = {
    **COUNTS,
    **dict.fromkeys(["hidden_size", "d_model", "n_embd", "embed_dim", "emb_dim", "dim",
                     "word_embed_proj_dim", "projection_dim", "text_embed_dim",
                     "vision_embed_dim", "d_embed", "encoder_hidden_size",
                     "decoder_hidden_size", "hidden_dim", "model_dim"], 32),
    **dict.fromkeys(["num_attention_heads", "n_head", "n_heads", "num_heads",
                     "encoder_attention_heads", "decoder_attention_heads",
                     "num_key_value_heads", "encoder_num_attention_heads",
                     "decoder_num_attention_heads"], 2),
    **dict.fromkeys(["intermediate_size", "d_ff", "ffn_dim", "encoder_ffn_dim",
                     "decoder_ffn_dim", "n_inner", "d_inner", "ffn_hidden_size",
                     "moe_intermediate_size", "shared_expert_intermediate_size",
                     "encoder_intermediate_size", "decoder_intermediate_size"], 64),
    **dict.fromkeys(["max_position_embeddings", "n_positions", "max_seq_len",
                     "max_sequence_length", "max_source_positions",
                     "max_target_positions", "max_encoder_position_embeddings",
                     "max_decoder_position_embeddings", "n_ctx"], 64),
    "head_dim": 16, "d_kv": 16, "kv_lora_rank": 16, "q_lora_rank": 16,
    "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 16,
    "image_size": 32, "patch_size": 8, "num_mel_bins": 16,
    "mamba_n_heads": 2, "mamba_d_state": 16, "state_size": 16, "mamba_d_conv": 4,
    "n_groups": 1, "mamba_n_groups": 1,
}
# list-valued per-stage fields (Swin, ConvNeXt, ...): same length, tiny values
STAGE_LISTS = {"depths": lambda i: 1, "hidden_sizes": lambda i: 16 * 2 ** i,
               "num_heads": lambda i: 2 ** i, "embed_dims": lambda i: 16 * 2 ** i,
               "num_attention_heads": lambda i: 2 ** i}

# The shallow plan shrinks only COUNTS (and per-stage depths): every width keeps its default,
# so widths that must agree with each other (a projection sized from two fields the tiny plan
# sets apart) still do.
# The narrow plans shrink COUNTS and divide every other width by one factor (``_is_width``).
# name -> (field sizes, per-stage lists, width divisor); the builder tries them in this
# order and keeps the first that constructs, fits MAX_PARAMS and runs its inputs eagerly
DEPTHS = {"depths": STAGE_LISTS["depths"]}
PLANS = {"tiny": (SIZES, STAGE_LISTS, 1), "shallow": (COUNTS, DEPTHS, 1),
         "narrow8": (COUNTS, DEPTHS, 8), "narrow32": (COUNTS, DEPTHS, 32)}


class BuildError(Exception):
    """The builder cannot make a tiny model or its inputs; the message says why."""


def architectures() -> dict[str, str]:
    """model_type -> base model class name, from ``MODEL_MAPPING_NAMES`` (the first class
    where the mapping lists several)."""
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    return {k: (v if isinstance(v, str) else v[0]) for k, v in sorted(MODEL_MAPPING_NAMES.items())}


def _sub_configs(config):
    from transformers import PretrainedConfig

    for name, value in list(vars(config).items()):
        if isinstance(value, PretrainedConfig):
            yield name, value


def shrink(config, sizes: dict[str, int] | None = None, stages: dict | None = None,
           divide: int = 1) -> list[str]:
    """Shrink ``config`` in place (and its sub-configs); returns the fields changed. With
    ``divide``, every other width (``_is_width``) is divided by it too."""
    sizes = SIZES if sizes is None else sizes
    stages = STAGE_LISTS if stages is None else stages
    changed = []
    relations = relations_of(config)
    for key, value in list(vars(config).items()):
        if isinstance(value, bool):
            continue
        if isinstance(value, int) and key in sizes and value > sizes[key]:
            setattr(config, key, sizes[key])
            changed.append(key)
        elif (isinstance(value, list | tuple) and key in stages and value
              and all(isinstance(v, int) for v in value)):
            setattr(config, key, [stages[key](i) for i in range(len(value))])
            changed.append(key)
        elif divide > 1 and key not in sizes and _is_width(key, value, divide):
            setattr(config, key, value // divide if isinstance(value, int)
                    else type(value)(v // divide for v in value))
            changed.append(key)
    _consistent(config, changed)
    keep_relations(config, relations, changed)
    for name, sub in _sub_configs(config):
        changed += [f"{name}.{k}" for k in shrink(sub, sizes, stages, divide)]
    return changed


# names that are never widths, however large and round their values
NOT_WIDTHS = ("_id", "_index", "rate", "image_size", "img_size", "position", "seed", "sample")


def _is_width(key: str, value, divide: int) -> bool:
    """A field the narrow plan divides: an int (or a list of ints) of at least 128, each
    a multiple of ``divide``, under a name that is no id, rate, position or image size.
    Dividing every such field by one factor keeps the relations between them (a sum, a
    multiple, heads x head size) that shrinking fields one by one breaks."""
    values = [value] if isinstance(value, int) else value
    return (isinstance(values, list | tuple) and bool(values)
            and all(isinstance(v, int) and not isinstance(v, bool) and v >= 128
                    and v % divide == 0 for v in values)
            and not any(n in key for n in NOT_WIDTHS))


def _consistent(config, changed: list[str]) -> None:
    """Fields that must agree with the shrunk ones: token ids inside the vocabulary, a
    head_dim that divides the hidden size, key/value heads dividing the heads, no cache."""
    vocab = getattr(config, "vocab_size", None)
    for key, value in list(vars(config).items()):
        if (key.endswith(("_token_id", "_index", "_token_index")) and isinstance(value, int)
                and not isinstance(value, bool) and isinstance(vocab, int) and value >= vocab):
            setattr(config, key, vocab - 1 - (hash(key) % 8))
            changed.append(key)
    heads = getattr(config, "num_attention_heads", None)
    kv = getattr(config, "num_key_value_heads", None)
    if isinstance(heads, int) and isinstance(kv, int) and kv and heads % kv:
        config.num_key_value_heads = heads
    hidden = getattr(config, "hidden_size", None)
    expand = getattr(config, "mamba_expand", getattr(config, "expand", None))
    for n_heads, d_head in (("mamba_n_heads", "mamba_d_head"), ("num_heads", "head_dim")):
        # Mamba-2 style mixers: heads x head size must equal expand x hidden size
        n = getattr(config, n_heads, None)
        if (isinstance(n, int) and isinstance(getattr(config, d_head, None), int)
                and isinstance(expand, int) and isinstance(hidden, int)):
            setattr(config, n_heads, min(n, 2))
            setattr(config, d_head, expand * hidden // getattr(config, n_heads))
    # axial position embeddings (Reformer): their widths sum to the hidden size, their
    # shape multiplies to the positions
    axial = getattr(config, "axial_pos_embds_dim", None)
    if isinstance(axial, list | tuple) and len(axial) == 2 and isinstance(hidden, int):
        config.axial_pos_embds_dim = (hidden // 2, hidden - hidden // 2)
        config.axial_pos_shape = (8, 8)
        config.max_position_embeddings = 64
        changed += ["axial_pos_embds_dim", "axial_pos_shape"]
    # a sub-config that lacks a rope base its parent has (DBRX's attention config)
    rope = getattr(config, "rope_theta", None)
    if rope is None and isinstance(getattr(config, "rope_parameters", None), dict):
        rope = config.rope_parameters.get("rope_theta")
    for _name, sub in _sub_configs(config):
        if rope is not None and not hasattr(sub, "rope_theta"):
            sub.rope_theta = rope
    # a codebook as wide as the hidden states (EnCodec)
    if isinstance(getattr(config, "codebook_dim", None), int) and "hidden_size" in changed:
        config.codebook_dim = hidden
    if isinstance(getattr(config, "use_cache", None), bool):
        config.use_cache = False
    fit_mrope(config, changed)
    if "layer_types" in vars(config) and isinstance(config.layer_types, list):
        layers = getattr(config, "num_hidden_layers", len(config.layer_types))
        config.layer_types = config.layer_types[:layers]


def build(model_type: str, class_name: str, plan: str = "tiny"):
    """(model, config, changed fields): the base class from a default config shrunk by
    ``plan`` (a key of PLANS), eval mode, seeded random weights."""
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    try:
        config = CONFIG_MAPPING[model_type](**required_fields(model_type))
        timm = getattr(getattr(config, "backbone_config", None), "model_type", "")
        if getattr(config, "use_timm_backbone", False) or timm == "timm_backbone":  # no timm:
            config = CONFIG_MAPPING[model_type](  # a transformers ResNet, random weights
                use_timm_backbone=False, use_pretrained_backbone=False)
    except Exception as e:
        raise BuildError(f"default config: {type(e).__name__}: {_first(e)}") from e
    try:
        changed = shrink(config, *PLANS[plan])
    except Exception as e:  # e.g. a per-layer attribute read as a global one
        raise BuildError(f"shrink: {type(e).__name__}: {_first(e)}") from e
    model_cls = getattr(transformers, class_name, None)
    if model_cls is None:
        raise BuildError(f"transformers has no {class_name} (optional dependency missing?)")
    try:
        with torch.device("meta"):
            params = sum(p.numel() for p in model_cls(config).parameters())
    except Exception as e:
        raise BuildError(f"construct: {type(e).__name__}: {_first(e)}") from e
    if params > MAX_PARAMS:
        raise BuildError(f"shrunk config still has {params / 1e6:.0f}M parameters "
                         f"(a size field the builder does not know)")
    torch.manual_seed(0)
    try:
        model = model_cls(config).eval()
    except Exception as e:
        raise BuildError(f"construct: {type(e).__name__}: {_first(e)}") from e
    languages = getattr(config, "languages", None)  # per-language adapters (X-MOD)
    if hasattr(model, "set_default_language") and languages:
        model.set_default_language(languages[0])
    return model, config, changed


def _first(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [""])[0][:200]


def _find(config, *names, default=None):
    """The first of ``names`` on the config or a sub-config (vision_config, ...)."""
    for name in names:
        value = getattr(config, name, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    for _, sub in _sub_configs(config):
        value = _find(sub, *names)
        if value is not None:
            return value
    return default


def _image_size(config) -> int:
    size = _find(config, "image_size", default=32)
    return size[0] if isinstance(size, list | tuple) else size


def _tensor_for(name: str, config, g: torch.Generator, batch: int = 1):
    """A tensor for a forward argument, by name; None when the name is not known."""
    vocab = _find(config, "vocab_size", default=VOCAB)
    if name in ("input_ids", "decoder_input_ids", "labels_ids"):
        seq = DEC_SEQ if name.startswith("decoder") else SEQ
        return torch.randint(min(4, vocab - 1), vocab, (batch, seq), generator=g)
    if name in ("attention_mask", "decoder_attention_mask"):
        return torch.ones(batch, DEC_SEQ if name.startswith("decoder") else SEQ,
                          dtype=torch.long)
    if name == "token_type_ids":
        return torch.zeros(batch, SEQ, dtype=torch.long)
    if name == "pixel_values_videos":  # a video tower's own argument (V-JEPA 2, VideoPrism)
        channels = _find(config, "num_channels", "in_channels", default=3)
        size = _image_size(config)
        frames = _find(config, "num_frames", "frames_per_clip", default=4)
        return torch.randn(batch, frames, channels, size, size, generator=g)
    if name == "pixel_values":
        channels = _find(config, "num_channels", "in_channels", "num_input_channels",
                         default=3)
        size = _image_size(config)
        frames = _find(config, "num_frames")
        if frames is not None:  # a video model: (batch, frames, channels, height, width)
            return torch.randn(batch, frames, channels, size, size, generator=g)
        return torch.randn(batch, channels, size, size, generator=g)
    if name == "input_values":  # raw audio; (batch, channels, samples) for codecs
        channels = getattr(config, "audio_channels", None)
        if isinstance(channels, int):
            return torch.randn(batch, channels, 1600, generator=g)
        return torch.randn(batch, 1600, generator=g)
    if name == "input_features_mask":  # every frame of the input features is real
        return torch.ones(batch, 2 * _find(config, "max_source_positions", default=SEQ),
                          dtype=torch.long)
    if name == "input_features":  # log-mel frames
        mels = _find(config, "num_mel_bins", "feature_size", "input_feat_per_channel",
                     default=16)
        frames = 2 * _find(config, "max_source_positions", default=SEQ)
        if getattr(config, "model_type", "") in ("speech_to_text", "speech_encoder_decoder"):
            return torch.randn(batch, frames, mels, generator=g)
        return torch.randn(batch, mels, frames, generator=g)
    if name in ("past_values", "past_values_padding", "past_observed_mask",
                "past_time_features"):  # a time series (PatchTST, TimesFM, Informer)
        context = _find(config, "context_length", default=SEQ)
        if context > 128:  # TimesFM takes any length; its default context is 512+
            context = 4 * _find(config, "patch_length", default=8)
        context += max(getattr(config, "lags_sequence", None) or [0])  # lagged features
        channels = _find(config, "num_input_channels")
        if name == "past_time_features":
            return torch.randn(batch, context, _find(config, "num_time_features", default=1),
                               generator=g)
        if name == "past_observed_mask":
            return torch.ones(batch, context)
        shape = (batch, context) if channels is None else (batch, context, channels)
        if name == "past_values_padding":
            return torch.zeros(shape, dtype=torch.long)
        return torch.randn(shape, generator=g)
    if name == "freq":  # TimesFM's frequency class per series
        return torch.zeros(batch, 1, dtype=torch.long)
    if name == "bbox":
        lo = torch.randint(0, 500, (batch, SEQ, 2), generator=g)
        return torch.cat([lo, lo + torch.randint(0, 500, (batch, SEQ, 2), generator=g)], -1)
    return None


def _patches(config, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """A Qwen-style vision tower's input: one image of (4 x merge)^2 patches, flattened as
    its patch embedding views them (channels x temporal patch x patch x patch), and its
    grid (t, h, w)."""
    side = 4 * _find(config, "spatial_merge_size", "merge_size", default=1)
    width = (_find(config, "in_channels", "in_chans", "num_channels", default=3)
             * _find(config, "temporal_patch_size", "patch_temporal", default=1)
             * _find(config, "patch_size", default=14) ** 2)
    return torch.randn(side * side, width, generator=g), torch.tensor([[1, side, side]])


def make_inputs(model, config, seed: int = 0) -> tuple[tuple, dict]:
    """(args, kwargs) for ``model.forward``: its main input plus every argument without a
    default that the builder knows by name, decoder ids for encoder-decoders and an
    attention mask where accepted. Raises BuildError naming an argument it cannot make."""
    g = torch.Generator().manual_seed(seed)
    params = inspect.signature(model.forward).parameters
    main = getattr(model, "main_input_name", "input_ids")
    if isinstance(main, list | tuple):  # several main inputs (OneFormer: pixels and a task)
        main = next((m for m in main if m in params), "input_ids")
    kwargs: dict = {}
    wanted = [main] + [n for n, p in params.items()
                       if p.default is inspect.Parameter.empty
                       and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and n != main]
    if "decoder_input_ids" in params and getattr(config, "is_encoder_decoder", False):
        wanted.append("decoder_input_ids")
    if "attention_mask" in params and main == "input_ids":
        wanted.append("attention_mask")
    if "bbox" in params:
        wanted.append("bbox")
    if ("pixel_values" in params and hasattr(config, "vision_config")
            and not any(hasattr(config, k) for k in ("image_token_id", "image_token_index"))):
        wanted.append("pixel_values")  # a dual encoder (CLIP-like): text and image
    grid = next((n for n in ("grid_thw", "image_grid_thw") if n in wanted), None)
    patches = next((n for n in ("hidden_states", "pixel_values") if n in wanted), None)
    if grid and patches:  # a Qwen-style vision tower: flattened patches and their grid
        kwargs[patches], kwargs[grid] = _patches(config, g)
        if main not in params:  # main_input_name names no argument of this forward
            wanted.remove(main)
    for name in dict.fromkeys(wanted):
        if name in kwargs:
            continue
        tensor = _tensor_for(name, config, g)
        if tensor is None:
            raise BuildError(f"inputs: no rule for forward argument {name!r}")
        kwargs[name] = tensor
    if "use_cache" in params:
        kwargs["use_cache"] = False
    if next(iter(params), None) != main:  # main input is not forward's first argument
        return (), kwargs
    return (kwargs.pop(main),), kwargs
