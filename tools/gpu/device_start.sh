#!/bin/bash
# Device side, second call: assemble MiniLM from the two parts, install the data, copy the code to a fixed place
# (/root/talos: later calls re-send the working tree, the run must not see it change), start CUDA MPS and the
# suite in its own process session (it outlives the call), then return at once.
#   SUITE (text), SCALE (full), JOBS (8), DEVICE (cuda): what to run and where.
#   PART (empty: the whole suite): `talos suite --part`, e.g. PART=talos,lota; /root/store then holds the earlier
#   parts' record (call 1 unpacks the JSON snapshot make_pack.sh put in .gpupack1/store.tgz).
#   TRAIN_PRECISION (empty: the suite's own, bf16 on a GPU): $TALOS_TRAIN_PRECISION for the run, e.g. fp32 where the
#   suite's other parts train on CPUs in fp32 (the environment variable, not --train-precision, so the suite record's
#   fingerprint stays the one the other parts resume; each run's manifest records the precision it trained in).
#   The code: the commit the pack carries (make_pack.sh CODE=), else the working tree the call sent.
set -euo pipefail
SUITE=${SUITE:-text} SCALE=${SCALE:-full} JOBS=${JOBS:-8} DEVICE=${DEVICE:-cuda} PART=${PART:-}
TRAIN_PRECISION=${TRAIN_PRECISION:-}
source .gpupack2/device_minilm.sh
cat /root/pack/model.part1 .gpupack2/model.part2 > /root/pack/model/model.safetensors
tar xzf .gpupack2/modelrest.tgz -C /root/pack/model
echo "$(cat .gpupack2/model.sha256)  /root/pack/model/model.safetensors" | sha256sum -c -
rm -rf /root/talos && mkdir /root/talos
if [ -f .gpupack2/code.tgz ]; then
  tar xzf .gpupack2/code.tgz -C /root/talos && echo "code: commit $(cat .gpupack2/code.commit)"
else
  tar cf - --exclude='./.gpupack*' --exclude=./.git --exclude=./cached_results . | tar xf - -C /root/talos
fi
cat > /root/env.sh <<E2
export PYTHONPATH=/root/talos:/root/pack/site:$(cat /root/pack/site.txt)
export OMP_NUM_THREADS=2 MKL_NUM_THREADS=2 PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
${TRAIN_PRECISION:+export TALOS_TRAIN_PRECISION=$TRAIN_PRECISION}
E2
source /root/env.sh
nvidia-cuda-mps-control -d && echo "CUDA MPS started" || echo "CUDA MPS did not start (the workers share the GPU without it)"
echo "$SUITE $SCALE" > /root/suite.txt
[ -d /root/store ] && echo "store from earlier parts: $(ls /root/store/results/suite 2>/dev/null)"
date -u +%s > /root/start.epoch
cd /root/talos
setsid nohup python3 -m talos_core.cli suite "$SUITE" --scale "$SCALE" --device "$DEVICE" --executor processes \
  --jobs "$JOBS" --resume ${PART:+--part "$PART"} --store /root/store >> /root/run.log 2>&1 < /dev/null &
echo "suite $SUITE $SCALE${PART:+ part $PART} started at $(date -u) with $JOBS workers"
