"""F.interpolate in every mode funcfuse supports, with sizes and scale factors (given, recomputed), align_corners both
ways, in 1, 2 and 3 spatial dims: YOLACT and DETR upsample masks this way."""
from __future__ import annotations
import torch
import torch.nn.functional as F


def interpolate_modes(x: f32[2, 3, 5, 7], y: f32[1, 2, 6], z: f64[1, 1, 3, 4, 5]) -> tuple[
    f32[2, 3, 9, 11], f32[2, 3, 10, 14], f32[2, 3, 9, 11], f32[2, 3, 4, 3], f32[1, 2, 9], f32[1, 2, 13],
    f32[2, 3, 7, 10], f64[1, 1, 5, 6, 9], f32[2, 3, 11, 11], f32[1, 2, 9]
]:
    a = F.interpolate(x, size=(9, 11), mode="bilinear", align_corners=False)
    b = F.interpolate(x, scale_factor=2)
    c = F.interpolate(x, size=(9, 11), mode="bilinear", align_corners=True)
    d = F.interpolate(x, size=(4, 3), mode="bilinear")
    e = F.interpolate(y, scale_factor=1.5, mode="linear")
    f = F.interpolate(y, size=13, mode="nearest-exact")
    g = F.interpolate(x, scale_factor=(1.5, 1.45), mode="bilinear", recompute_scale_factor=True)
    h = F.interpolate(z, size=(5, 6, 9), mode="trilinear")
    i = F.interpolate(x, size=11, mode="nearest")
    j = F.interpolate(y, scale_factor=1.6, mode="nearest")
    return a, b, c, d, e, f, g, h, i, j


def upsampled_mask_thresholded(proto: f32[6, 8, 4], coeffs: f32[3, 4]) -> f32[3, 12, 16]:
    # YOLACT's masks: upsampled from a view (permuted), then thresholded in place.
    masks = torch.sigmoid(proto @ coeffs.t()).permute(2, 0, 1)
    masks = F.interpolate(masks.unsqueeze(0), (12, 16), mode="bilinear", align_corners=False).squeeze(0)
    masks.gt_(0.5)
    return masks
