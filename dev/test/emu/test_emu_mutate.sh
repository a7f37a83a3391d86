#!/usr/bin/env bash
# The mutation list (dev/cuda_emu/mutations.txt) still applies to the sources, and three
# of its mutations, each caught by a memory check of the emulated device (dynamic shared
# memory one warp short: out of bounds; a vector written past its row: a race between
# blocks; a missing barrier: a race in shared memory), are caught by the emulated
# programs' tests (dev/cuda_emu/mutate.py in a build folder of its own, build/emu-mut-ci;
# `make mutate` runs them all and prints the score).
set -u
cd "$(dirname "$0")/../../.."
python3 dev/cuda_emu/mutate.py --check || { echo "FAIL test_emu_mutate: a mutation no longer applies"; exit 1; }
if python3 dev/cuda_emu/mutate.py --build build/emu-mut-ci --quick --expect-caught --only layernorm_bwd_smem,classifier_vp,layernorm_bwd_barrier; then
    echo "PASS test_emu_mutate"
else
    echo "FAIL test_emu_mutate: a mutation the memory checks must catch was not caught"; exit 1
fi
