"""Where a parameter sits in a model, read from its name: stack, block index and layer type.

The three families name their parameters differently (open_clip visual towers, Hugging Face BERT-style
encoders, T5, EfficientNet's stages); :func:`layer_info` reads any of them, :func:`block_indices` numbers the
blocks across stacks. It sits below both of its users, the merge methods (LiNeS' per-block factors) and the mask
statistics, so they share one reading.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

LAYER_TYPES = ("q", "k", "v", "qkv", "attn_out", "mlp_in", "mlp_out", "layernorm", "bias", "conv",
               "embedding", "other")

# block patterns: the text before the match is the "stack" (visual tower, encoder, decoder, ...)
_BLOCK = re.compile(r"(?:^|\.)(?:resblocks|layer|layers|block|blocks|h)\.(\d+)\.")
_NORM = re.compile(r"(?:^|\.)(?:ln_\w*|layernorm|layer_norm|final_layer_norm|norm\w*|ln)(?:\.|$)", re.I)
_RULES: tuple[tuple[str, re.Pattern], ...] = tuple((t, re.compile(p)) for t, p in (
    ("qkv", r"(?:in_proj_weight|\.qkv\.weight|c_attn\.weight)$"),
    ("q", r"(?:\.query|\.q|\.q_proj)\.weight$"),
    ("k", r"(?:\.key|\.k|\.k_proj)\.weight$"),
    ("v", r"(?:\.value|\.v|\.v_proj)\.weight$"),
    ("attn_out", r"(?:attn\.out_proj|attention\.output\.dense|Attention\.o|EncDecAttention\.o|\.o_proj|"
                 r"\.out_proj)\.weight$"),
    ("mlp_in", r"(?:mlp\.c_fc|intermediate\.dense|DenseReluDense\.wi(?:_\d)?|\.fc1|mlp\.fc1)\.weight$"),
    ("mlp_out", r"(?:mlp\.c_proj|(?<!attention\.)output\.dense|DenseReluDense\.wo|\.fc2|mlp\.fc2)\.weight$"),
    ("conv", r"(?:^|\.)conv\w*\.weight$"),
    ("embedding", r"(?:embedding|embeddings|embed_tokens|shared|relative_attention_bias|wte|wpe)"),
))


@dataclass(frozen=True)
class LayerInfo:
    """Where a parameter sits: ``stack`` (text before the block index), ``index`` (-1 outside blocks), type."""

    stack: str
    index: int
    layer_type: str


def layer_info(name: str) -> LayerInfo:
    """Classify a parameter name.

    >>> layer_info("visual.transformer.resblocks.3.attn.in_proj_weight")
    LayerInfo(stack='visual.transformer', index=3, layer_type='qkv')
    >>> layer_info("encoder.encoder.layer.0.attention.output.dense.weight").layer_type
    'attn_out'
    >>> layer_info("t5.decoder.block.1.layer.2.DenseReluDense.wo.weight")
    LayerInfo(stack='t5.decoder', index=1, layer_type='mlp_out')
    >>> layer_info("encoder.encoder.layer.1.output.LayerNorm.bias").layer_type
    'layernorm'
    """
    m = _BLOCK.search(name)
    stack, index = (name[:m.start()], int(m.group(1))) if m else ("", -1)
    return LayerInfo(stack, index, classify_layer(name))


def classify_layer(name: str) -> str:
    """Layer type of a parameter name (see :data:`LAYER_TYPES`); norms win over biases, biases over linears."""
    if _NORM.search(name):
        return "layernorm"
    if name.endswith("bias") and "relative_attention_bias" not in name:
        return "bias"
    for layer_type, pattern in _RULES:
        if pattern.search(name):
            return layer_type
    return "other"


def block_indices(names: Sequence[str]) -> dict[str, int]:
    """Global block index per name: blocks of later stacks (e.g. T5's decoder after its encoder) are
    offset by the number of blocks of the earlier ones, in parameter order; -1 outside blocks.

    >>> block_indices(["t5.encoder.block.0.x.weight", "t5.encoder.block.1.x.weight", "t5.decoder.block.0.x.weight"])
    {'t5.encoder.block.0.x.weight': 0, 't5.encoder.block.1.x.weight': 1, 't5.decoder.block.0.x.weight': 2}
    """
    infos = {n: layer_info(n) for n in names}
    sizes: dict[str, int] = {}
    for info in infos.values():
        if info.index >= 0:
            sizes[info.stack] = max(sizes.get(info.stack, 0), info.index + 1)
    offsets, total = {}, 0
    for stack, size in sizes.items():  # insertion order = first appearance
        offsets[stack] = total
        total += size
    return {n: (offsets[i.stack] + i.index if i.index >= 0 else -1) for n, i in infos.items()}
