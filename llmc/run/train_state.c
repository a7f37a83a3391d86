// train_state.c: a run's state for checkpoints, and the checks a resume makes against it.
#include "train_state.h"

#include <stddef.h>
#include <string.h>

#include "../utils.h"

_Static_assert(offsetof(TrainState, last_t) == TRAIN_STATE_V1_BYTES, "TrainState's format-1 fields moved");
_Static_assert(sizeof(TrainState) == 88 + sizeof(DataIdentity) + sizeof(StepSkipState), "TrainState has padding");
_Static_assert(sizeof(DataIdentity) == 24 && sizeof(StepSkipState) == 2 * sizeof(OutlierWindow) + 8 &&
               sizeof(OutlierWindow) == (OUTLIER_WINDOW + 2) * sizeof(double) + 8, "padding in the saved state");

TrainState train_state_new(const GPT2Config *c, const TrainConfig *cfg, int world, const DataLoader *train) {
    TrainState st;
    memset(&st, 0, sizeof(st));   // padding too: sharded checkpoints store the struct's bytes
    st.config = *c;
    st.seed = cfg->seed;
    st.B = cfg->B;
    st.T = cfg->T;
    st.world = world;
    st.tokens_per_step = cfg->total_batch_tokens;
    st.data.shards = train->num_shards;
    st.data.shuffle = train->shuffle;
    st.data.windows = train->total_windows;
    st.data.fingerprint = dataloader_fingerprint(train);
    return st;
}

void train_state_stepped(TrainState *st, int step, int skipped) {
    if (!skipped) st->last_t = step + 1;
}

TrainState train_state_at(const TrainState *st, int step, const DataLoader *train) {
    TrainState at = *st;
    at.step = step;
    dataloader_get_state(train, &at.data_epoch, &at.data_next_window);
    step_skip_get(&at.skip);
    return at;
}

// Exits when saved (the checkpoint ckpt) cannot continue the run `now` describes, naming
// the checkpoint and the field.
static void check_compatible(const TrainState *s, const TrainState *now, int max_steps, const char *ckpt) {
    if (memcmp(&s->config, &now->config, sizeof(GPT2Config)) != 0)
        die("resume from '%s': saved model is L=%d C=%d NH=%d V=%d maxT=%d, this run has L=%d C=%d NH=%d V=%d "
            "maxT=%d", ckpt, s->config.num_layers, s->config.channels, s->config.num_heads, s->config.vocab_size,
            s->config.max_seq_len, now->config.num_layers, now->config.channels, now->config.num_heads,
            now->config.vocab_size, now->config.max_seq_len);
    if (s->T != now->T) die("resume from '%s': saved with sequence length %d, this run uses %d", ckpt, s->T, now->T);
    if (s->tokens_per_step != now->tokens_per_step)   // -d's default is B x T x ranks
        die("resume from '%s': saved with %lld tokens per step, this run uses %lld (B=%d, T=%d, %d rank%s): give -d "
            "%lld to train on with the saved batch, whatever -b and the number of ranks", ckpt,
            (long long)s->tokens_per_step, (long long)now->tokens_per_step, now->B, now->T, now->world,
            now->world == 1 ? "" : "s", (long long)s->tokens_per_step);
    if (s->seed != now->seed)
        die("resume from '%s': saved with seed %llu, this run uses %llu", ckpt, (unsigned long long)s->seed,
            (unsigned long long)now->seed);
    // The data position is an index into the window sequence of these shards: other shards
    // (a glob that matches more files now, a shard renamed or of another size) make it other
    // data. A shard rewritten in place with as many tokens keeps the fingerprint (names and
    // window counts): its contents are not read for it.
    const DataIdentity *a = &s->data, *b = &now->data;
    if (a->shards != b->shards || a->windows != b->windows || a->fingerprint != b->fingerprint)
        die("resume from '%s': the training data differs from the checkpoint's: it was saved over %d shard%s with "
            "%lld windows (fingerprint %08x), -i now matches %d shard%s with %lld windows (%08x), so its data "
            "position would name other windows. Give -i the files it was saved with, or start a new run in another "
            "-o from its model file", ckpt, a->shards, a->shards == 1 ? "" : "s", (long long)a->windows,
            a->fingerprint, b->shards, b->shards == 1 ? "" : "s", (long long)b->windows, b->fingerprint);
    if (a->shuffle != b->shuffle)
        die("resume from '%s': saved %s --shuffle, this run is %s it: the data order would change", ckpt,
            a->shuffle ? "with" : "without", b->shuffle ? "with" : "without");
    if (s->step > max_steps)   // the loop would not run: no step, no validation, main.log cut at the checkpoint
        die("resume from '%s': the checkpoint is at step %d, past the %d steps this run trains (-x): give -x %d or "
            "more to train on from it", ckpt, s->step, max_steps, s->step);
    if (s->last_t < 0 || s->last_t > s->step || s->skip.nan_in_a_row > s->step)
        die("resume from '%s': the checkpoint at step %d cannot come from a run: its last update was step %d, and "
            "%d non-finite steps came in a row before it", ckpt, s->step, s->last_t, s->skip.nan_in_a_row);
}

int train_state_resume(TrainState *run, const TrainState *saved, int max_steps, DataLoader *train, const char *ckpt) {
    check_compatible(saved, run, max_steps, ckpt);
    char why[256];
    if (step_skip_set(&saved->skip, why, sizeof(why)) != 0)
        die("resume from '%s': the checkpoint at step %d cannot be continued: %s", ckpt, saved->step, why);
    dataloader_set_state(train, saved->data_epoch, saved->data_next_window);
    run->step = saved->step;
    run->last_t = saved->last_t;
    return saved->step;
}
