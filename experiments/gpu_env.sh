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
