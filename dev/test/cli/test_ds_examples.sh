#!/usr/bin/env bash
# DeepSpeed configs as users bring them, written in the style of DeepSpeed's and Hugging
# Face's published examples (each ZeRO stage, offload to cpu and nvme, ZeRO-Infinity with
# an aio section, the deprecated cpu_offload switches, "auto" values, fp16/bf16 sections,
# DeepSpeed's sizes for billions of parameters): the CPU trainer on 2 ranks (mpirun) with a
# tiny model for 2 steps. Each trains as the file asks, seen in what the run reports (the
# config table, zero_report.json's memory tiers, the NVMe engine's start-up line), or is
# refused naming the key.
set -u
cd "$(dirname "$0")/../../.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_ds_examples: $*"; exit 1; }
common=(-e d2c64h2t64 -t 32 -x 2 -v 0 -s 0 --threads 1)
mkdir -p "$tmp/nvme"

# train NAME: mpirun -np 2 with $tmp/NAME.json; must train its 2 steps
train() {
    mpirun -np 2 ./train_gpt2 "${common[@]}" --deepspeed "$tmp/$1.json" -o "$tmp/$1" > "$tmp/$1.txt" 2>&1 \
        || { tail -n 20 "$tmp/$1.txt"; fail "$1: the run failed"; }
    grep -q '^s:1 trl:' "$tmp/$1/main.log" || fail "$1: did not train 2 steps"
}
# has NAME PATTERN: the run's output says it
has() { grep -q -- "$2" "$tmp/$1.txt" || { cat "$tmp/$1.txt"; fail "$1: the output lacks '$2'"; }; }
# tier NAME JQ: zero_report.json of rank 0 satisfies it
# ($master: fp32 working parameters in the optimizer's tier are stored as the master, once)
tier() { jq -e ".params_stored_as_master as \$master | .ranks[0] | $2" "$tmp/$1/zero_report.json" > /dev/null \
             || fail "$1: rank 0's report fails $2: $(jq -c '.ranks[0] | {device, host, nvme}' "$tmp/$1/zero_report.json")"; }
# refused NAME PATTERN: the file is refused, naming what is wrong, before anything trains
refused() {
    if mpirun -np 2 ./train_gpt2 "${common[@]}" --deepspeed "$tmp/$1.json" -o "$tmp/$1" > "$tmp/$1.txt" 2>&1; then
        fail "$1: accepted"; fi
    has "$1" "$2"
    [ ! -e "$tmp/$1/main.log" ] || fail "$1: trained before refusing"
}
pools_fit() { jq -e '.psi_padded as $p | all(.ranks[].pools; .param_pool_elems <= $p and .grad_pool_elems <= $p)' \
                  "$tmp/$1/zero_report.json" > /dev/null || fail "$1: pools beyond the model"; }

# ZeRO-1 as DeepSpeed's examples write it: fp16 with dynamic loss scaling, Adam, 5e8 bucket
cat > "$tmp/zero1.json" <<'EOF'
{
  "train_batch_size": 8,
  "train_micro_batch_size_per_gpu": 2,
  "steps_per_print": 10,
  "optimizer": {"type": "Adam", "params": {"lr": 0.0003, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.01}},
  "gradient_clipping": 1.0,
  "fp16": {"enabled": true, "loss_scale": 0, "loss_scale_window": 1000, "hysteresis": 2, "min_loss_scale": 1},
  "zero_optimization": {"stage": 1, "reduce_bucket_size": 5e8},
  "wall_clock_breakdown": false
}
EOF
train zero1
has zero1 "ZeRO stage *| 1 "
has zero1 "grad accumulation *| 2 "
has zero1 "fp16.enabled true: no fp16 runs here"
tier zero1 ".device.optimizer_states > 0 and .host.optimizer_states == 0"
echo "zero1: stage 1, accumulation 2 from train_batch_size, fp16 said not to run"

