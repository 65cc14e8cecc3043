#!/bin/bash
# Real models from the sweep on a lent GPU (device tool), one call: each model exported on
# CUDA inputs and deployed as eager / Inductor / AOTInductor, with and without CUDA-graph
# replay, checked against the model on both inputs and timed as ratios to eager
# (experiments/gpu_models.py). AOTInductor loads on torch 2.11 only with the compiler's
# libstdc++ preloaded (gpu.md, fourth run). .whl holds transformers==5.23.0 (the sweep's pin).
#   run(command="bash experiments/gpu_run_models.sh 500 hf:qwen2_5_vl_vision ...",
#       carry=[".whl"], timeout_s=540)
TOTAL=${1:-500}; shift
. "$(dirname "$0")/gpu_env.sh"
real_models_env
GPU_MODELS_VARIANTS=${GPU_MODELS_VARIANTS:-eager,eager+cudagraphs,inductor,inductor+cudagraphs,aoti} \
  timeout $(( $(left) - 5 )) python3 experiments/gpu_models.py "$OUT" --budget $(( $(left) - 15 )) "$@" \
  > "$OUT/models.log" 2>&1
echo "gpu_models rc $?" >> "$OUT/models.log"; tail -c 6000 "$OUT/models.log"
