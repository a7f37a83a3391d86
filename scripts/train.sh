#!/usr/bin/env bash
# The main job: trains GPT-2 on the bundled corpus (data/kjv), on the GPU when one is
# present (train_gpt2cu), else on the CPU (train_gpt2). Extra arguments go to the trainer.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    make -j2 train_gpt2cu
    exec ./train_gpt2cu "$@"
fi
echo "no GPU found: training on the CPU"
make -j2 train_gpt2
exec ./train_gpt2 "$@"