# ZeRO-2 with the optimizer on the CPU: Hugging Face's template, "auto" everywhere
cat > "$tmp/zero2_offload.json" <<'EOF'
{
  "fp16": {"enabled": "auto", "loss_scale": 0, "loss_scale_window": 1000, "initial_scale_power": 16,
           "hysteresis": 2, "min_loss_scale": 1},
  "bf16": {"enabled": "auto"},
  "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"}},
  "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": "auto", "warmup_max_lr": "auto",
                "warmup_num_steps": "auto"}},
  "zero_optimization": {
    "stage": 2,
    "offload_optimizer": {"device": "cpu", "pin_memory": true},
    "allgather_partitions": true, "allgather_bucket_size": 2e8, "overlap_comm": true, "reduce_scatter": true,
    "reduce_bucket_size": 2e8, "contiguous_gradients": true
  },
  "gradient_accumulation_steps": "auto",
  "gradient_clipping": "auto",
  "steps_per_print": 2000,
  "train_batch_size": "auto",
  "train_micro_batch_size_per_gpu": "auto",
  "wall_clock_breakdown": false
}
EOF
train zero2_offload
has zero2_offload "ZeRO stage *| 2 "
has zero2_offload "offload optimizer *| cpu "
tier zero2_offload ".device.optimizer_states == 0 and .host.optimizer_states > 0"
echo "zero2_offload: stage 2, optimizer states in host memory"

# ZeRO-3 with optimizer and parameters on the CPU, DeepSpeed's 1e9 sizes
cat > "$tmp/zero3_offload.json" <<'EOF'
{
  "bf16": {"enabled": true},
  "zero_optimization": {
    "stage": 3,
    "offload_optimizer": {"device": "cpu", "pin_memory": true},
    "offload_param": {"device": "cpu", "pin_memory": true},
    "overlap_comm": true, "contiguous_gradients": true, "sub_group_size": 1e9,
    "reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto",
    "stage3_param_persistence_threshold": "auto", "stage3_max_live_parameters": 1e9,
    "stage3_max_reuse_distance": 1e9, "stage3_gather_16bit_weights_on_model_save": true
  },
  "gradient_accumulation_steps": 2,
  "train_micro_batch_size_per_gpu": 1
}
EOF
train zero3_offload
has zero3_offload "offload parameters *| cpu "
has zero3_offload "bf16.enabled true: the GPU trainer (train_gpt2_zero) trains in bf16"
tier zero3_offload "(.host.parameters > 0 or \$master) and .host.optimizer_states > 0 and .device.optimizer_states == 0"
pools_fit zero3_offload
echo "zero3_offload: stage 3, parameters and optimizer states in host memory, pools within the model"

# ZeRO-3 with DeepSpeed's defaults written out: caps, not reservations
cat > "$tmp/zero3_defaults.json" <<'EOF'
{
  "train_micro_batch_size_per_gpu": 2,
  "gradient_accumulation_steps": 1,
  "zero_optimization": {"stage": 3, "reduce_bucket_size": 5e8, "stage3_prefetch_bucket_size": 5e7,
                        "stage3_param_persistence_threshold": 1e5, "stage3_max_live_parameters": 1e9,
                        "stage3_max_reuse_distance": 1e9}
}
EOF
train zero3_defaults
pools_fit zero3_defaults
peak=$(sed -n 's/^host memory after loading the model: peak \([0-9.]*\) MiB$/\1/p' "$tmp/zero3_defaults.txt")
awk -v p="$peak" 'BEGIN { exit !(p > 0 && p < 300) }' || fail "zero3_defaults: rank 0 peaked at '$peak' MiB after loading"
echo "zero3_defaults: pools within the model, rank 0 at $peak MiB after loading"

# ZeRO-Infinity: both on NVMe, with DeepSpeed's aio section
cat > "$tmp/infinity.json" <<EOF
{
  "train_micro_batch_size_per_gpu": 2,
  "zero_optimization": {
    "stage": 3,
    "offload_optimizer": {"device": "nvme", "nvme_path": "$tmp/nvme", "pin_memory": true, "buffer_count": 4,
                          "fast_init": false},
    "offload_param": {"device": "nvme", "nvme_path": "$tmp/nvme", "pin_memory": true, "buffer_count": 5,
                      "buffer_size": 1e8, "max_in_cpu": 1e9},
    "overlap_comm": true, "contiguous_gradients": true, "sub_group_size": 1e9, "reduce_bucket_size": 1e7,
    "stage3_prefetch_bucket_size": 1e7, "stage3_param_persistence_threshold": 1e5,
    "stage3_max_live_parameters": 1e9, "stage3_max_reuse_distance": 1e9
  },
  "aio": {"block_size": 262144, "queue_depth": 32, "thread_count": 1, "single_submit": false, "overlap_events": true}
}
EOF
train infinity
has infinity "zero: NVMe swap files, one per rank; rank 0's: $tmp/nvme/"
has infinity "queue depth 32; blocks of at most 262144 bytes"
tier infinity "(.nvme.parameters > 0 or \$master) and .nvme.optimizer_states > 0 and .device.optimizer_states == 0"
pools_fit infinity
echo "infinity: parameters and optimizer states on NVMe, the engine at aio's queue depth and block size"

