"""Checkpoint layouts of other libraries ↔ the parameter names of our task models (``talos import``).

The one layout that needs more than a prefix is a ``transformers`` CLIP vision tower (``CLIPVisionModel``,
``CLIPVisionModelWithProjection`` or a whole ``CLIPModel``; e.g. FusionBench's checkpoints, fine-tuned from
OpenAI's ViT-B/32 — the same weights as open_clip's ``openai`` tag) against open_clip's ``VisionTransformer``,
the image encoder ``visual`` of our CLIP models. The mapping is explicit (:data:`HF_CLIP_VISION_KEYS`, one pair
per tensor, ``{i}`` a block index) plus two tensors that change form:

* ``encoder.layers.{i}.self_attn.{q,k,v}_proj.{weight,bias}`` → ``transformer.resblocks.{i}.attn.in_proj_{weight,
  bias}``, the three concatenated ``[q; k; v]`` along the output dimension (``nn.MultiheadAttention``'s packing);
* ``visual_projection.weight`` ``[embed_dim, width]`` (a ``Linear`` without bias) → ``proj`` ``[width, embed_dim]``
  (open_clip multiplies ``x @ proj``): transposed. A ``CLIPVisionModel`` has no projection; then ``proj`` is
  absent from the converted dict (FusionBench keeps the pre-trained projection frozen).

The activation is not part of the weights: OpenAI's CLIP uses ``quick_gelu`` (open_clip creates the ``openai``
models with ``QuickGELU``; the transformers config says ``hidden_act: quick_gelu``); a random-init open_clip
model uses ``GELU`` (``hidden_act: gelu``). :func:`open_clip_activation` names the one of an open_clip tower so
that an importer can compare it with a checkpoint's config.

Both directions are tested: a tiny random transformers model and the open_clip tower it converts to give the
same image embedding, and converting there and back returns the same tensors (``tests/test_import.py``).

>>> hf_clip_vision_name("encoder.layers.3.mlp.fc1.weight")
'transformer.resblocks.3.mlp.c_fc.weight'
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import torch

#: transformers CLIP vision name (below ``vision_model.``) → open_clip ``VisionTransformer`` name, one tensor each
HF_CLIP_VISION_KEYS: tuple[tuple[str, str], ...] = (
    ("embeddings.class_embedding", "class_embedding"),
    ("embeddings.patch_embedding.weight", "conv1.weight"),
    ("embeddings.position_embedding.weight", "positional_embedding"),
    ("pre_layrnorm.weight", "ln_pre.weight"),
    ("pre_layrnorm.bias", "ln_pre.bias"),
    ("encoder.layers.{i}.layer_norm1.weight", "transformer.resblocks.{i}.ln_1.weight"),
    ("encoder.layers.{i}.layer_norm1.bias", "transformer.resblocks.{i}.ln_1.bias"),
    ("encoder.layers.{i}.self_attn.out_proj.weight", "transformer.resblocks.{i}.attn.out_proj.weight"),
    ("encoder.layers.{i}.self_attn.out_proj.bias", "transformer.resblocks.{i}.attn.out_proj.bias"),
    ("encoder.layers.{i}.layer_norm2.weight", "transformer.resblocks.{i}.ln_2.weight"),
    ("encoder.layers.{i}.layer_norm2.bias", "transformer.resblocks.{i}.ln_2.bias"),
    ("encoder.layers.{i}.mlp.fc1.weight", "transformer.resblocks.{i}.mlp.c_fc.weight"),
    ("encoder.layers.{i}.mlp.fc1.bias", "transformer.resblocks.{i}.mlp.c_fc.bias"),
    ("encoder.layers.{i}.mlp.fc2.weight", "transformer.resblocks.{i}.mlp.c_proj.weight"),
    ("encoder.layers.{i}.mlp.fc2.bias", "transformer.resblocks.{i}.mlp.c_proj.bias"),
    ("post_layernorm.weight", "ln_post.weight"),
    ("post_layernorm.bias", "ln_post.bias"),
)
#: the transformers vision tower's module (transformers 4 saved a CLIPVisionModel under it too), and its projection
HF_VISION = "vision_model."
HF_PROJECTION = "visual_projection.weight"
#: transformers buffers that are not weights (older checkpoints saved them)
HF_BUFFERS = ("embeddings.position_ids",)
_QKV = ("q_proj", "k_proj", "v_proj")
_HF_QKV = re.compile(r"^encoder\.layers\.(\d+)\.self_attn\.([qkv])_proj\.(weight|bias)$")
_OC_QKV = re.compile(r"^transformer\.resblocks\.(\d+)\.attn\.in_proj_(weight|bias)$")


def _pattern(template: str) -> re.Pattern:
    return re.compile("^" + re.escape(template).replace(re.escape("{i}"), r"(\d+)") + "$")


_HF_TO_OC = tuple((_pattern(hf), oc) for hf, oc in HF_CLIP_VISION_KEYS)
_OC_TO_HF = tuple((_pattern(oc), hf) for hf, oc in HF_CLIP_VISION_KEYS)


def _rename(name: str, rules) -> str | None:
    for pattern, target in rules:
        m = pattern.match(name)
        if m:
            return target.replace("{i}", m.group(1)) if m.groups() else target
    return None


def hf_clip_vision_name(name: str) -> str | None:
    """The open_clip name of a one-to-one transformers vision tensor (below ``vision_model.``), else ``None``."""
    return _rename(name, _HF_TO_OC)


_PATCH = "embeddings.patch_embedding.weight"


def hf_clip_vision_prefix(keys) -> str | None:
    """Where a transformers CLIP vision tower's tensors sit in a state dict: ``"vision_model."`` (a ``CLIPModel``,
    a ``CLIPVisionModelWithProjection``, a ``CLIPVisionModel`` saved by transformers 4 — FusionBench's), ``""`` (a
    ``CLIPVisionModel`` saved by transformers 5), any other prefix before ``embeddings.patch_embedding.weight``;
    ``None`` when the keys are not such a tower's."""
    for key in keys:
        if key.endswith(_PATCH) and (key == _PATCH or key.endswith("." + _PATCH)):
            return key[:-len(_PATCH)]
    return None


