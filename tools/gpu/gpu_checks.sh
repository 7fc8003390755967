#!/bin/bash
# Device side, one call (`carry: [".gpupack3"]`, from tools/gpu/make_checks_pack.sh): `pytest -m gpu`, then the
# Table 3 analogue with the exact-gradient bound of its TaLoS mask, within LIMIT seconds (default 520); outputs to
# $OUT (device.txt, pytest_gpu.txt, table3.txt, table3.json).
#   MODELS (clip-vit-l-14-random): bench_table3's --models; SKIP_PYTEST=1 runs the benchmark only; DEVICE (cuda):
#   cpu rehearses the script here (with the venv's python3 first on PATH).
set -u
LIMIT=${LIMIT:-520} MODELS=${MODELS:-clip-vit-l-14-random} DEVICE=${DEVICE:-cuda}
T0=$(date +%s)
tar xzf .gpupack3/data.tgz -C /
source .gpupack3/device_minilm.sh
tar xzf .gpupack3/modelrest.tgz -C /root/pack/model
tar xzf .gpupack3/oc.tgz -C /root/pack/site
export PYTHONPATH=$PWD:/root/pack/site:$(cat .gpupack3/site.txt) PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python3 -c "import torch, sys; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'python', sys.version.split()[0])"
  lscpu | grep 'Model name'; } 2>&1 | tee "$OUT/device.txt"
if [ -z "${SKIP_PYTEST:-}" ]; then
  TALOS_GPU_TEST_DEVICE=$DEVICE timeout 210 python3 -m pytest -q -m gpu tests/test_gpu.py -p no:cacheprovider -rs --durations=5 \
    > "$OUT/pytest_gpu.txt" 2>&1
  echo "pytest rc=$? after $(( $(date +%s) - T0 )) s" | tee -a "$OUT/pytest_gpu.txt"; tail -12 "$OUT/pytest_gpu.txt"
fi
LEFT=$(( LIMIT - ($(date +%s) - T0) ))
echo "table3: ${LEFT} s left"
timeout $LEFT python3 -m bench.bench_table3 --device $DEVICE --models $MODELS --no-fisher --bound \
  --methods nonlinear talos lota linearized llora --budget $(( LEFT - 25 )) --json "$OUT/table3.json" \
  > "$OUT/table3.txt" 2>&1
echo "table3 rc=$? after $(( $(date +%s) - T0 )) s" | tee -a "$OUT/table3.txt"; tail -25 "$OUT/table3.txt"
