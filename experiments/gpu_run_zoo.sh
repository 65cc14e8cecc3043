#!/bin/bash
# A GPU call for the whole zoo on CUDA (experiments/gpu_check.py): every backend with and
# without CUDA graphs against the eager model, auto's decision, latency ratios. AOTInductor
# loads only with the compiler's libstdc++ preloaded on torch 2.11 (gpu.md, fourth run).
# The loop cases (while_loop, early exit) first: new since the last zoo run.
#   run(command="bash experiments/gpu_run_zoo.sh 480", timeout_s=520)
TOTAL=${1:-480}
OUT=${OUT:-/tmp/gpu_out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
LD_PRELOAD=$(g++ -print-file-name=libstdc++.so.6); export LD_PRELOAD
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 -c "import torch, onnxruntime as o; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'onnxruntime', o.__version__, o.get_available_providers())"
  echo "LD_PRELOAD=$LD_PRELOAD"; git log -1 --format='tree at %H' 2>/dev/null; } > "$OUT/env.txt" 2>&1
FIRST="halve_until_small early_exit_layers tensor_counted_loop"
REST=$(python3 -c "
from tests.zoo import CASES
print(' '.join(c for c in CASES if 'dynamic_shape' not in CASES[c].kinds and c not in '$FIRST'.split()))")
GPU_CHECK_SKIP=check,artifact timeout $(( TOTAL - 5 )) python3 experiments/gpu_check.py "$OUT" \
  $FIRST $REST > "$OUT/zoo.log" 2>&1
echo "gpu_check rc $?" >> "$OUT/zoo.log"
