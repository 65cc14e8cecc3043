"""Real Hugging Face transformers models from tiny configs, random weights, no hub.

Each builder returns ``(model, args, kwargs, examples)`` (the CLI's factory form), so
``stitch explain tests.zoo.hf:longformer`` works. Builders for models whose breaks exist
only in transformers 4.52.4 (the GraphMend paper's version) are marked ``LEGACY``; run them
with the ``.venv-hf452`` environment.
"""

from __future__ import annotations

import torch

SEQ = 16


def _ids(vocab: int, batch: int = 1, seq: int = SEQ, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(4, vocab, (batch, seq), generator=g)


def _seeded(model):
    return model.eval()


# the BART family's tiny sizes (BART, Marian, Blenderbot, Pegasus)
_BART_SIZES = dict(vocab_size=100, d_model=32, encoder_layers=2, decoder_layers=2,
                   encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
                   decoder_ffn_dim=64, max_position_embeddings=64)


def _bart_like(config_cls, model_cls, **special):
    torch.manual_seed(0)
    return _seeded(model_cls(config_cls(**_BART_SIZES, **special)))


def _seq2seq(model):
    """Encoder ids, 8 decoder ids and ``use_cache=True`` (4.52.4 warns: legacy format)."""
    kwargs = {"decoder_input_ids": _ids(100, seq=8, seed=1), "use_cache": True}
    return model, (_ids(100),), kwargs, None


def longformer():
    """Breaks where the encoder reads ``is_global_attn`` from the attention mask."""
    from transformers import LongformerConfig, LongformerModel

    torch.manual_seed(0)
    cfg = LongformerConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
                           num_attention_heads=2, intermediate_size=64, attention_window=[4, 4],
                           max_position_embeddings=80, pad_token_id=1)
    model = _seeded(LongformerModel(cfg))
    ids = _ids(100)
    mask = torch.ones(1, SEQ, dtype=torch.long)
    global_mask = mask.clone()
    global_mask[:, 0] = 2  # token 0 attends globally: the other side of the branch
    return model, (ids,), {"attention_mask": mask}, [((ids,), {"attention_mask": global_mask})]


def led():
    from transformers import LEDConfig, LEDModel

    torch.manual_seed(0)
    cfg = LEDConfig(vocab_size=100, d_model=32, encoder_layers=2, decoder_layers=2,
                    encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
                    decoder_ffn_dim=64, attention_window=[4, 4], max_encoder_position_embeddings=64,
                    max_decoder_position_embeddings=64, pad_token_id=1, use_cache=False)
    model = _seeded(LEDModel(cfg))
    ids = _ids(100)
    kwargs = {"attention_mask": torch.ones(1, SEQ, dtype=torch.long),
              "global_attention_mask": torch.zeros(1, SEQ, dtype=torch.long),
              "decoder_input_ids": _ids(100, seq=8, seed=1), "use_cache": False}
    global_kwargs = dict(kwargs, global_attention_mask=kwargs["global_attention_mask"].clone())
    global_kwargs["global_attention_mask"][:, 0] = 1  # the encoder's global-attention side
    return model, (ids,), kwargs, [((ids,), global_kwargs)]


def t5_cond_gen():
    """LEGACY (4.52.4): breaks on ``logger.warning_once``."""
    from transformers import T5Config, T5ForConditionalGeneration

    torch.manual_seed(0)
    cfg = T5Config(vocab_size=100, d_model=32, d_kv=16, d_ff=64, num_layers=2,
                   num_decoder_layers=2, num_heads=2, decoder_start_token_id=0, pad_token_id=0)
    return _seq2seq(_seeded(T5ForConditionalGeneration(cfg)))


def bart_cond_gen():
    """LEGACY (4.52.4): breaks on ``logger.warning_once``."""
    from transformers import BartConfig, BartForConditionalGeneration

    return _seq2seq(_bart_like(BartConfig, BartForConditionalGeneration, pad_token_id=1))


