#!/usr/bin/env bash
# The step benchmarks of every family on a CUDA GPU, in bfloat16, each against its bare loop.
#
# Runs bench/real_size.py (every family at its published size), bench/train_step.py (Stable
# Audio 3), bench/sdxl_step.py (SDXL), bench/ace_step_step.py (ACE-Step 1.5), bench/lokr_step.py (LoKr against LoRA) and bench/muon_step.py (Muon against
# AdamW) with --device cuda and bfloat16, one after the other, each under its own time limit so
# that the whole stays within 10 minutes. Each prints its ratios (ours against the reference
# measured in the same run) and the memory a step adds (peak allocated on CUDA); this script
# adds the GPU's name and, per benchmark, its wall time and the device's peak memory in use.
#
# torch.compile: not used. tunesmith's trainers run eager (no stage compiles a model), so a
# compiled bare loop would be compared with something the pipeline never runs.
#
# Without a CUDA GPU (torch sees none) it says so and exits 0.
#
#     bench/gpu.sh            PYTHON=.venv/bin/python by default
set -u
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-.venv/bin/python}"
[ -x "$PYTHON" ] || PYTHON=python3

if ! "$PYTHON" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    echo "bench/gpu.sh: no CUDA GPU present (torch.cuda.is_available() is False); nothing to run"
    exit 0
fi
"$PYTHON" -c 'import torch; p = torch.cuda.get_device_properties(0); print(f"GPU: {p.name}, {p.total_memory / 2**30:.0f} GiB; torch {torch.__version__}, CUDA {torch.version.cuda}")'

# name, seconds allowed, command (each under `timeout`; the limits add up to 570 s). The
# full-size rows go first: every family's published architecture in bfloat16 (their rows place
# themselves on CUDA where there is one), the estimate against CUDA's peak allocated.
BENCHES=(
    "real_size|300|bench/real_size.py --json real_size_gpu.json"
    "train_step|50|bench/train_step.py --device cuda --dtype bfloat16 --steps 20"
    "sdxl_step|60|bench/sdxl_step.py --device cuda --dtype bfloat16 --steps 10 --threads 0"
    "ace_step_step|60|bench/ace_step_step.py --device cuda --dtype bfloat16 --steps 10 --threads 0"
    "lokr_step|50|bench/lokr_step.py --device cuda --dtype bfloat16 --steps 5"
    "muon_step|50|bench/muon_step.py --device cuda --bf16 --steps 4 --threads 0"
)
failed=0
for entry in "${BENCHES[@]}"; do
    IFS='|' read -r name limit command <<<"$entry"
    echo
    echo "== $name: $command"
    log=$(mktemp)
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 >"$log" 2>/dev/null &
    watch=$!
    start=$(date +%s)
    # shellcheck disable=SC2086
    timeout "$limit" "$PYTHON" $command 2>&1 | grep -v -e '^\[transformers\]' -e 'FutureWarning' -e 'WeightNorm.apply'
    status=${PIPESTATUS[0]}
    kill "$watch" 2>/dev/null
    wait "$watch" 2>/dev/null
    peak=$(sort -n "$log" | tail -1)
    rm -f "$log"
    echo "-- $name: exit $status, $(( $(date +%s) - start )) s, device memory in use at most ${peak:-?} MiB (nvidia-smi)"
    [ "$status" -eq 0 ] || failed=$((failed + 1))
done
echo
echo "bench/gpu.sh: $(( ${#BENCHES[@]} - failed )) of ${#BENCHES[@]} benchmarks ran to the end"
[ "$failed" -eq 0 ]
