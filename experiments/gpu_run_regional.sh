#!/bin/bash
# Regional lowering on CUDA, one call on a lent GPU (device tool): the bench rows where the
# whole stitched graph does not lower (LED, Longformer, SSDlite, LongCat-Flash) exported on
# CUDA inputs and deployed as eager / Inductor / regional / AOTInductor, with and without
# CUDA-graph replay, each checked against the model on every example and timed as ratios to
# eager and to torch.compile of the original (experiments/gpu_models.py). Then, with the time
# left, the zoo's cond and loop cases with regional among the backends
# (experiments/gpu_check.py). .whl holds transformers==5.23.0 (the sweep's pin).
#   run(command="bash experiments/gpu_run_regional.sh 500", carry=[".whl"], timeout_s=540)
TOTAL=${1:-500}
. "$(dirname "$0")/gpu_env.sh"
real_models_env
GPU_MODELS_TIMEOUT=150 \
GPU_MODELS_VARIANTS=eager,eager+cudagraphs,inductor,inductor+cudagraphs,regional,regional+cudagraphs \
  timeout $(( $(left) - 100 )) python3 experiments/gpu_models.py "$OUT" --budget $(( $(left) - 110 )) \
  hf:led hf:longformer torchvision:ssdlite320_mobilenet_v3_large hf:longcat_flash > "$OUT/models.log" 2>&1
echo "gpu_models rc $?" >> "$OUT/models.log"; tail -c 3000 "$OUT/models.log"
GPU_CHECK_SKIP=check,artifact,auto GPU_CHECK_BACKENDS=eager,inductor,regional \
  timeout $(( $(left) - 5 )) python3 experiments/gpu_check.py "$OUT" \
  early_exit_layers halve_until_small nested_encoder branch_on_tensor > "$OUT/zoo.log" 2>&1
echo "gpu_check rc $?" >> "$OUT/zoo.log"; tail -c 2000 "$OUT/zoo.log"
