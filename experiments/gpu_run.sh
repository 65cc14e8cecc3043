#!/bin/bash
# One call on a lent GPU machine (device tool): the checks only a GPU can make, in order of
# value, each with its own time limit so the call ends inside TOTAL seconds. Results in $OUT.
#   run(command="bash experiments/gpu_run.sh 520", carry=[".whl"], timeout_s=560)
# .whl holds transformers==5.23.0 (the sweep's pin; the machine has its own torch/torchvision).
TOTAL=${1:-520}
. "$(dirname "$0")/gpu_env.sh"
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 -c "import torch, torchvision, transformers, onnxruntime as o; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'torchvision', torchvision.__version__, 'transformers', transformers.__version__, 'onnxruntime', o.__version__, o.get_available_providers())"
  g++ --version | head -1; git log -1 --format='tree at %H' 2>/dev/null; } > "$OUT/env.txt" 2>&1
# AOTInductor on CUDA died on load (std::regex in the package's wrapper, 2026-11-24): which
# libstdc++ does the process hold, and does preloading the compiler's own one mend it?
( python3 -c "import torch; print('process libstdc++:', sorted({l.split()[-1] for l in open('/proc/self/maps') if 'libstdc++' in l}))"
  lib=$(g++ -print-file-name=libstdc++.so.6); echo "compiler libstdc++: $(readlink -f "$lib")"
  echo "plain: $(timeout 200 python3 -c "from stitch.lower.aoti_probe import aoti_load_failure as f; print(f('cuda') or 'loads')" 2>&1 | tail -1)"
  echo "LD_PRELOAD: $(LD_PRELOAD=$lib timeout 200 python3 -c "from stitch.lower.aoti_probe import aoti_load_failure as f; print(f('cuda') or 'loads')" 2>&1 | tail -1)"
) > "$OUT/aoti.txt" 2>&1 &
timeout 170 python3 -m pytest -m gpu -q -p no:cacheprovider tests/lower > "$OUT/pytest_gpu.txt" 2>&1
echo "pytest rc $?" >> "$OUT/pytest_gpu.txt"
MODELS="hf:jetmoe hf:switch_transformers hf:xlm torchvision:fcos_resnet50_fpn hf:ctrl hf:reformer torchvision:retinanet_resnet50_fpn hf:fsmt"
timeout $(( $(left) - 10 )) python3 experiments/gpu_models.py "$OUT" --budget $(( $(left) - 20 )) $MODELS > "$OUT/models.log" 2>&1
kill %1 2>/dev/null; wait
# The zoo (experiments/gpu_check.py) needs a call of its own: its auto/aoti rows run the
# AOTInductor probe (over a minute) before anything else.
