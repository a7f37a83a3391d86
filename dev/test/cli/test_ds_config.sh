#!/usr/bin/env bash
# --deepspeed ds_config.json runs the same job as the flags it stands for:
#  - mpirun -np 2 ./train_gpt2 at stage 2, once from flags and once from a DeepSpeed
#    config (micro batch, accumulation, train_batch_size, clipping, AdamW lr/betas/eps/
#    weight decay, bucket; unknown keys and "off" offload keys beside them): bit-identical
#    losses and final model. Without the AdamW flags the run differs, so they take effect.
#  - the stage-3 knobs (prefetch, max live, persistence, bucket) land in the plugin's
#    configuration as the flags put them there (dry run's zero_report.json), in train_gpt2
#    and in train_gpt2_zero (built when nvcc exists; its dry run needs no GPU)
#  - the shipped example config is valid; -h documents --deepspeed; a contradiction between
#    a flag and the file and an NVMe offload without a folder are refused, naming them
set -u
cd "$(dirname "$0")/../../.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL test_ds_config: $*"; exit 1; }
losses() { grep -E '^s:[0-9]+ (trl|tel):' "$1/main.log"; }
common=(-e d2c64h2t64 -t 32 -x 4 -v 2 -m 2 -s 0 --threads 1)
adamw=(-l 0.003 --beta1 0.85 --beta2 0.99 --adam-eps 1e-7 -c 0.1)

cat > "$tmp/ds.json" <<'EOF'
{
  "train_micro_batch_size_per_gpu": 2,
  "gradient_accumulation_steps": 2,
  "train_batch_size": 8,
  "gradient_clipping": 0.5,
  "optimizer": {"type": "AdamW", "params": {"lr": 0.003, "betas": [0.85, 0.99], "eps": 1e-7, "weight_decay": 0.1}},
  "zero_optimization": {
    "stage": 2,
    "reduce_bucket_size": 5000,
    "overlap_comm": true,
    "offload_optimizer": {"device": "none", "pin_memory": true},
    "zero_quantized_gradients": false
  },
  "fp16": {"enabled": false},
  "steps_per_print": 10
}
EOF
# 2 ranks x micro 2 x accumulation 2 = 8 sequences of 32 tokens = -d 256
mpirun -np 2 ./train_gpt2 "${common[@]}" -z 2 -b 2 -d 256 --grad-clip 0.5 --zero-bucket 5000 "${adamw[@]}" \
    -o "$tmp/flags" > "$tmp/flags.txt" 2>&1 || { tail "$tmp/flags.txt"; fail "the run from flags failed"; }
mpirun -np 2 ./train_gpt2 "${common[@]}" --deepspeed "$tmp/ds.json" -o "$tmp/file" > "$tmp/file.txt" 2>&1 \
    || { tail "$tmp/file.txt"; fail "the run from ds.json failed"; }
[ "$(losses "$tmp/flags" | wc -l)" -eq 7 ] || { cat "$tmp/flags/main.log"; fail "expected 4 train and 3 val losses"; }
diff <(losses "$tmp/flags") <(losses "$tmp/file") || fail "losses from ds.json differ from the flags'"
cmp "$tmp/flags/model_final.bin" "$tmp/file/model_final.bin" || fail "the final model from ds.json differs"
# fp16 (off here) is no unknown key: it gets a message of its own when on (test_ds_config.c)
grep -q "ignoring 2 keys this trainer does not know: zero_optimization.overlap_comm, steps_per_print" \
    "$tmp/file.txt" || { cat "$tmp/file.txt"; fail "no warning naming the unknown keys"; }
grep -q "grad accumulation *| 2 " "$tmp/file.txt" || fail "the file's accumulation is not in the config table"
echo "stage 2, 2 ranks: ds.json and flags give bit-identical losses and model ($(losses "$tmp/file" | tail -n 1))"
mpirun -np 2 ./train_gpt2 "${common[@]}" -z 2 -b 2 -d 256 --grad-clip 0.5 --zero-bucket 5000 -l 0.003 -c 0.1 \
    -o "$tmp/default_adamw" > "$tmp/d.txt" 2>&1 || { tail "$tmp/d.txt"; fail "the run with AdamW's defaults failed"; }
