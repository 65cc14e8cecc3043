"""diffusers models for the sweep: the model classes a pipeline is made of (UNets, VAEs,
diffusion transformers, ControlNet), each from a tiny config written here (diffusers has
no generic way to shrink a config), random weights, eval mode, called as a pipeline calls
them (``return_dict`` left at its default).

Examples: batch 1, then batch 2 at the same size, then (optional: kept where the model takes
it) batch 1 at another spatial size or token count. ControlNet's second example also passes
``conditioning_scale=0.5``, which the first leaves at its default.
"""

from __future__ import annotations

import torch
from sweep_libs import Built, construct

TEXT = 7  # text tokens of encoder_hidden_states
UNET_BLOCKS = {"block_out_channels": (32, 64), "layers_per_block": 1}
SD_UNET = {**UNET_BLOCKS, "sample_size": 16, "in_channels": 4, "out_channels": 4,
           "down_block_types": ("CrossAttnDownBlock2D", "DownBlock2D"),
           "up_block_types": ("UpBlock2D", "CrossAttnUpBlock2D"),
           "cross_attention_dim": 32, "attention_head_dim": 8}
VAE = {"block_out_channels": (32, 64), "down_block_types": ("DownEncoderBlock2D",) * 2,
       "up_block_types": ("UpDecoderBlock2D",) * 2}
DIT = {"num_attention_heads": 2, "attention_head_dim": 8, "num_layers": 1}

# name -> (class, config, inputs, spatial sizes (first, other))
MODELS: dict[str, tuple[str, dict, str, tuple[int, int]]] = {
    "unet_2d": ("UNet2DModel", {**UNET_BLOCKS, "sample_size": 32,
                                "down_block_types": ("DownBlock2D", "AttnDownBlock2D"),
                                "up_block_types": ("AttnUpBlock2D", "UpBlock2D"),
                                "attention_head_dim": 8}, "image_t", (32, 48)),
    "unet_2d_condition": ("UNet2DConditionModel", SD_UNET, "latent_text", (16, 24)),
    "unet_2d_condition_xl": ("UNet2DConditionModel", {
        **SD_UNET, "addition_embed_type": "text_time", "addition_time_embed_dim": 8,
        "projection_class_embeddings_input_dim": 32 + 6 * 8,
        "transformer_layers_per_block": (1, 2)}, "latent_text_time", (16, 24)),
    "unet_3d_condition": ("UNet3DConditionModel", {
        **SD_UNET, "down_block_types": ("CrossAttnDownBlock3D", "DownBlock3D"),
        "up_block_types": ("UpBlock3D", "CrossAttnUpBlock3D"), "norm_num_groups": 32},
        "video_text", (16, 24)),
    "controlnet": ("ControlNetModel", {
        **{k: SD_UNET[k] for k in ("block_out_channels", "layers_per_block", "in_channels",
                                   "cross_attention_dim", "attention_head_dim")},
        "down_block_types": SD_UNET["down_block_types"],
        "conditioning_embedding_out_channels": (16, 32)}, "controlnet", (16, 24)),
    # Dance Diffusion's layout: the Fourier time features are concatenated to the signal
    "unet_1d": ("UNet1DModel", {"block_out_channels": (32, 32, 64), "in_channels": 2,
                                "out_channels": 2, "sample_size": 64, "extra_in_channels": 16,
                                "time_embedding_dim": 16}, "signal_t", (64, 96)),
    "autoencoder_kl": ("AutoencoderKL", {**VAE, "latent_channels": 4}, "image", (32, 48)),
    "vq_model": ("VQModel", {**VAE, "latent_channels": 3}, "image", (32, 48)),
    "autoencoder_tiny": ("AutoencoderTiny", {
        "encoder_block_out_channels": (32, 32), "decoder_block_out_channels": (32, 32),
        "num_encoder_blocks": (1, 2), "num_decoder_blocks": (2, 1)}, "image", (32, 48)),
    "autoencoder_dc": ("AutoencoderDC", {
        "latent_channels": 4, "attention_head_dim": 2,
        "encoder_block_types": ("ResBlock", "EfficientViTBlock"),
        "decoder_block_types": ("ResBlock", "EfficientViTBlock"),
        "encoder_block_out_channels": (8, 8), "decoder_block_out_channels": (8, 8),
        "encoder_qkv_multiscales": ((), (5,)), "decoder_qkv_multiscales": ((), (5,)),
        "encoder_layers_per_block": (1, 1), "decoder_layers_per_block": (1, 1),
        "downsample_block_type": "conv", "upsample_block_type": "interpolate"},
        "image", (32, 48)),
    "dit": ("DiTTransformer2DModel", {**DIT, "in_channels": 4, "sample_size": 8,
                                      "patch_size": 2}, "latent_t_class", (8, 12)),
    "transformer_2d": ("Transformer2DModel", {**DIT, "attention_head_dim": 16,
                                              "in_channels": 32, "cross_attention_dim": 32},
                       "features_text", (8, 12)),
    "pixart": ("PixArtTransformer2DModel", {
        **DIT, "in_channels": 4, "out_channels": 8, "cross_attention_dim": 16,
        "caption_channels": 32, "sample_size": 8, "patch_size": 2}, "pixart", (8, 12)),
    "sana": ("SanaTransformer2DModel", {
        **DIT, "in_channels": 4, "out_channels": 4, "num_cross_attention_heads": 2,
        "cross_attention_head_dim": 8, "cross_attention_dim": 16, "caption_channels": 32,
        "sample_size": 8}, "latent_text_t", (8, 12)),
    "sd3": ("SD3Transformer2DModel", {
        "sample_size": 8, "patch_size": 1, "in_channels": 4, "num_layers": 1,
        "attention_head_dim": 8, "num_attention_heads": 4, "caption_projection_dim": 32,
        "joint_attention_dim": 32, "pooled_projection_dim": 64, "out_channels": 4,
        "pos_embed_max_size": 16}, "sd3", (8, 12)),
    "auraflow": ("AuraFlowTransformer2DModel", {
        "sample_size": 8, "patch_size": 2, "in_channels": 4, "num_mmdit_layers": 1,
        "num_single_dit_layers": 1, "attention_head_dim": 8, "num_attention_heads": 4,
        "caption_projection_dim": 32, "joint_attention_dim": 32, "out_channels": 4,
        "pos_embed_max_size": 64}, "latent_text_t", (8, 12)),
    "flux": ("FluxTransformer2DModel", {
        "patch_size": 1, "in_channels": 4, "num_layers": 1, "num_single_layers": 1,
        "attention_head_dim": 16, "num_attention_heads": 2, "joint_attention_dim": 32,
        "pooled_projection_dim": 32, "axes_dims_rope": (4, 4, 8)}, "flux", (4, 6)),
    "prior_transformer": ("PriorTransformer", {
        "num_attention_heads": 2, "attention_head_dim": 4, "num_layers": 2,
        "embedding_dim": 8, "num_embeddings": 7, "additional_embeddings": 4},
        "prior", (0, 0)),
}


