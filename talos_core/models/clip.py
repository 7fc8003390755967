"""CLIP image classifiers through open_clip.

The image encoder ``visual`` is ``θ``. The frozen head is CLIP's zero-shot classifier: for each
class, the text tower embeds every template filled with the class name, the embeddings are
L2-normalized, averaged and normalized again; the head is that ``[C, D]`` matrix times
``logit_scale.exp()``. Logits are ``normalize(visual(x)) @ head.T`` (as in the task-vectors code).

The text tower is kept outside the module tree (it is only used to build heads), so it is never
part of ``named_parameters``, a task vector or a state dict.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from talos_core.models.base import Batch, Head, TaskModel
from talos_core.models.images import CLIP_MEAN, CLIP_STD, images_to_tensor
from talos_core.tasks.base import Inputs, TaskSpec

#: parameters the official vision code trains densely although the paper freezes them
OFFICIAL_DENSE = ("visual.class_embedding", "visual.positional_embedding", "visual.proj")

TINY_CLIP_CONFIG = dict(
    embed_dim=64,
    vision_cfg=dict(image_size=32, layers=2, width=64, patch_size=8, head_width=32, mlp_ratio=2.0),
    text_cfg=dict(context_length=77, vocab_size=49408, width=64, heads=2, layers=2),
)


class ClipTaskModel(TaskModel):
    family = "clip"
    modality = "image"

    def __init__(self, clip: torch.nn.Module, tokenizer, image_size: int,
                 mean=CLIP_MEAN, std=CLIP_STD, model_cfg: dict | None = None) -> None:
        super().__init__()
        self.visual = clip.visual
        #: the open_clip model config (``open_clip.get_model_config(arch)``), written by ``talos merge``
        self.model_cfg = dict(model_cfg) if model_cfg is not None else None
        self._text = {"clip": clip, "tokenizer": tokenizer}  # not a submodule: not part of θ
        self.image_size = int(image_size)
        self.mean, self.std = tuple(mean), tuple(std)
        self.logit_scale = float(clip.logit_scale.detach().exp())

    def prepare(self, inputs: Inputs, task: TaskSpec | None = None) -> Batch:
        return {"pixel_values": images_to_tensor(inputs, self.image_size, self.mean, self.std)}

    @torch.no_grad()
    def build_head(self, task: TaskSpec) -> Head:
        clip, tokenizer = self._text["clip"], self._text["tokenizer"]
        clip.eval()
        rows = []
        for name in task.classes:
            tokens = tokenizer([t.format(name) for t in task.templates])
            emb = F.normalize(clip.encode_text(tokens.to(next(clip.parameters()).device)).float(), dim=-1)
            rows.append(F.normalize(emb.mean(0), dim=-1))
        weight = torch.stack(rows) * self.logit_scale
        return {"weight": weight.cpu()}

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        features = F.normalize(self.visual(pixel_values), dim=-1)
        return features @ self.head_weight.to(features.dtype).T

    def official_dense_names(self) -> list[str]:
        names = dict(self.named_parameters())
        return [n for n in OFFICIAL_DENSE if n in names]


def _tokenizer(arch: str):
    import open_clip

    return open_clip.get_tokenizer(arch)


def load_clip(arch: str, pretrained: str | None) -> ClipTaskModel:
    """open_clip architecture ``arch`` with weights tag ``pretrained`` (None = random init)."""
    import open_clip

    quick = quick_gelu_weights(arch, pretrained)
    clip = open_clip.create_model(arch, pretrained=pretrained, force_quick_gelu=quick)
    size = clip.visual.image_size
    size = size[0] if isinstance(size, (tuple, list)) else size
    mean = getattr(clip.visual, "image_mean", None) or CLIP_MEAN
    std = getattr(clip.visual, "image_std", None) or CLIP_STD
    cfg = open_clip.get_model_config(arch)
    return ClipTaskModel(clip.eval(), _tokenizer(arch), size, mean, std, {**cfg, "quick_gelu": True} if quick else cfg)


def quick_gelu_weights(arch: str, pretrained: str | None) -> bool:
    """Whether the weights ``pretrained`` of ``arch`` were trained with QuickGELU (OpenAI's CLIP weights: their
    pretrained config says so). open_clip builds ``ViT-B-32`` with GELU and only warns when such weights are loaded
    into it; the model must use the activation its weights were trained with."""
    if not pretrained:
        return False
    import open_clip

    return bool((open_clip.get_pretrained_cfg(arch, pretrained) or {}).get("quick_gelu", False))


def tiny_clip(seed: int = 0) -> ClipTaskModel:
    """A 2-layer, width-64 CLIP on 32×32 images, random init (for tests), same code path as real CLIP."""
    import open_clip

    torch.manual_seed(seed)
    clip = open_clip.model.CLIP(**TINY_CLIP_CONFIG)
    return ClipTaskModel(clip.eval(), _tokenizer("ViT-B-32"), TINY_CLIP_CONFIG["vision_cfg"]["image_size"],
                         model_cfg=TINY_CLIP_CONFIG)