if diff <(losses "$tmp/flags") <(losses "$tmp/default_adamw") > /dev/null; then
    fail "--beta1/--beta2/--adam-eps changed nothing"; fi

# stage-3 knobs: the plugin's configuration from the file equals the flags' (dry run, 4 ranks)
cat > "$tmp/z3.json" <<'EOF'
{"zero_optimization": {"stage": 3, "reduce_bucket_size": 7000, "stage3_prefetch_bucket_size": 30000,
  "stage3_max_live_parameters": 4e6, "stage3_param_persistence_threshold": 1000,
  "zero_quantized_weights": true, "zero_hpz_partition_size": 2, "zero_quantized_gradients": true}}
EOF
./train_gpt2 -e d2c64h2t64 -t 32 -b 2 --dry-run --world 4 -z 3 --zero-bucket 7000 --zero-prefetch 30000 \
    --zero-max-live 4000000 --zero-persist 1000 --qwz --hpz 2 --qgz -o "$tmp/dry_flags" > "$tmp/dry.txt" 2>&1 \
    || { cat "$tmp/dry.txt"; fail "dry run from flags failed"; }
./train_gpt2 -e d2c64h2t64 -t 32 -b 2 --dry-run --world 4 --deepspeed "$tmp/z3.json" -o "$tmp/dry_file" \
    > "$tmp/dry.txt" 2>&1 || { cat "$tmp/dry.txt"; fail "dry run from z3.json failed"; }
knobs() { jq -c '[.stage, .config]' "$1/zero_report.json"; }
[ "$(knobs "$tmp/dry_file")" = '[3,{"bucket_elems":7000,"prefetch_elems":30000,"max_live_elems":4000000,"persist_elems":1000,"zero_pp":{"qwz":true,"hpz_partition_size":2,"qgz":true,"two_hop_gradients":true,"qwz_block":2048,"qgz_block":64}}]' ] \
    || fail "z3.json's knobs did not reach the plugin: $(knobs "$tmp/dry_file")"
[ "$(knobs "$tmp/dry_file")" = "$(knobs "$tmp/dry_flags")" ] || fail "z3.json and the flags configure the plugin differently"
jq -e '.ranks == input.ranks' "$tmp/dry_file/zero_report.json" "$tmp/dry_flags/zero_report.json" > /dev/null \
    || fail "z3.json and the flags predict different per-rank figures"
echo "stage 3 knobs from z3.json: $(knobs "$tmp/dry_file")"
# the CUDA ZeRO trainer reads the same file into the same knobs (its dry run needs no GPU)
if [ -x "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)" ]; then
    make -s -j2 train_gpt2_zero > "$tmp/make.txt" 2>&1 || { tail "$tmp/make.txt"; fail "cannot build train_gpt2_zero"; }
    ./train_gpt2_zero -e d2c64h2t64 -t 32 -b 2 --dry-run --world 4 --deepspeed "$tmp/z3.json" -o "$tmp/dry_cu" \
        > "$tmp/dry.txt" 2>&1 || { cat "$tmp/dry.txt"; fail "train_gpt2_zero's dry run from z3.json failed"; }
    [ "$(knobs "$tmp/dry_cu")" = "$(knobs "$tmp/dry_flags")" ] \
        || fail "train_gpt2_zero configures the plugin differently from z3.json: $(knobs "$tmp/dry_cu")"
    echo "train_gpt2_zero: the same knobs from z3.json"
else
    echo "note: no nvcc: train_gpt2_zero's reading of the file not checked"
fi

# DeepSpeed's sizes written for billions of parameters (its defaults: 1e9 live, 5e8 bucket)
# cost a 3.3M-parameter model no more than the model: every pool is min(setting, need).
# Before, stage3_max_live_parameters 1e9 made this model peak at 3.9 GB.
cat > "$tmp/big.json" <<'EOF'
{"zero_optimization": {"stage": 3, "reduce_bucket_size": 5e8, "stage3_prefetch_bucket_size": 1e9,
  "stage3_max_live_parameters": 1e9, "stage3_param_persistence_threshold": 1e4}}
