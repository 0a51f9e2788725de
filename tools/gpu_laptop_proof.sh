#!/usr/bin/env bash
# A GPU laptop with a driver and no CUDA toolkit: does the course run live on CUDA libraries from PyPI?
#
#   tools/gpu_laptop_proof.sh WHEELS [EXTRA]      (as root on a Linux machine with an NVIDIA GPU)
#
# WHEELS is a folder of wheels for this machine's Python (built elsewhere with the `pip download`
# lines printed by `tools/gpu_laptop_proof.sh --download-commands`); EXTRA is cuda12 (default) or
# cuda13. The script
#   1. installs the course's core and EXTRA (CuPy [ctk] and numba-cuda [cu12]/[cu13], their CUDA
#      libraries as wheels) plus nbconvert/ipykernel from WHEELS only (--no-index) into a fresh
#      --target folder;
#   2. in a private mount namespace (unshare -m) lays an empty tmpfs over every /usr/local/cuda*,
#      and clears CUDA_HOME/CUDA_PATH and every CUDA path from PATH and LD_LIBRARY_PATH;
#   3. checks that `import cupy`, a CuPy kernel, a Numba CUDA kernel and a copy load no library from
#      /usr/local/cuda (/proc/self/maps), and prints where libcudart/libnvrtc/libnvvm came from;
#   4. runs Chapter 3 (notebooks/03_dma_and_copy_engines.ipynb) live with nbconvert and prints its
#      headline figures (the cells' text outputs that name bandwidth, t0 or n1/2).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--download-commands" ]; then
    cat <<'EOF'
P="--python-version 3.12 --only-binary=:all: --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
   --platform manylinux_2_24_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_28_x86_64 \
   --platform manylinux_2_34_x86_64 --platform any"
pip download $P -d wheels-cu12 "cupy-cuda12x[ctk]==14.2.0" "numba-cuda[cu12]==0.30.4" numpy==2.4.6 numba==0.68.1 \
    plotly==6.5.2 ipywidgets==8.1.9 jsonschema==4.26.0 ipykernel==7.4.0 nbconvert "setuptools>=77" wheel
EOF
    exit 0
fi

WHEELS=$(realpath "${1:?usage: tools/gpu_laptop_proof.sh WHEELS [cuda12|cuda13]}")
EXTRA=${2:-cuda12}
PY=${PYTHON:-python3}
T=$(mktemp -d /tmp/course-gpu-laptop.XXXXXX)
echo "== install from $WHEELS only (no index) into $T (extra $EXTRA)"
"$PY" -m pip install -q --no-index --find-links "$WHEELS" --no-compile --target "$T/site" \
    ".[${EXTRA}]" ipykernel nbconvert
du -sh "$T/site"

echo "== hide the system CUDA toolkit and run, in a private mount namespace"
exec unshare -m --propagation private bash -s "$T" "$PY" <<'INNER'
set -euo pipefail
T=$1; PY=$2
for d in /usr/local/cuda*; do [ -d "$d" ] && mount -t tmpfs -o ro,size=1k none "$d" && echo "hidden: $d (empty tmpfs)"; done
unset CUDA_HOME CUDA_PATH CUDA_ROOT NUMBA_CUDA_DRIVER || true
strip() { tr ':' '\n' <<<"${1:-}" | grep -vi cuda | paste -sd: -; }
export PATH=$(strip "$PATH") LD_LIBRARY_PATH=$(strip "${LD_LIBRARY_PATH:-}")
export PYTHONPATH="$T/site:$PWD" PYTHONNOUSERSITE=1 JUPYTER_PATH="$T/site/share/jupyter"
echo "PATH=$PATH"; echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"; ls -A /usr/local/cuda* 2>/dev/null | head -3 || true
"$PY" - <<'EOF'
import re
import cupy as cp
from numba import cuda
a = cp.arange(1 << 20, dtype=cp.float32); b = (a * 2 + 1).sum()          # NVRTC-compiled CuPy kernels
@cuda.jit
def inc(x):
    i = cuda.grid(1)
    if i < x.size: x[i] += 1
d = cuda.to_device(a.get()); inc[(a.size + 255) // 256, 256](d); cuda.synchronize()  # NVVM-compiled
assert float(b) == float((cp.arange(1 << 20, dtype=cp.float64) * 2 + 1).sum()) and d.copy_to_host()[3] == 4
maps = open("/proc/self/maps").read()
bad = sorted({l.split()[-1] for l in maps.splitlines() if "/usr/local/cuda" in l})
libs = sorted({l.split()[-1] for l in maps.splitlines() if re.search(r"lib(cudart|nvrtc|nvvm|nvJitLink|cuda)\.so", l)})
print("CUDA libraries loaded:"); print("\n".join("  " + x for x in libs))
print("GPU:", cp.cuda.runtime.getDeviceProperties(0)["name"].decode(), "| CuPy", cp.__version__,
      "| CUDA runtime", cp.cuda.runtime.runtimeGetVersion())
if bad:
    raise SystemExit(f"FAIL: loaded from /usr/local/cuda: {bad}")
print("OK: nothing loaded from /usr/local/cuda")
EOF
"$PY" -m ipykernel install --prefix "$T/site" --name python3 >/dev/null
out=$T/ch03.ipynb
"$PY" -m nbconvert --to notebook --execute --ExecutePreprocessor.timeout=600 \
    --ExecutePreprocessor.kernel_name=python3 notebooks/03_dma_and_copy_engines.ipynb --output "$out"
"$PY" - "$out" <<'EOF'
import json, re, sys
nb = json.load(open(sys.argv[1]))
text = ["".join(o.get("text", "") or "".join(o.get("data", {}).get("text/plain", "")))
        for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])]
print("== Chapter 3, run live here:")
print("\n".join(ln for t in text for ln in t.splitlines()
                if re.search(r"mode\s*:|GB/s|t0|t₀|n½|n1/2|half-bandwidth", ln))[:6000])
errs = [o for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", []) if o["output_type"] == "error"]
sys.exit(f"FAIL: {len(errs)} error outputs" if errs else 0)
EOF
INNER
