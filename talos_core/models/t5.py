"""T5 classifiers by rank classification (transformers).

``θ`` is the whole encoder-decoder. The frozen "head" is the task's label strings, tokenized. The
logit of class ``c`` for input ``x`` is the log-likelihood ``Σ_l log p(label_c[l] | x, label_c[<l])``
of its label string; the prediction is the best-ranked label, as in the paper's T5 evaluation, and
``log_softmax`` over these scores is ``log p(y|x)`` for mask calibration. The encoder runs once per
input; its states are shared by the ``C`` label decodings.

Maskable (notes on the official code): every Linear except ``lm_head``, and the layer norms;
the shared token embedding and the relative-attention bias stay frozen.
"""

from __future__ import annotations

import numpy as np
import torch
from transformers.modeling_outputs import BaseModelOutput

from talos_core.models.base import Batch, Head, TaskModel
from talos_core.models.text import additive_mask
from talos_core.tasks.base import Inputs, TaskSpec


class T5TaskModel(TaskModel):
    family = "t5"
    modality = "text"

    def __init__(self, t5: torch.nn.Module, tokenizer, max_length: int = 128) -> None:
        super().__init__()
        self.t5 = t5
        self.tokenizer = tokenizer
        self.max_length = int(max_length)

    def excluded_names(self) -> set[str]:
        return {"t5.lm_head.weight", "t5.lm_head.bias"}

    def prepare(self, inputs: Inputs, task: TaskSpec | None = None) -> Batch:
        template = task.input_template if task is not None else "{}"
        enc = self.tokenizer([template.format(x) for x in inputs], padding=True, truncation=True,
                             max_length=self.max_length, return_tensors="pt")
        return {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]}

    def input_lengths(self, inputs: Inputs, task: TaskSpec | None = None) -> np.ndarray:
        template = task.input_template if task is not None else "{}"
        enc = self.tokenizer([template.format(x) for x in inputs], truncation=True, max_length=self.max_length)
        return np.asarray([len(ids) for ids in enc["input_ids"]], dtype=np.int64)

    def build_head(self, task: TaskSpec) -> Head:
        enc = self.tokenizer(list(task.classes), padding=True, return_tensors="pt")
        return {"label_ids": enc["input_ids"], "label_mask": enc["attention_mask"]}

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        labels, label_mask = self.head_label_ids, self.head_label_mask
        B, C = input_ids.shape[0], labels.shape[0]
        dtype = next(self.t5.parameters()).dtype
        enc = self.t5.encoder(input_ids=input_ids,
                              attention_mask=additive_mask(attention_mask, dtype)).last_hidden_state
        enc = enc.repeat_interleave(C, dim=0)  # [B*C, L, d]
        mask = additive_mask(attention_mask.repeat_interleave(C, dim=0), dtype)
        tiled = labels.repeat(B, 1)  # [B*C, Ll]: row b*C + c is label c
        out = self.t5(encoder_outputs=BaseModelOutput(last_hidden_state=enc), attention_mask=mask,
                      decoder_input_ids=self.t5._shift_right(tiled))
        logp = torch.log_softmax(out.logits.float(), dim=-1).gather(-1, tiled.unsqueeze(-1)).squeeze(-1)
        scores = (logp * label_mask.repeat(B, 1).to(logp.dtype)).sum(-1)
        return scores.view(B, C)


def load_t5(model_id: str, max_length: int = 128) -> T5TaskModel:
    """A T5 checkpoint (e.g. ``google-t5/t5-small``) and its sentencepiece tokenizer."""
    from transformers import AutoTokenizer, T5ForConditionalGeneration

    tokenizer = AutoTokenizer.from_pretrained(model_id)
    return T5TaskModel(T5ForConditionalGeneration.from_pretrained(model_id).eval(), tokenizer, max_length)


def tiny_t5(seed: int = 0) -> T5TaskModel:
    """A 2+2-layer, width-32 T5, random init, with the file-less byte-level ``ByT5Tokenizer``."""
    from transformers import ByT5Tokenizer, T5Config, T5ForConditionalGeneration

    torch.manual_seed(seed)
    config = T5Config(vocab_size=384, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2,
                      num_heads=4, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
    return T5TaskModel(T5ForConditionalGeneration(config).eval(), ByT5Tokenizer(), 96)