# the deprecated switches, as older published configs have them
cat > "$tmp/legacy_z2.json" <<'EOF'
{"train_micro_batch_size_per_gpu": 2, "fp16": {"enabled": true},
 "zero_optimization": {"stage": 2, "cpu_offload": true, "contiguous_gradients": true, "overlap_comm": true}}
EOF
train legacy_z2
has legacy_z2 "zero_optimization.cpu_offload true is DeepSpeed's deprecated zero_optimization.offload_optimizer.device \"cpu\""
has legacy_z2 "offload optimizer *| cpu "
tier legacy_z2 ".device.optimizer_states == 0 and .host.optimizer_states > 0"
cat > "$tmp/legacy_z3.json" <<'EOF'
{"train_micro_batch_size_per_gpu": 2,
 "zero_optimization": {"stage": 3, "cpu_offload": true, "cpu_offload_params": true, "cpu_offload_use_pin_memory": true,
                       "stage3_max_live_parameters": 1e9, "stage3_max_reuse_distance": 1e9}}
EOF
train legacy_z3
has legacy_z3 "zero_optimization.cpu_offload_params true is DeepSpeed's deprecated zero_optimization.offload_param.device"
tier legacy_z3 "(.host.parameters > 0 or \$master) and .host.optimizer_states > 0 and .device.optimizer_states == 0"
grep -q "ignoring" "$tmp/legacy_z3.txt" && grep "ignoring" "$tmp/legacy_z3.txt" | grep -q cpu_offload \
    && fail "legacy_z3: a deprecated switch landed among the ignored keys"
echo "legacy: cpu_offload, cpu_offload_params offload as DeepSpeed maps them"

# stage 0 with bf16
cat > "$tmp/zero0.json" <<'EOF'
{"train_micro_batch_size_per_gpu": "auto", "bf16": {"enabled": true}, "zero_optimization": {"stage": 0}}
EOF
train zero0
has zero0 "ZeRO stage *| 0 "
has zero0 "bf16.enabled true"

# refused by name
echo '{"zero_optimization": {"stage": 2, "cpu_offload": true, "offload_optimizer": {"device": "cpu"}}}' > "$tmp/both.json"
refused both "zero_optimization.cpu_offload is DeepSpeed's deprecated form of zero_optimization.offload_optimizer, and both are given"
echo '{"zero_optimization": {"stage": 0, "cpu_offload": true}}' > "$tmp/z0_offload.json"
refused z0_offload "offload-optimizer cpu needs -z 1, 2 or 3"
echo '{"zero_optimization": {"stage": 2, "cpu_offload_param": true}}' > "$tmp/z2_param.json"
refused z2_param "offload-param cpu needs -z 3"
echo '{"zero_optimization": {"stage": 1}, "optimizer": {"type": "OneBitAdam", "params": {"lr": 1e-4}}}' > "$tmp/onebit.json"
refused onebit "optimizer.type \"OneBitAdam\" is not supported"
echo '{"zero_optimization": {"stage": 3, "offload_param": {"device": "nvme", "nvme_path": "/tmp"}}, "aio": {"block_size": 1000000}}' > "$tmp/aio_block.json"
refused aio_block "aio.block_size must be an integer in \[4096, 1.07374e+09\], a multiple of 4096, got 1000000"
echo '{"zero_optimization": {"stage": 1}, "gradient_accumulation_steps": 1073741824}' > "$tmp/accum.json"
refused accum "gradient_accumulation_steps must be an integer in \[1, 65536\], got 1073741824"
echo '{"zero_optimization": {"stage": 1}, "train_batch_size": 4294967296}' > "$tmp/total.json"
refused total "train_batch_size 4294967296 (x T=32 = 137438953472 tokens) in '$tmp/total.json' is 536870912 micro-batches of B\*T\*ranks = 4\*32\*2"
echo '{"zero_optimization": {"stage": 3, "stage3_max_live_parameters": 1e999}}' > "$tmp/inf_num.json"
refused inf_num "zero_optimization.stage3_max_live_parameters is a number that overflows a double"
echo "refused by name: a deprecated switch beside its replacement, offload below its stage, OneBitAdam, aio block size, accumulation, batch, 1e999"
echo "PASS test_ds_examples"