def hf_clip_vision_to_open_clip(state: Mapping[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], list[str]]:
    """``(visual, rest)``: the transformers CLIP vision tensors of ``state`` (below :func:`hf_clip_vision_prefix`)
    under open_clip ``VisionTransformer`` names (``proj`` only when a ``visual_projection.weight`` is there), and the
    keys it did not convert (the text tower, ``logit_scale``, and any vision key outside :data:`HF_CLIP_VISION_KEYS`
    — left for the caller to report). A block missing one of ``q``/``k``/``v`` leaves that block's others
    unconverted too."""
    prefix = hf_clip_vision_prefix(state) or ""
    out: dict[str, torch.Tensor] = {}
    rest: list[str] = []
    qkv: dict[tuple[str, str], dict[str, str]] = {}
    for key in state:
        if key == HF_PROJECTION or key.endswith("." + HF_PROJECTION):
            out["proj"] = state[key].t().contiguous()
            continue
        if not key.startswith(prefix):
            rest.append(key)
            continue
        sub = key[len(prefix):]
        if sub in HF_BUFFERS:
            continue
        m = _HF_QKV.match(sub)
        if m:
            qkv.setdefault((m.group(1), m.group(3)), {})[m.group(2)] = key
            continue
        target = hf_clip_vision_name(sub)
        if target is None:
            rest.append(key)
        else:
            out[target] = state[key]
    for (block, kind), parts in sorted(qkv.items()):
        if set(parts) != {"q", "k", "v"}:
            rest.extend(parts.values())
            continue
        out[f"transformer.resblocks.{block}.attn.in_proj_{kind}"] = torch.cat([state[parts[p]] for p in "qkv"], 0)
    return out, rest


def open_clip_to_hf_clip_vision(visual: Mapping[str, torch.Tensor], prefix: str = HF_VISION) -> dict[str, torch.Tensor]:
    """The inverse of :func:`hf_clip_vision_to_open_clip`: an open_clip ``VisionTransformer`` state dict (names
    without ``visual.``) → a ``CLIPVisionModelWithProjection`` state dict (``proj`` → ``visual_projection.weight``
    when present); ``prefix=""`` gives transformers 5's ``CLIPVisionModel`` names. A name outside the mapping is
    one ``KeyError`` naming it."""
    out: dict[str, torch.Tensor] = {}
    for name, value in visual.items():
        if name == "proj":
            out[HF_PROJECTION] = value.t().contiguous()
            continue
        m = _OC_QKV.match(name)
        if m:
            for part, chunk in zip(_QKV, value.chunk(3, dim=0)):
                out[f"{prefix}encoder.layers.{m.group(1)}.self_attn.{part}.{m.group(2)}"] = chunk.contiguous()
            continue
        target = _rename(name, _OC_TO_HF)
        if target is None:
            raise KeyError(f"open_clip vision tensor {name!r} has no transformers CLIP counterpart")
        out[prefix + target] = value
    return out


def open_clip_activation(visual: torch.nn.Module) -> str | None:
    """``"quick_gelu"`` or ``"gelu"``: the MLP activation of an open_clip ``VisionTransformer`` in transformers'
    ``hidden_act`` terms (``None`` when it is neither, or the tower has no such block)."""
    blocks = getattr(getattr(visual, "transformer", None), "resblocks", None)
    if not blocks:
        return None
    act = getattr(getattr(blocks[0], "mlp", None), "gelu", None)
    return {"QuickGELU": "quick_gelu", "GELU": "gelu"}.get(type(act).__name__)
