#!/bin/bash
# ONNX Runtime's CUDA provider on a lent GPU: onnxruntime-gpu 1.31.1 (a CUDA 13 build, as the
# machine's torch) is a 255.6 MB wheel and a call carries 64 MiB, so the session's earlier
# calls carry it in parts (.ortN/part.*: a tar of the wheel's package, xz, split in 51 MiB;
# each call copies its part to /tmp/ortparts, kept while the machine stays warm); this last
# call assembles them and runs:
#   1. whether the CUDA provider loads as stitch opens it (torch imported first), and with the
#      nvidia/* pip libraries on LD_LIBRARY_PATH if it does not;
#   2. the gpu tests of test_onnx_binding (the CUDA provider, bound in place) and, beside
#      them, of test_arm_asserts_lowered (Inductor and AOTInductor on CUDA, the compiler's
#      libstdc++ preloaded as gpu_run_aoti.sh says why);
#   3. experiments/gpu_check.py, eager and onnxruntime only, on the zoo cases ORT_CASES (all
#      by default), and the demo saved as .onnx and loaded in a fresh process on CUDA inputs;
#   4. with .whl carried (transformers, the sweep's pin), the real models ORT_MODELS through
#      experiments/gpu_models.py, variants eager and onnxruntime (ORT_MODELS_S seconds kept
#      for them).
#   run(command="mkdir -p /tmp/ortparts && cp .ort1/part.* /tmp/ortparts/", carry=[".ort1"])
#   ... one call per part, then
#   run(command="ORT_SHA=... bash experiments/gpu_run_ort.sh 420", carry=[".ort4", ".whl"],
#       timeout_s=460)
TOTAL=${1:-400}
END=$(( $(date +%s) + TOTAL ))
left() { echo $(( END - $(date +%s) )); }
OUT=${OUT:-/tmp/gpu_out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
mkdir -p /tmp/ortparts && cp .ort*/part.* /tmp/ortparts/ 2>/dev/null
echo "parts: $(cat /tmp/ortparts/part.* | sha256sum) (expected ${ORT_SHA:-unknown})"
rm -rf /tmp/ortsite && mkdir -p /tmp/ortsite
cat /tmp/ortparts/part.* | python3 -c "import sys, tarfile; tarfile.open(fileobj=sys.stdin.buffer, mode='r|xz').extractall('/tmp/ortsite')" \
  || { echo "parts incomplete:"; ls -la /tmp/ortparts; exit 3; }
export PYTHONPATH=/tmp/ortsite
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/ortsite:/tmp/site
fi
PROBE='
import torch, onnx, onnxruntime as ort
from onnx import helper, TensorProto
g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
from stitch.lower.onnx_runtime import session
s = session(m.SerializeToString(), device="cuda")
print("onnxruntime", ort.__version__, ort.__file__, ort.get_available_providers(), "session:", s.get_providers())
'
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
  git log -1 --format='tree at %H' 2>/dev/null
  echo "plain: $(python3 -c "$PROBE" 2>&1 | tail -3)"; } > "$OUT/env.txt" 2>&1
if ! grep -q "session: \['CUDAExecutionProvider'" "$OUT/env.txt"; then
  SP=$(python3 -c "import site; print(site.getsitepackages()[0])")
  LD_LIBRARY_PATH=$(find "$SP/nvidia" -name 'lib*.so*' -printf '%h\n' 2>/dev/null | sort -u | paste -sd:)
  export LD_LIBRARY_PATH
  echo "with LD_LIBRARY_PATH=$LD_LIBRARY_PATH: $(python3 -c "$PROBE" 2>&1 | tail -3)" >> "$OUT/env.txt"
fi
cat "$OUT/env.txt"
( LD_PRELOAD=$(g++ -print-file-name=libstdc++.so.6) timeout 240 python3 -m pytest -m gpu -q \
    -p no:cacheprovider -rs tests/lower/test_arm_asserts_lowered.py > "$OUT/pytest_asserts.txt" 2>&1
  echo "pytest rc $?" >> "$OUT/pytest_asserts.txt" ) &
timeout 120 python3 -m pytest -m gpu -q -p no:cacheprovider -rs tests/lower/test_onnx_binding.py \
  > "$OUT/pytest_gpu.txt" 2>&1
echo "pytest rc $?" >> "$OUT/pytest_gpu.txt"; tail -15 "$OUT/pytest_gpu.txt"
CASES=${ORT_CASES:-$(python3 -c "
from tests.zoo import CASES
first = [c for c in CASES if {'branch', 'loop'} & set(CASES[c].kinds)]
rest = [c for c in CASES if c not in first]
print(' '.join(c for c in first + rest if 'dynamic_shape' not in CASES[c].kinds))")}
GPU_CHECK_BACKENDS=eager,onnxruntime GPU_CHECK_SKIP=check,auto,compile_original \
  GPU_CHECK_ARTIFACT_BACKEND=onnxruntime \
  timeout $(( $(left) - 5 - ${ORT_MODELS_S:-0} )) python3 experiments/gpu_check.py "$OUT" $CASES \
  > "$OUT/zoo.log" 2>&1
echo "gpu_check rc $?" >> "$OUT/zoo.log"; tail -c 3000 "$OUT/zoo.log"
wait; tail -15 "$OUT/pytest_asserts.txt"
if [ -n "${ORT_MODELS:-}" ] && [ "$(left)" -gt 60 ]; then
  GPU_MODELS_VARIANTS=eager,onnxruntime timeout $(( $(left) - 5 )) python3 experiments/gpu_models.py \
    "$OUT" --budget $(( $(left) - 15 )) $ORT_MODELS > "$OUT/models.log" 2>&1
  echo "gpu_models rc $?" >> "$OUT/models.log"; tail -c 3000 "$OUT/models.log"
fi
