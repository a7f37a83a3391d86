#!/usr/bin/env bash
# A machine without MPI (many GPU images) builds everything against zero/comm/mpi_stub
# (the Makefile picks it when there is no mpicc). That path once failed to compile
# (comm_mpi.c called MPI_Allreduce, which the stub lacked) and no CPU test saw it, since
# this machine has Open MPI. Here: zero/, llmc/ and the CPU trainer build against the stub
# warning-free in a scratch folder; the trainer trains 2 steps at stage 1 on one rank, and a
# launch that names 2 ranks is refused with the reason (the CPU trainer's ranks need MPI).
set -u
cd "$(dirname "$0")/../../.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_mpi_stub_build: $*"; exit 1; }
b=$tmp/build
CFLAGS="-O1 -Werror" make -s -j2 BUILD="$b" MPICC=/nonexistent "$b/libzero.a" "$b/libllmc.a" "$b/gpt2_zero.o" \
    "$b/gpt2_zero_cpu.o" > "$tmp/make.txt" 2>&1 || { tail -n 30 "$tmp/make.txt"; fail "zero/ or llmc/ does not build against the MPI stub"; }
grep -q "building against zero/comm/mpi_stub" "$tmp/make.txt" || fail "the Makefile did not pick the MPI stub without mpicc"
libs=(-lm -lz -lpcre2-8 -lcjson -lcrypto)
printf '#include <liburing.h>\n' | cc -E -x c - > /dev/null 2>&1 && libs+=(-luring)
cc -O1 -std=c11 -D_GNU_SOURCE -fopenmp -ffp-contract=off -Wall -Wextra -Werror -I. -Izero/comm/mpi_stub train_gpt2.c \
    "$b/gpt2_zero_cpu.o" "$b/gpt2_zero.o" "$b/libzero.a" "$b/libllmc.a" "${libs[@]}" -o "$tmp/train_gpt2" \
    2> "$tmp/cc.txt" || { cat "$tmp/cc.txt"; fail "train_gpt2 does not link against the MPI stub"; }
echo "zero/, llmc/ and train_gpt2 build against the MPI stub (-Werror)"
small=(-e d2c64h2t64 -b 2 -t 32 -x 2 -v 0 -s 0 --threads 1)
"$tmp/train_gpt2" "${small[@]}" -z 1 -o "$tmp/z1" > "$tmp/z1.txt" 2>&1 || { tail "$tmp/z1.txt"; fail "stage 1 on one rank without MPI"; }
[ "$(grep -c trl "$tmp/z1/main.log")" -eq 2 ] || fail "stage 1 without MPI: not 2 logged steps"
./train_gpt2 "${small[@]}" -z 1 -o "$tmp/z1mpi" > /dev/null 2>&1 || fail "the MPI build's reference run"
cmp -s "$tmp/z1/model_final.bin" "$tmp/z1mpi/model_final.bin" || fail "the stub build's model differs from the MPI build's"
echo "stage 1 on one rank: the MPI build's model file byte for byte"
# a batch script's shell (sbatch, salloc -n 4) has SLURM_NTASKS: no MPI launch for all that
SLURM_NTASKS=4 "$tmp/train_gpt2" "${small[@]}" -z 1 -o "$tmp/z1slurm" > "$tmp/slurm.txt" 2>&1 \
    || { tail "$tmp/slurm.txt"; fail "SLURM_NTASKS=4 alone was taken for an MPI launch"; }
echo "SLURM_NTASKS=4 alone (a batch script's shell): one rank, no MPI start"
if RANK=0 WORLD_SIZE=2 "$tmp/train_gpt2" "${small[@]}" -z 1 -o "$tmp/z1w2" > "$tmp/w2.txt" 2>&1; then
    fail "WORLD_SIZE=2 without MPI accepted"; fi
grep -qi "mpi" "$tmp/w2.txt" || { cat "$tmp/w2.txt"; fail "WORLD_SIZE=2 without MPI: the message does not say MPI is missing"; }
echo "WORLD_SIZE=2 refused: $(grep -i -m1 mpi "$tmp/w2.txt")"
echo "PASS test_mpi_stub_build"
