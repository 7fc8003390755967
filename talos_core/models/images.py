"""Raw image inputs (uint8 arrays) → normalized float tensors, shared by the image families."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F

CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


def _one(image: np.ndarray, size: int) -> torch.Tensor:
    arr = np.asarray(image)
    if arr.ndim == 2:
        arr = np.repeat(arr[:, :, None], 3, axis=2)
    if arr.ndim != 3 or arr.shape[2] not in (1, 3, 4):
        raise ValueError(f"expected an image of shape (H, W) or (H, W, 3), got {arr.shape}")
    if arr.shape[2] == 1:
        arr = np.repeat(arr, 3, axis=2)
    arr = arr[:, :, :3]
    x = torch.from_numpy(np.ascontiguousarray(arr)).permute(2, 0, 1).float().div_(255.0)
    if x.shape[1:] != (size, size):
        x = F.interpolate(x[None], size=(size, size), mode="bicubic", align_corners=False, antialias=True)[0]
    return x.clamp_(0.0, 1.0)


def images_to_tensor(images: np.ndarray | Sequence[np.ndarray], size: int,
                     mean: Sequence[float] = CLIP_MEAN, std: Sequence[float] = CLIP_STD) -> torch.Tensor:
    """Convert uint8 images ``(N, H, W)``, ``(N, H, W, 3)`` or a list of such arrays to ``[N, 3, size, size]``.

    Grey images are repeated over three channels, then resized (bicubic, antialiased) to a square
    ``size`` and normalized with ``mean``/``std``.

    >>> images_to_tensor(np.zeros((2, 8, 8), dtype=np.uint8), 16).shape
    torch.Size([2, 3, 16, 16])
    """
    if isinstance(images, np.ndarray) and images.ndim in (3, 4) and images.shape[0] > 0:
        arr = images if images.ndim == 4 else images[..., None]
        x = torch.from_numpy(np.ascontiguousarray(arr)).permute(0, 3, 1, 2).float().div_(255.0)
        if x.shape[1] == 1:
            x = x.expand(-1, 3, -1, -1)
        x = x[:, :3]
        if x.shape[2:] != (size, size):
            x = F.interpolate(x, size=(size, size), mode="bicubic", align_corners=False, antialias=True)
        x = x.clamp(0.0, 1.0)
    else:
        x = torch.stack([_one(img, size) for img in images])
    m = torch.tensor(mean, dtype=x.dtype).view(1, 3, 1, 1)
    s = torch.tensor(std, dtype=x.dtype).view(1, 3, 1, 1)
    return (x - m) / s
