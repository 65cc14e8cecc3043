# Sourced by the gpu_run*.sh scripts after TOTAL is set: the call's deadline (left), $OUT,
# unbuffered Python, and the carried wheels (.whl) installed into /tmp/site.
END=$(( $(date +%s) + TOTAL ))
left() { echo $(( END - $(date +%s) )); }
OUT=${OUT:-/tmp/gpu_out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
# real_models_env: AOTInductor's libstdc++ preload (torch 2.11, gpu.md fourth run) and the
# machine, versions and tree written to $OUT/env.txt (the real-model scripts)
real_models_env() {
  LD_PRELOAD=$(g++ -print-file-name=libstdc++.so.6); export LD_PRELOAD
  { date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
    python3 -c "import torch, torchvision, transformers, onnxruntime as o; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'torchvision', torchvision.__version__, 'transformers', transformers.__version__, 'onnxruntime', o.__version__)"
    echo "LD_PRELOAD=$LD_PRELOAD"; git log -1 --format='tree at %H' 2>/dev/null; } > "$OUT/env.txt" 2>&1
  cat "$OUT/env.txt"
}
