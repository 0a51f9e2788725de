#!/usr/bin/env bash
# A GPU laptop with a driver and no CUDA toolkit: does the course run live on CUDA libraries from PyPI?
#
#   tools/env/gpu_laptop_proof.sh WHEELS [full|lean]     (as root, on Linux with an NVIDIA GPU and driver)
#   tools/env/gpu_laptop_proof.sh --download-commands    (where there is internet: builds WHEELS)
#
# WHEELS is a folder of wheels for this machine's Python (3.12, manylinux x86_64, from the printed
# `pip download` lines). `full` installs what `make lab CUDA_EXTRA=cuda12` installs: the course with
# its cuda12 extra, i.e. cupy-cuda12x[ctk] and numba-cuda[cu12] with every CUDA library wheel they
# name (about 1.9 GB). `lean` installs CuPy without [ctk] beside numba-cuda[cu12]: only the CUDA
# runtime, NVRTC, NVVM/NVCC, CCCL and nvJitLink wheels (about 0.44 GB), enough for Chapter 3,
# which calls no cuBLAS/cuFFT/cuRAND/cuSOLVER/cuSPARSE. The script
#   1. makes a fresh virtual environment (no system site-packages) in /tmp and installs from WHEELS
#      only (--no-index), plus ipykernel and nbconvert to run the notebook;
#   2. in a private mount namespace (unshare -m) lays an empty read-only tmpfs over every
#      /usr/local/cuda*, unsets CUDA_HOME/CUDA_PATH/CUDA_ROOT and drops every CUDA entry from PATH
#      and LD_LIBRARY_PATH;
#   3. runs a CuPy kernel (NVRTC), a Numba CUDA kernel (NVVM) and copies, then reads /proc/self/maps:
#      it fails if any library comes from /usr/local/cuda, or any CUDA library other than the
#      driver's libcuda comes from outside the new environment, and prints where each came from;
#   4. runs Chapter 3 (notebooks/03_dma_and_copy_engines.ipynb) live with nbconvert, fails on any
#      error output, and prints its mode banner and headline lines (GB/s, t0, n1/2).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--download-commands" ]; then
    cat <<'EOF'
P="--python-version 3.12 --only-binary=:all: --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
   --platform manylinux_2_24_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_28_x86_64 \
   --platform manylinux_2_34_x86_64 --platform any"
COMMON="numpy==2.4.6 numba==0.68.1 plotly==6.5.2 ipywidgets==8.1.9 jsonschema==4.26.0 ipykernel==7.4.0 nbconvert"
# full (75 wheels, 1,994,454,478 bytes on 2026-11-27):
pip download $P -d wheels-full "cupy-cuda12x[ctk]==14.2.0" "numba-cuda[cu12]==0.30.4" $COMMON "setuptools>=77" wheel
# lean (no cuBLAS/cuFFT/cuRAND/cuSOLVER/cuSPARSE):
pip download $P -d wheels-lean "cupy-cuda12x==14.2.0" "numba-cuda[cu12]==0.30.4" $COMMON
EOF
    exit 0
fi

WHEELS=$(realpath "${1:?usage: tools/env/gpu_laptop_proof.sh WHEELS [full|lean]}")
MODE=${2:-full}
PY=${PYTHON:-python3}
T=$(mktemp -d /tmp/course-gpu-laptop.XXXXXX)
COMMON=(numpy==2.4.6 numba==0.68.1 plotly==6.5.2 ipywidgets==8.1.9 jsonschema==4.26.0 ipykernel nbconvert)
case $MODE in
    full) REQS=(".[cuda12]" ipykernel nbconvert) ;;
    lean) REQS=(cupy-cuda12x==14.2.0 "numba-cuda[cu12]==0.30.4" "${COMMON[@]}") ;;
    *) echo "mode must be full or lean" >&2; exit 2 ;;