def architectures() -> dict[str, str]:
    return {name: cls for name, (cls, _, _, _) in sorted(MODELS.items())}


def build(name: str) -> Built:
    import diffusers

    cls, config, kind, (first, other) = MODELS[name]
    model = construct(getattr(diffusers, cls), **config)
    examples = [inputs(kind, 1, first, seed=0), inputs(kind, 2, first, seed=1)]
    if kind == "controlnet":  # a keyword one example passes and the other leaves out
        examples[1][1]["conditioning_scale"] = 0.5
    optional = [inputs(kind, 1, other, seed=2)] if other != first else []
    return Built(model, examples, optional)


def inputs(kind: str, batch: int, size: int, seed: int) -> tuple[tuple, dict]:
    """The keyword inputs a pipeline passes, by the model's kind."""
    g = torch.Generator().manual_seed(seed)

    def rand(*shape):
        return torch.randn(*shape, generator=g)

    steps = torch.randint(0, 1000, (batch,), generator=g)
    text = rand(batch, TEXT, 32)
    if kind in ("image", "image_t"):
        x = {"sample": rand(batch, 3, size, size)}
        return (), x | ({"timestep": steps} if kind == "image_t" else {})
    if kind == "signal_t":
        return (), {"sample": rand(batch, 2, size), "timestep": steps}
    latent = rand(batch, 4, size, size)
    if kind in ("latent_text", "controlnet"):
        x = {"sample": latent, "timestep": steps, "encoder_hidden_states": text}
        return (), x | ({"controlnet_cond": rand(batch, 3, 2 * size, 2 * size)}
                        if kind == "controlnet" else {})
    if kind == "latent_text_time":
        return (), {"sample": latent, "timestep": steps, "encoder_hidden_states": text,
                    "added_cond_kwargs": {"text_embeds": rand(batch, 32),
                                          "time_ids": rand(batch, 6)}}
    if kind == "video_text":
        return (), {"sample": rand(batch, 4, 2, size, size), "timestep": steps,
                    "encoder_hidden_states": text}
    if kind == "latent_t_class":
        return (), {"hidden_states": latent, "timestep": steps,
                    "class_labels": torch.randint(0, 1000, (batch,), generator=g)}
    if kind == "features_text":
        return (), {"hidden_states": rand(batch, 32, size, size),
                    "encoder_hidden_states": text}
    if kind == "pixart":
        return (), {"hidden_states": latent, "encoder_hidden_states": text, "timestep": steps,
                    "added_cond_kwargs": {"resolution": None, "aspect_ratio": None}}
    if kind == "latent_text_t":
        return (), {"hidden_states": latent, "encoder_hidden_states": text, "timestep": steps}
    if kind == "sd3":
        return (), {"hidden_states": latent, "encoder_hidden_states": text,
                    "pooled_projections": rand(batch, 64), "timestep": steps}
    if kind == "flux":  # packed latents: one token per latent pixel, ids (row, column)
        rows, cols = torch.meshgrid(torch.arange(size), torch.arange(size), indexing="ij")
        ids = torch.stack([torch.zeros_like(rows), rows, cols], -1).reshape(-1, 3).float()
        return (), {"hidden_states": rand(batch, size * size, 4), "encoder_hidden_states": text,
                    "pooled_projections": rand(batch, 32), "timestep": torch.rand(batch,
                                                                                generator=g),
                    "img_ids": ids, "txt_ids": torch.zeros(TEXT, 3)}
    if kind == "prior":
        return (), {"hidden_states": rand(batch, 8), "timestep": steps,
                    "proj_embedding": rand(batch, 8), "encoder_hidden_states": rand(batch, 7, 8)}
    raise KeyError(kind)