def whisper():
    """LEGACY (4.52.4): breaks on ``logger.warning_once`` (legacy cache format)."""
    from transformers import WhisperConfig, WhisperForConditionalGeneration

    torch.manual_seed(0)
    cfg = WhisperConfig(vocab_size=100, num_mel_bins=16, d_model=32, encoder_layers=1,
                        decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
                        encoder_ffn_dim=64, decoder_ffn_dim=64, max_source_positions=16,
                        max_target_positions=32, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                        decoder_start_token_id=1)
    model = _seeded(WhisperForConditionalGeneration(cfg))
    g = torch.Generator().manual_seed(0)
    features = torch.randn(1, 16, 32, generator=g)
    kwargs = {"decoder_input_ids": _ids(100, seq=8, seed=1), "use_cache": True}
    return model, (features,), kwargs, None


def phi3_longrope():
    """LEGACY (4.52.4): LongRoPE picks long or short factors with a data-dependent ``if``."""
    from transformers import Phi3Config, Phi3ForCausalLM

    torch.manual_seed(0)
    head_dim = 16
    cfg = Phi3Config(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                     num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64,
                     original_max_position_embeddings=16, pad_token_id=0, use_cache=False,
                     rope_scaling={"type": "longrope",
                                   "short_factor": [1.0] * (head_dim // 2),
                                   "long_factor": [2.0] * (head_dim // 2)})
    model = _seeded(Phi3ForCausalLM(cfg))
    ids = _ids(100, seq=8)
    short = torch.arange(8).unsqueeze(0)
    long = short + 20  # positions past original_max_position_embeddings: the long factors
    return (model, (ids,), {"position_ids": short, "use_cache": False},
            [((ids,), {"position_ids": long, "use_cache": False}),
             ((ids,), {"position_ids": short, "use_cache": False})])  # back to short: state


def _xlm_like(config_cls, model_cls):
    torch.manual_seed(0)
    cfg = config_cls(vocab_size=100, emb_dim=32, n_layers=2, n_heads=2, max_position_embeddings=64,
                     pad_index=2)
    model = _seeded(model_cls(cfg))
    ids = _ids(100)
    lengths = torch.tensor([SEQ])
    return model, (ids,), {"lengths": lengths}, None


def xlm():
    """Breaks on ``assert lengths.max().item() <= slen`` (a data-dependent assert)."""
    from transformers import XLMConfig, XLMModel

    return _xlm_like(XLMConfig, XLMModel)


def flaubert():
    """Flaubert shares XLM's data-dependent length assert."""
    from transformers import FlaubertConfig, FlaubertModel

    return _xlm_like(FlaubertConfig, FlaubertModel)


def switch():
    """Switch's sparse MLP loops over the experts ``nonzero`` finds (data-dependent), and its
    router converts its classifier with ``.to(dtype)`` in every forward. stitch makes one
    graph: a cond per expert (``nonzero_loop``), the conversion a no-op (``shims``)."""
    from transformers import SwitchTransformersConfig, SwitchTransformersForConditionalGeneration

    torch.manual_seed(0)
    cfg = SwitchTransformersConfig(vocab_size=100, d_model=32, d_kv=16, d_ff=64, num_layers=2,
                                   num_decoder_layers=2, num_heads=2, num_experts=4,
                                   expert_capacity=8, num_sparse_encoder_layers=1,
                                   num_sparse_decoder_layers=1, decoder_start_token_id=0,
                                   pad_token_id=0, use_cache=False)
    model = _seeded(SwitchTransformersForConditionalGeneration(cfg))
    # use_cache=False: 5.23 forwards the kwarg to the encoder stack too, which rejects True, and
    # a returned Cache is no export output. An explicit mask: without one the stack builds it
    # only when not compiling (else ``None[:, None, None, :]``, an extra break)
    kwargs = {"attention_mask": torch.ones(1, SEQ, dtype=torch.long),
              "decoder_input_ids": _ids(100, seq=8, seed=1), "use_cache": False}
    return model, (_ids(100),), kwargs, None


def marian_mt():
    """LEGACY (4.52.4): breaks on ``logger.warning_once`` (legacy cache format)."""
    from transformers import MarianConfig, MarianMTModel

    return _seq2seq(_bart_like(MarianConfig, MarianMTModel, pad_token_id=1, eos_token_id=2,
                               decoder_start_token_id=1, forced_eos_token_id=2))


def biogpt_causal():
    """LEGACY (4.52.4): breaks on ``logger.warning_once`` (legacy cache format)."""
    from transformers import BioGptConfig, BioGptForCausalLM

    torch.manual_seed(0)
    cfg = BioGptConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
                       num_attention_heads=2, intermediate_size=64, max_position_embeddings=64,
                       pad_token_id=1, bos_token_id=0, eos_token_id=2)
    model = _seeded(BioGptForCausalLM(cfg))
    return model, (_ids(100),), {"use_cache": True}, None


def blenderbot():
    """LEGACY (4.52.4): breaks on ``logger.warning_once`` (legacy cache format)."""
    from transformers import BlenderbotConfig, BlenderbotForConditionalGeneration

    return _seq2seq(_bart_like(BlenderbotConfig, BlenderbotForConditionalGeneration,
                               pad_token_id=0, bos_token_id=1, eos_token_id=2,
                               decoder_start_token_id=1, forced_eos_token_id=2))


def pegasus_causal():
    """LEGACY (4.52.4): breaks on ``logger.warning_once`` (legacy cache format)."""
    from transformers import PegasusConfig, PegasusForCausalLM

    model = _bart_like(PegasusConfig, PegasusForCausalLM, pad_token_id=0, eos_token_id=1,
                       decoder_start_token_id=0, forced_eos_token_id=1)
    return model, (_ids(100),), {"use_cache": True}, None


def layoutlmv3():
    """LEGACY (4.52.4): breaks on ``warnings.warn`` (deprecated ``device`` argument).

    Text-only (``input_ids`` + ``bbox``, no image); 5.23 builds it with no break.
    """
    from transformers import LayoutLMv3Config, LayoutLMv3Model

    torch.manual_seed(0)
    # the spatial embedding concatenates 4 coordinate and 2 shape embeddings: 4*4 + 2*8 = 32
    cfg = LayoutLMv3Config(vocab_size=100, hidden_size=32, num_hidden_layers=2,
                           num_attention_heads=2, intermediate_size=64,
                           max_position_embeddings=64, coordinate_size=4, shape_size=8,
                           input_size=32, patch_size=16, pad_token_id=1)
    model = _seeded(LayoutLMv3Model(cfg))
    g = torch.Generator().manual_seed(2)
    corners = torch.randint(0, 1000, (1, SEQ, 2, 2), generator=g)
    lo, hi = corners.min(dim=2).values, corners.max(dim=2).values
    bbox = torch.cat([lo, hi], dim=-1)  # (x0, y0, x1, y1) with x0 <= x1 and y0 <= y1
    kwargs = {"bbox": bbox, "attention_mask": torch.ones(1, SEQ, dtype=torch.long)}
    return model, (_ids(100),), kwargs, None


def llama_with_cache():
    """A transformers 5.x decoder with its default ``use_cache=True``: the output holds a
    ``DynamicCache``, which torch.export refuses until it is registered as a pytree."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64)
    return _seeded(LlamaForCausalLM(cfg)), (_ids(100, seq=8),), {}, None


def t5_with_cache():
    """transformers 5.x T5 with its default cache: an ``EncoderDecoderCache`` output."""
    from transformers import T5Config, T5ForConditionalGeneration

    torch.manual_seed(0)
    cfg = T5Config(vocab_size=100, d_model=32, d_kv=16, d_ff=64, num_layers=2, num_heads=2,
                   decoder_start_token_id=0, pad_token_id=0)
    model = _seeded(T5ForConditionalGeneration(cfg))
    return model, (_ids(100, seq=8),), {"decoder_input_ids": _ids(100, seq=4, seed=1)}, None