esac
echo "== $MODE: a fresh environment $T/venv, from $WHEELS only (no index)"
"$PY" -m venv "$T/venv"
"$T/venv/bin/python" -m pip install -q --no-index --find-links "$WHEELS" --no-compile "${REQS[@]}"
du -sh "$T/venv"

echo "== hide the system CUDA toolkit and run, in a private mount namespace"
exec unshare -m --propagation private bash -s "$T" <<'INNER'
set -euo pipefail
T=$1; PY=$T/venv/bin/python
for d in /usr/local/cuda*; do
    if [ -d "$d" ]; then mount -t tmpfs -o ro,size=4k none "$d"; echo "hidden: $d (empty tmpfs)"; fi
done
unset CUDA_HOME CUDA_PATH CUDA_ROOT || true
strip() { tr ':' '\n' <<<"${1:-}" | grep -vi cuda | paste -sd: -; }
PATH=$(strip "$PATH"); LD_LIBRARY_PATH=$(strip "${LD_LIBRARY_PATH:-}")
export PATH LD_LIBRARY_PATH PYTHONPATH="$PWD" PYTHONNOUSERSITE=1 COURSE_T="$T"
echo "PATH=$PATH"; echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
for d in /usr/local/cuda*; do [ -d "$d" ] && echo "$d holds $(ls -A "$d" | wc -l) entries"; done
"$PY" - <<'EOF'
import os
import re

import cupy as cp
from numba import cuda

a = cp.arange(1 << 20, dtype=cp.float32)
b = (a * 2 + 1).sum()  # CuPy kernels, compiled by NVRTC


@cuda.jit
def inc(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] += 1


d = cuda.to_device(a.get())
inc[(a.size + 255) // 256, 256](d)  # a Numba kernel, compiled by NVVM
cuda.synchronize()
assert float(b) == float((cp.arange(1 << 20, dtype=cp.float64) * 2 + 1).sum()) and d.copy_to_host()[3] == 4
maps = [ln.split()[-1] for ln in open("/proc/self/maps").read().splitlines() if len(ln.split()) >= 6]
bad = sorted({p for p in maps if p.startswith("/usr/local/cuda")})
libs = sorted({p for p in maps if re.search(r"/lib(cudart|nvrtc|nvvm|nvJitLink|cuda|cublas)[^/]*\.so", p)})
print("CUDA libraries loaded:")
print("\n".join("  " + x for x in libs))
print("GPU:", cp.cuda.runtime.getDeviceProperties(0)["name"].decode(), "| CuPy", cp.__version__,
      "| CUDA runtime", cp.cuda.runtime.runtimeGetVersion(), "| driver", cp.cuda.runtime.driverGetVersion())
outside = [x for x in libs if not x.startswith(os.environ["COURSE_T"]) and not re.search(r"/libcuda\.so", x)]
if bad or outside:
    raise SystemExit(f"FAIL: from /usr/local/cuda: {bad}; CUDA libraries from outside the new environment: {outside}")
print("OK: nothing from /usr/local/cuda; every CUDA library but the driver's libcuda from the new environment")
EOF
out=$T/ch03.ipynb
"$PY" -m nbconvert --to notebook --execute --ExecutePreprocessor.timeout=600 \
    --ExecutePreprocessor.kernel_name=python3 notebooks/03_dma_and_copy_engines.ipynb --output "$out"
"$PY" - "$out" <<'EOF'
import json
import re
import sys

nb = json.load(open(sys.argv[1]))
outs = [o for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])]
text = ["".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", "")) for o in outs]
print("== Chapter 3, run live here:")
lines = [ln for t in text for ln in t.splitlines() if re.search(r"mode\s*:|GB/s|t0|t₀|n½|n1/2|half-bandwidth", ln)]
print("\n".join(lines[:80]))
errs = [o for o in outs if o["output_type"] == "error"]
sys.exit(f"FAIL: {len(errs)} error outputs: {[e['ename'] + ': ' + e['evalue'] for e in errs]}" if errs else 0)
EOF
INNER
