"""Volume rendering from nerf-pytorch (yenchenlin/nerf-pytorch, run_nerf.py): ray sampling and the compositing of
raw network outputs into colour, depth, disparity and opacity maps, at test-time settings (no perturbation, no
noise). Ray batches arrive uniform in [-1, 1); near and far bounds are moved to the Blender scenes' 2 and 6."""
from __future__ import annotations

import torch
import torch.nn.functional as F


# nerf-pytorch, run_nerf.py: raw2outputs (raw_noise_std 0, white_bkgd False)
def _raw2outputs(raw, z_vals, rays_d, raw_noise_std=0, white_bkgd=False, pytest=False):
    raw2alpha = lambda raw, dists, act_fn=F.relu: 1.0 - torch.exp(-act_fn(raw) * dists)
    dists = z_vals[..., 1:] - z_vals[..., :-1]
    dists = torch.cat([dists, torch.Tensor([1e10]).expand(dists[..., :1].shape)], -1)
    dists = dists * torch.norm(rays_d[..., None, :], dim=-1)
    rgb = torch.sigmoid(raw[..., :3])
    noise = 0.0
    if raw_noise_std > 0.0:
        noise = torch.randn(raw[..., 3].shape) * raw_noise_std
    alpha = raw2alpha(raw[..., 3] + noise, dists)
    weights = alpha * torch.cumprod(torch.cat([torch.ones((alpha.shape[0], 1)), 1.0 - alpha + 1e-10], -1), -1)[:, :-1]
    rgb_map = torch.sum(weights[..., None] * rgb, -2)
    depth_map = torch.sum(weights * z_vals, -1)
    disp_map = 1.0 / torch.max(1e-10 * torch.ones_like(depth_map), depth_map / torch.sum(weights, -1))
    acc_map = torch.sum(weights, -1)
    if white_bkgd:
        rgb_map = rgb_map + (1.0 - acc_map[..., None])
    return rgb_map, disp_map, acc_map, weights, depth_map


# nerf-pytorch, run_nerf.py: raw2outputs on given samples (raw_noise_std 0, white_bkgd True)
def nerf_raw2outputs(
    raw: f32[32, 16, 4], raw_z: f32[32, 16], rays_d: f32[32, 3]
) -> tuple[f32[32, 3], f32[32], f32[32], f32[32, 16], f32[32]]:
    z_vals = torch.cumsum(raw_z.abs() * 0.25 + 0.05, -1) + 2.0
    return _raw2outputs(raw * 3.0, z_vals, rays_d, 0.0, True)


# nerf-pytorch, run_nerf.py: render_rays at test time (N_importance 0, perturb 0, lindisp False, no view
# directions), with the network's raw output given
def nerf_render_rays(ray_batch: f32[48, 8], raw: f32[48, 24, 4]) -> tuple[f32[48, 24, 3], f32[48, 3], f32[48], f32[48]]:
    ray_batch = torch.cat([ray_batch[:, :6], ray_batch[:, 6:8].abs() + torch.tensor([2.0, 6.0])], -1)
    N_samples = 24
    lindisp = False
    perturb = 0.0
    N_rays = ray_batch.shape[0]
    rays_o, rays_d = ray_batch[:, 0:3], ray_batch[:, 3:6]
    viewdirs = ray_batch[:, -3:] if ray_batch.shape[-1] > 8 else None
    bounds = torch.reshape(ray_batch[..., 6:8], [-1, 1, 2])
    near, far = bounds[..., 0], bounds[..., 1]
    t_vals = torch.linspace(0.0, 1.0, steps=N_samples)
    if not lindisp:
        z_vals = near * (1.0 - t_vals) + far * (t_vals)
    else:
        z_vals = 1.0 / (1.0 / near * (1.0 - t_vals) + 1.0 / far * (t_vals))
    z_vals = z_vals.expand([N_rays, N_samples])
    pts = rays_o[..., None, :] + rays_d[..., None, :] * z_vals[..., :, None]
    rgb_map, disp_map, acc_map, weights, depth_map = _raw2outputs(raw * 3.0, z_vals, rays_d, 0.0, False)
    return pts, rgb_map, disp_map, acc_map