EOF
pools_fit() {   # pools_fit REPORT: every rank's pools within the padded model
    jq -e '.psi_padded as $p | all(.ranks[].pools; .param_pool_elems <= $p and .grad_pool_elems <= $p)' "$1" > /dev/null
}
./train_gpt2 -e d2c64h2t64 -t 32 -b 2 --dry-run --world 2 --deepspeed "$tmp/big.json" -o "$tmp/dry_big" \
    > "$tmp/dry.txt" 2>&1 || { cat "$tmp/dry.txt"; fail "dry run from big.json failed"; }
pools_fit "$tmp/dry_big/zero_report.json" || fail "pools beyond the model: $(jq -c '[.psi_padded, .ranks[0].pools]' "$tmp/dry_big/zero_report.json")"
./train_gpt2 -e d2c64h2t64 -t 32 -b 2 -x 2 -v 0 -s 0 --threads 1 --deepspeed "$tmp/big.json" -o "$tmp/live_big" \
    > "$tmp/live.txt" 2>&1 || { cat "$tmp/live.txt"; fail "training from big.json failed"; }
peak=$(sed -n 's/^host memory after loading the model: peak \([0-9.]*\) MiB$/\1/p' "$tmp/live.txt")
[ -n "$peak" ] && awk -v p="$peak" 'BEGIN { exit !(p < 300) }' || { cat "$tmp/live.txt"; fail "big.json: peak $peak MiB after loading a 3.3M-parameter model"; }
if [ -x ./train_gpt2_zero ]; then   # built above when nvcc exists: the same sizing in the CUDA trainer
    ./train_gpt2_zero -e d2c64h2t64 -t 32 -b 2 --dry-run --world 2 --deepspeed "$tmp/big.json" -o "$tmp/dry_big_cu" \
        > "$tmp/dry.txt" 2>&1 || { cat "$tmp/dry.txt"; fail "train_gpt2_zero's dry run from big.json failed"; }
    pools_fit "$tmp/dry_big_cu/zero_report.json" || fail "train_gpt2_zero: pools beyond the model"
fi
echo "stage3_max_live_parameters 1e9 and friends: pools within the model ($(jq -c '.ranks[0].pools | [.param_pool_elems, .grad_pool_elems]' "$tmp/dry_big/zero_report.json") elements), live peak $peak MiB"

# the shipped example, -h, and refusals
./train_gpt2 -e d2c64h2t64 -t 32 --dry-run --world 8 --deepspeed dev/ds_config_example.json -o "$tmp/example" \
    > "$tmp/ex.txt" 2>&1 || { cat "$tmp/ex.txt"; fail "dev/ds_config_example.json is refused"; }
grep -q "warning" "$tmp/ex.txt" && { cat "$tmp/ex.txt"; fail "the example config has keys the trainer does not know"; }
./train_gpt2 -h | grep -q -- "--deepspeed FILE" || fail "-h does not document --deepspeed"
./train_gpt2 -h | grep -q "stage3_prefetch_bucket_size (--zero-prefetch)" || fail "-h does not list the keys"
if mpirun -np 2 ./train_gpt2 "${common[@]}" -b 4 --deepspeed "$tmp/ds.json" -o "$tmp/bad" > "$tmp/e.txt" 2>&1; then
    fail "-b 4 against train_micro_batch_size_per_gpu 2 was accepted"; fi
grep -q "error: -b 4 contradicts train_micro_batch_size_per_gpu = 2 in '$tmp/ds.json'" "$tmp/e.txt" \
    || { cat "$tmp/e.txt"; fail "no error naming -b and the key"; }
echo '{"zero_optimization": {"stage": 3, "offload_param": {"device": "nvme"}}}' > "$tmp/off.json"
if ./train_gpt2 --deepspeed "$tmp/off.json" -o "$tmp/bad" > "$tmp/e.txt" 2>&1; then fail "NVMe offload without a folder was accepted"; fi
grep -q "offload to nvme needs --nvme-path DIR" "$tmp/e.txt" || { cat "$tmp/e.txt"; fail "no error asking for --nvme-path"; }
echo "PASS test_ds_config"
