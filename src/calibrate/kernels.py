"""Calibration kernels: one program per kernel class and size, run by `funcfuse calibrate` (src/calibrate/mod.rs)."""
import torch


def launch(x: f32[1]) -> f32[1]:
    return x + x


def copy_small(x: f32[4096]) -> f32[4096]:
    return -x


def copy_large(x: f32[4194304]) -> f32[4194304]:
    return -x


def mix_small(x: f32[16384], y: f32[16384]) -> f32[16384]:
    return x * y + x - y * 0.5


def mix_large(x: f32[2097152], y: f32[2097152]) -> f32[2097152]:
    return x * y + x - y * 0.5


def exp_small(x: f32[16384]) -> f32[16384]:
    return torch.exp(x) * x


def exp_large(x: f32[1048576]) -> f32[1048576]:
    return torch.sigmoid(x) + torch.exp(x) * torch.tanh(x)


def strided(x: f32[1024, 1024]) -> f32[1024, 1024]:
    return x.t() + 1.0


def gathered(x: f32[4096, 64], i: i64[2048]) -> f32[2048, 64]:
    return x[i] * 2.0


def rows_short(x: f32[65536, 8]) -> f32[65536]:
    return x.sum(dim=1)


def rows_long(x: f32[64, 65536]) -> f32[64]:
    return x.sum(dim=1)


def softmax_rows(x: f32[1024, 512]) -> f32[1024, 512]:
    return torch.softmax(x, dim=-1)


def gemv(w: f32[2048, 1024], v: f32[1024]) -> f32[2048]:
    return w @ v


def gemm_small(a: f32[64, 64], b: f32[64, 64]) -> f32[64, 64]:
    return a @ b


def gemm_large(a: f32[256, 512], b: f32[512, 256]) -> f32[256, 256]:
    return a @ b


def loop_launches(x: f32[64]) -> f32[64]:
    for _ in range(200):
        x = x * 0.5 + 1.0
    return x


def sort_host(x: f32[65536]) -> f32[65536]:
    return torch.sort(x).values
