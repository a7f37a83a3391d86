// state.c: the helpers every module of the orchestration shares (state.h): failing with
// the rank named, allocating at init, ordering the streams against the main stream,
// counting traffic by flow, labels for messages, and the run's identity. It calls only the
// backend (through the table), the world and the checkpoint format's byte helpers.
#include "state.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "io/zckpt.h"
#include "io/zfile.h"

_Static_assert(sizeof(((Zero *)0)->acct.run_id) == ZCK_RUN_ID_BYTES, "Zero's run id must hold a checkpoint's");

// "zero: rank R: " and the message as one write: lines of several ranks do not interleave.
static void say_v(int rank, const char *fmt, va_list ap) {
    char msg[1400];
    int len = snprintf(msg, sizeof msg, "zero: rank %d: ", rank);
    vsnprintf(msg + len, sizeof msg - (size_t)len, fmt, ap);
    fprintf(stderr, "%s\n", msg);
}

void zero_say(const Zero *z, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    say_v(z->rank, fmt, ap);
    va_end(ap);
}

void zero_fail(const Zero *z, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    say_v(z->rank, fmt, ap);
    va_end(ap);
    zero_comm_abort(z->comm, 1);
}

void zero_say_rank(int rank, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    say_v(rank, fmt, ap);
    va_end(ap);
}

int zero_refuse(int rank, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    say_v(rank, fmt, ap);
    va_end(ap);
    return -1;
}

void zero_stream_waits_main(Zero *z, ZeroStream *s) {
    z->b->event_record(z->b, z->main_mark, z->main);
    z->b->stream_wait(z->b, s, z->main_mark);
}

void zero_main_waits_stream(Zero *z, ZeroStream *s) {
    ZeroEvent *e = s == z->gather.stream ? z->gather.mark : z->reduce.mark;
    z->b->event_record(z->b, e, s);
    z->b->stream_wait(z->b, z->main, e);
}

void zero_sync_streams(Zero *z) {
    z->b->stream_sync(z->b, z->gather.stream);
    z->b->stream_sync(z->b, z->reduce.stream);
    z->b->stream_sync(z->b, z->main);
}

const char *zero_flow_name(ZeroFlow f) {
    static const char *names[ZERO_FLOWS] = {"forward_param_gather", "backward_param_gather", "step_param_gather",
                                            "grad_flat", "grad_intra_node_hop", "grad_inter_node_hop"};
    return f >= 0 && f < ZERO_FLOWS ? names[f] : "?";
}

void zero_flow_add(Zero *z, ZeroFlow f, ZeroGroup g, uint64_t bytes_per_peer) {
    if (!z->step.open) return;   // as the per-step counters: the trainer's evaluation is not a step's
    uint64_t intra, inter;
    zero_group_peers(z->comm, g, &intra, &inter);
    z->acct.flow_intra[f] += intra * bytes_per_peer;
    z->acct.flow_inter[f] += inter * bytes_per_peer;
}

const char *zero_label(Zero *z, const char *prefix, const int *tensors, int n) {
    size_t cap = sizeof z->acct.label, len = (size_t)snprintf(z->acct.label, cap, "%s", prefix);
    for (int i = 0; i < n && len < cap; i++)
        len += (size_t)snprintf(z->acct.label + len, cap - len, "%s%s", i ? ", " : " ", z->t[tensors[i]].name);
    if (len >= cap) memcpy(z->acct.label + cap - 4, "...", 4);
    return z->acct.label;
}

