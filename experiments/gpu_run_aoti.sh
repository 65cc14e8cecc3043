#!/bin/bash
# Second call of a GPU session: AOTInductor on CUDA with the compiler's libstdc++ preloaded
# (without it, loading a CUDA package segfaults in torch 2.11's std::regex; see gpu.md), the
# demo saved as .pt2 and loaded in a fresh process, zoo rows with aoti variants; beside it,
# whether torchvision's FCOS exports on this torch on the CPU (it was refused on CUDA).
TOTAL=${1:-280}
OUT=${OUT:-/tmp/gpu_out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
LD_PRELOAD=$(g++ -print-file-name=libstdc++.so.6); export LD_PRELOAD
( timeout $(( TOTAL - 20 )) python3 -c "
import sys, time; sys.path[:0] = ['experiments', '.']
import torch, sweep_worker, stitch
model, args, kwargs, ex = sweep_worker.build('torchvision', 'fcos_resnet50_fpn', {})
t = time.time()
try:
    p = stitch.export(model.eval(), args, kwargs, examples=[ex]); print('FCOS cpu', torch.__version__, 'exported', p.report.graph_ops, round(time.time() - t))
except Exception as e:
    print('FCOS cpu', torch.__version__, type(e).__name__, str(e)[:400])
" > "$OUT/fcos_cpu.txt" 2>&1 ) &
GPU_CHECK_SKIP=check timeout $(( TOTAL - 10 )) python3 experiments/gpu_check.py "$OUT" \
  branch_on_tensor print_stats > "$OUT/zoo.log" 2>&1
wait
