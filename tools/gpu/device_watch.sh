#!/bin/bash
# Device side, every call after the start: follow the suite for up to $1 seconds (default 540); when it has ended,
# export the shippable part of the store (`talos export --referenced-only`: results and run manifests, no
# vectors) and always a snapshot of the whole store without the runs' weights (JSON and the results' arrays), split
# in 15 MB parts, to $OUT.
LIMIT=${1:-540}
T0=$(date +%s)
read -r SUITE SCALE < /root/suite.txt
while pgrep -f "talos_core.cli suite $SUITE" > /dev/null && (( $(date +%s) - T0 < LIMIT )); do
  sleep 20
  echo "[$(( $(date +%s) - $(cat /root/start.epoch) )) s] $(grep -o '\[[0-9]*/[0-9]* done[^]]*\]' /root/run.log | tail -1)"
done
ELAPSED=$(( $(date +%s) - $(cat /root/start.epoch) ))
if pgrep -f "talos_core.cli suite $SUITE" > /dev/null; then
  echo "suite still running after ${ELAPSED} s"
else
  echo "suite ended after ${ELAPSED} s"; grep -v "Loading weights" /root/run.log | tail -5
  source /root/env.sh
  rm -rf /root/ship && python3 -m talos_core.cli export --store /root/store --to /root/ship --referenced-only \
    && tar czf /root/ship.tgz -C /root ship && split -b 15M -d /root/ship.tgz "$OUT/ship.tgz.part"
fi
nvidia-smi --query-gpu=name,memory.used,utilization.gpu --format=csv,noheader
grep -v "Loading weights" /root/run.log > "$OUT/run.log"
# the runs' weights stay (too large to return); the results' arrays (previews, galleries: small) come back with the JSON
tar czf /root/snap.tgz --exclude='store/runs/*.safetensors' --exclude=checkpoints -C /root store
split -b 15M -d /root/snap.tgz "$OUT/store_json.tgz.part"
ls -la "$OUT"