// Every buffer comes from here, during zero_init only.
void *zero_alloc(Zero *z, ZeroMemKind kind, ZeroUse use, size_t bytes, const char *what) {
    if (z->acct.init_done)
        zero_fail(z, "allocation of %zu bytes for %s after zero_init (all buffers are fixed at init)", bytes, what);
    if (z->acct.nallocs == (int)(sizeof z->acct.allocs / sizeof z->acct.allocs[0]))
        zero_fail(z, "too many buffers (allocating %s)", what);
    void *p = z->b->alloc(z->b, kind, bytes);
    if (!p) zero_fail(z, "out of %s memory allocating %zu bytes for %s", kind == ZERO_MEM_HOST ? "host" : "device", bytes, what);
    // Host memory is written by the CPU directly (offload's states, its initial master): its
    // zeros come from the CPU too, at once (a device memset of registered host memory would
    // need its device address, and cross the bus).
    if (kind != ZERO_MEM_HOST) z->b->memset0(z->b, p, bytes, z->main);
    else if (!z->b->counts_only) memset(p, 0, bytes);   // a dry run's are address space only
    z->acct.allocs[z->acct.nallocs].p = p;
    z->acct.allocs[z->acct.nallocs].kind = kind;
    z->acct.nallocs++;
    if (kind == ZERO_MEM_HOST) z->acct.mem_host[use] += bytes; else z->acct.mem_dev[use] += bytes;
    return p;
}

void zero_alloc_close(Zero *z) { z->acct.init_done = 1; }

void zero_free_buffers(Zero *z) {
    for (int i = 0; i < z->acct.nallocs; i++) z->b->free(z->b, z->acct.allocs[i].kind, z->acct.allocs[i].p);
    z->acct.nallocs = 0;
}

void *zero_host_alloc(Zero *z, size_t bytes, const char *what) {
    void *p = calloc(1, bytes ? bytes : 1);
    if (!p) zero_fail(z, "out of host memory (%zu bytes) for %s", bytes, what);
    return p;
}

ZeroEvent *zero_new_event(Zero *z, const char *what) {
    ZeroEvent *e = z->b->event_create(z->b);
    if (!e) zero_fail(z, "the %s backend could not create an event for %s", z->b->name, what);
    return e;
}

// The run identity: 128 random bits drawn by rank 0 at init, kept across resumes.

// n random bytes from the kernel; a clock-and-pid mix (with a warning) if it has none.
static void draw_random(const Zero *z, uint8_t *out, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = getrandom(out + got, n - got, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    if (got == n) return;
    int fd = open("/dev/urandom", O_RDONLY);
    if (fd >= 0) {
        int ok = zfile_pread(fd, out, n, 0) == 0;
        close(fd);
        if (ok) return;
    }
    zero_say(z, "warning: no kernel randomness (getrandom, /dev/urandom): the run id is derived from the clock and pid");
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t key = ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^ ((uint64_t)getpid() << 32);
    for (size_t i = 0; i < n; i++) out[i] = (uint8_t)rng_u32(key, 0, i);
}

double zero_clock(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void zero_run_id_set(Zero *z, const uint8_t id[ZCK_RUN_ID_BYTES]) {
    memcpy(z->acct.run_id, id, ZCK_RUN_ID_BYTES);
    zck_run_id_hex(z->acct.run_id, z->acct.run_id_hex);
}

void zero_run_id_init(Zero *z) {
    // Rank 0's 128 bits reach every rank through the f64 all-reduce (the others add zeros;
    // 32-bit pieces are exact in a double), so no extra backend call is needed.
    uint8_t id[ZCK_RUN_ID_BYTES];
    double parts[ZCK_RUN_ID_BYTES / 4] = {0};
    if (z->rank == 0) {
        draw_random(z, id, sizeof id);
        for (int k = 0; k < ZCK_RUN_ID_BYTES / 4; k++) parts[k] = (double)zle_get32(id + 4 * k);
    }
    z->b->allreduce_sum_f64(z->b, z->comm, parts, ZCK_RUN_ID_BYTES / 4, "the run id");
    for (int k = 0; k < ZCK_RUN_ID_BYTES / 4; k++) zle_put32(id + 4 * k, (uint32_t)parts[k]);
    zero_run_id_set(z, id);
}

const char *zero_run_id(const Zero *z) { return z->acct.run_id_hex; }

