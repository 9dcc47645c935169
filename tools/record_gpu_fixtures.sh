#!/usr/bin/env bash
# Record every GPU fixture of tools/record_hf_traces.py plus nvidia-smi clock/throttle queries
# (idle and under a bf16 GEMM load) into OUT (default $OUT): hf.tar, hybrid.tar, cpu.tar, env.tar.
set -u
out=${1:-$OUT}
work=$(mktemp -d)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
mkdir -p "$work/env"
q1=timestamp,index,name,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,clocks_throttle_reasons.active,power.draw,power.limit,temperature.gpu,utilization.gpu
q2=timestamp,index,name,clocks.sm,clocks.max.sm,clocks_event_reasons.active,clocks_event_reasons.hw_slowdown,clocks_event_reasons.sw_thermal_slowdown,clocks_event_reasons.sw_power_cap,clocks_event_reasons.gpu_idle
nvidia-smi > "$work/env/nvidia_smi.txt" 2>&1
nvidia-smi -q -d CLOCK,PERFORMANCE > "$work/env/smi_q_idle.txt" 2>&1
nvidia-smi --query-gpu=$q1 --format=csv > "$work/env/smi_clocks_idle.csv" 2>&1
python3 - <<'PY' &
import torch, time
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16); t = time.time()
while time.time() - t < 12:
    a @ a
torch.cuda.synchronize()
PY
load=$!
sleep 4
for i in 1 2 3 4 5 6; do nvidia-smi --query-gpu=$q1 --format=csv,noheader >> "$work/env/smi_clocks_load.csv" 2>&1; sleep 1; done
nvidia-smi --query-gpu=$q2 --format=csv > "$work/env/smi_events_load.csv" 2>&1
nvidia-smi -q -d CLOCK,PERFORMANCE > "$work/env/smi_q_load.txt" 2>&1
wait $load
tar -C "$work" -cf "$out/env.tar" env
python3 tools/record_hf_traces.py --out "$work/traces" --steps "${STEPS:-6}" --tar-dir "$out" 2>&1 | grep -v -E 'USDT|Warning|warn\(' 
ls -la "$out"
