#!/usr/bin/env bash
# The GPU check: on a machine with an NVIDIA GPU, run every corpus program's plans (eager, unfunctionalized, ours)
# on the CUDA backend against the reference engine, and measure them side by side.
#
#   scripts/gpu_check.sh [OUT]        (default OUT: out/gpu)
#
# Builds with cargo unless FUNCFUSE_BIN names a prebuilt binary. NVRTC is taken from LD_LIBRARY_PATH, CUDA's
# lib64 or the pip package nvidia-cuda-nvrtc, whichever has it. Exits 1 if any plan differs from the reference.
set -euo pipefail
OUT=${1:-out/gpu}
mkdir -p "$OUT"
BIN=${FUNCFUSE_BIN:-}
if [ -z "$BIN" ]; then
    cargo build --release
    BIN=target/release/funcfuse
fi
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
         $(python3 -c 'import nvidia, os; print(" ".join(os.path.join(p, s, "lib") for p in nvidia.__path__ for s in os.listdir(p)))' 2>/dev/null || true); do
    if ls "$d"/libnvrtc.so* >/dev/null 2>&1; then
        export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"
        break
    fi
done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
echo "== compile check: every corpus program's kernels through NVRTC (sm_90)"
"$BIN" optimize corpus/ --backend cuda --out "$OUT/optimize" > "$OUT/optimize.log"
tail -1 "$OUT/optimize.log"
echo "== a cost profile of the GPU (includes host<->device copies of the micro-kernels' inputs and outputs)"
"$BIN" calibrate --backend cuda --out "$OUT/cuda-profile.json"
echo "== every plan on the GPU against the reference engine, measured (median of 20 runs), planned for the GPU's profile"
"$BIN" compare corpus/ --backend cuda --measure --runs 20 --costs "$OUT/cuda-profile.json" --out "$OUT/compare" > "$OUT/compare.log"
tail -3 "$OUT/compare.log"
if grep -q "differs from the reference" "$OUT/compare/compare.md"; then
    grep "differs from the reference" "$OUT/compare/compare.md"
    echo "FAIL: some plans differ from the reference engine on the GPU"
    exit 1
fi
echo "OK: every plan of every corpus program matches the reference engine on the GPU"
