// trace.c: the timeline (trace.h): a ring of events behind one mutex, written as a Chrome
// trace. Events are coarse (a unit, a collective, a host-stream job, a tile of I/O), so a
// lock per event costs nothing next to the work it marks.
#include "trace.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LABEL 48
#define MAX_TRACKS 64

enum { EV_SPAN = 0, EV_COUNTER = 1, EV_NONE = 2 };

typedef struct {
    uint64_t t0, t1;
    double value;
    const char *name;       // a string that lives as long as the process (callers pass literals)
    char label[LABEL];      // copied: collective labels live in scratch buffers
    int track, step;
    int kind;
} Ev;

int zero_trace_on = 0;

static struct {
    pthread_mutex_t mu;
    Ev *ring;
    uint64_t count;          // events ever recorded; the ring holds the last ZERO_TRACE_EVENTS
    int lost_step;           // the highest step of an event the ring overwrote (-1: none)
    int step, keep_steps, rank, world;
    int64_t offset_ns;
    uint64_t start_ns, start_realtime_ns;
    char boot_id[40];        // one kernel, one CLOCK_MONOTONIC: the ranks' files line up by it
    char path[4096];
    int ntracks;
    char tracks[MAX_TRACKS][LABEL];
    Ev open[MAX_TRACKS];     // each track's span in progress (kind EV_OPEN), for a file written meanwhile
} T = {.mu = PTHREAD_MUTEX_INITIALIZER, .lost_step = -1};

static __thread int my_track = -1;
static void (*flush_fn)(void);

uint64_t zero_trace_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int zero_trace_start(const char *path, int rank, int world, int keep_steps) {
    if (!path || !*path) return 0;
    int n = snprintf(T.path, sizeof T.path, "%s.rank%05d.json", path, rank);
    if (n < 0 || (size_t)n >= sizeof T.path) {
        fprintf(stderr, "zero: rank %d: --trace path too long: %s\n", rank, path);
        return -1;
    }
    // The file is written at the end (or when the watchdog ends a stuck run): rank 0 refuses
    // a path that cannot take it now, not after the run. Only rank 0: the trainers make their
    // output folder (where a trace usually goes) on rank 0, and the others may start first.
    char tmp[sizeof T.path + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", T.path);
    int made = 1, fd = rank != 0 ? -2 : open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd == -1 && errno == EEXIST) {   // an earlier run's: the write replaces it
        made = 0;
        fd = open(tmp, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
    }
    if (fd == -1) {
        fprintf(stderr, "zero: rank %d: --trace %s: cannot write %s: %s\n", rank, path, tmp, strerror(errno));
        return -1;
    }
    if (fd >= 0) close(fd);
    if (fd >= 0 && made) unlink(tmp);
    T.ring = calloc(ZERO_TRACE_EVENTS, sizeof(Ev));
    if (!T.ring) {
        fprintf(stderr, "zero: rank %d: out of host memory for the trace ring (%zu bytes)\n", rank,
                (size_t)ZERO_TRACE_EVENTS * sizeof(Ev));
        return -1;
    }
    T.rank = rank;
    T.world = world;
    T.keep_steps = keep_steps;
    T.step = -1;
    T.lost_step = -1;
    for (int t = 0; t < MAX_TRACKS; t++) T.open[t].kind = EV_NONE;
    T.start_ns = zero_trace_now();
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    T.start_realtime_ns = (uint64_t)rt.tv_sec * 1000000000ull + (uint64_t)rt.tv_nsec;
    FILE *b = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (!b || !fgets(T.boot_id, sizeof T.boot_id, b)) snprintf(T.boot_id, sizeof T.boot_id, "unknown");
    if (b) fclose(b);
    T.boot_id[strcspn(T.boot_id, "\n")] = 0;
    zero_trace_on = 1;
    return 0;
}

void zero_trace_sync(int64_t offset_ns) { T.offset_ns = offset_ns; }

void zero_trace_stop(void) {
    pthread_mutex_lock(&T.mu);
    zero_trace_on = 0;
    free(T.ring);
    T.ring = NULL;
    pthread_mutex_unlock(&T.mu);
}

static int track(void) {   // T.mu held
    if (my_track < 0) {
        if (T.ntracks < MAX_TRACKS) {
            my_track = T.ntracks++;
            snprintf(T.tracks[my_track], LABEL, "thread %d", my_track);
        } else {
            my_track = MAX_TRACKS - 1;   // more threads than tracks: they share the last
        }
    }
    return my_track;
}

// T.mu held
static void put(int track, int step, int kind, const char *name, const char *label, uint64_t t0, uint64_t t1,
                double value) {
    Ev *e = &T.ring[T.count % ZERO_TRACE_EVENTS];
    if (T.count++ >= ZERO_TRACE_EVENTS && e->step > T.lost_step) T.lost_step = e->step;
    e->kind = kind;
    e->name = name;
    snprintf(e->label, LABEL, "%s", label ? label : "");
    e->t0 = t0;
    e->t1 = t1;
    e->value = value;
    e->track = track;
    e->step = step;
}

static void add(int kind, const char *name, const char *label, uint64_t t0, uint64_t t1, double value) {
    pthread_mutex_lock(&T.mu);
    if (T.ring) put(track(), T.step, kind, name, label, t0, t1, value);
    pthread_mutex_unlock(&T.mu);
}

int zero_trace_track(const char *name) {
    if (!zero_trace_on) return -1;
    pthread_mutex_lock(&T.mu);
    int t = T.ntracks < MAX_TRACKS ? T.ntracks++ : -1;
    if (t >= 0) snprintf(T.tracks[t], LABEL, "%s", name);
    pthread_mutex_unlock(&T.mu);
    return t;
}

void zero_trace_span_on(int track, int step, const char *name, const char *label, uint64_t t0, uint64_t t1) {
    if (!zero_trace_on || track < 0) return;
    pthread_mutex_lock(&T.mu);
    if (T.ring) put(track, step, EV_SPAN, name, label, t0, t1, 0.0);
    pthread_mutex_unlock(&T.mu);
}

int zero_trace_current_step(void) {
    pthread_mutex_lock(&T.mu);
    int s = T.step;
    pthread_mutex_unlock(&T.mu);
    return s;
}

void zero_trace_step(int step) {
    if (!zero_trace_on) return;
    pthread_mutex_lock(&T.mu);
    T.step = step;
    pthread_mutex_unlock(&T.mu);
}

void zero_trace_span(const char *name, const char *label, uint64_t t0, uint64_t t1) {
    if (zero_trace_on) add(EV_SPAN, name, label, t0, t1, 0.0);
}

void zero_trace_enter(const char *name, const char *label) {
    if (!zero_trace_on) return;
    pthread_mutex_lock(&T.mu);
    Ev *e = &T.open[track()];
    e->kind = EV_SPAN;
    e->name = name;
    snprintf(e->label, LABEL, "%s", label ? label : "");
    e->t0 = zero_trace_now();
    e->track = track();
    e->step = T.step;
    pthread_mutex_unlock(&T.mu);
}

void zero_trace_exit(void) {
    if (!zero_trace_on) return;
    pthread_mutex_lock(&T.mu);
    Ev e = T.open[track()];
    T.open[track()].kind = EV_NONE;
    pthread_mutex_unlock(&T.mu);
    if (e.kind == EV_SPAN) add(EV_SPAN, e.name, e.label, e.t0, zero_trace_now(), 0.0);
}

void zero_trace_counter(const char *name, double value) {
    if (!zero_trace_on) return;
    uint64_t t = zero_trace_now();
    add(EV_COUNTER, name, NULL, t, t, value);
}

void zero_trace_thread(const char *name) {
    if (!zero_trace_on) return;
    pthread_mutex_lock(&T.mu);
    snprintf(T.tracks[track()], LABEL, "%s", name);
    pthread_mutex_unlock(&T.mu);
}

static void json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

int zero_trace_write(void) {
    if (!zero_trace_on) return 0;
    // a snapshot of the ring, so that recording goes on while the file is written
    pthread_mutex_lock(&T.mu);
    uint64_t count = T.count, held = count < ZERO_TRACE_EVENTS ? count : ZERO_TRACE_EVENTS;
    Ev *ev = malloc((held ? held : 1) * sizeof(Ev));
    if (ev)
        for (uint64_t i = 0; i < held; i++) ev[i] = T.ring[(count - held + i) % ZERO_TRACE_EVENTS];
    int ntracks = T.ntracks, last = T.step, lost = T.lost_step;
    char tracks[MAX_TRACKS][LABEL];
    memcpy(tracks, T.tracks, sizeof tracks);
    Ev open[MAX_TRACKS];
    memcpy(open, T.open, sizeof open);
    const uint64_t now = zero_trace_now();
    pthread_mutex_unlock(&T.mu);
    if (!ev) {
        fprintf(stderr, "zero: rank %d: out of host memory writing the trace\n", T.rank);
        return -1;
    }
    // whole steps only: after the last step the wrapped ring lost events of (a span recorded
    // late may carry an older step than events after it); and at most the last keep_steps
    int first = held ? ev[0].step : 0;
    if (lost + 1 > first) first = lost + 1;
    if (T.keep_steps > 0 && last - T.keep_steps + 1 > first) first = last - T.keep_steps + 1;
    if (first > last)
        fprintf(stderr, "zero: rank %d: the trace %s holds no whole step: step %d alone took more than the ring's %d "
                "events\n", T.rank, T.path, last, ZERO_TRACE_EVENTS);
    char tmp[4096 + 32];
    snprintf(tmp, sizeof tmp, "%s.tmp", T.path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "zero: rank %d: cannot write the trace %s: %s\n", T.rank, tmp, strerror(errno));
        free(ev);
        return -1;
    }
    fprintf(f, "{\"displayTimeUnit\": \"ms\", \"otherData\": {\"rank\": %d, \"world\": %d, \"clock_offset_ns\": %lld, "
            "\"start_ns\": %llu, \"start_realtime_ns\": %llu, \"boot_id\": \"%s\", \"first_step\": %d, \"last_step\": %d, "
            "\"events_recorded\": %llu},\n\"traceEvents\": [\n", T.rank, T.world, (long long)T.offset_ns,
            (unsigned long long)T.start_ns, (unsigned long long)T.start_realtime_ns, T.boot_id, first, last,
            (unsigned long long)count);
    fprintf(f, "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, \"args\": {\"name\": \"rank %d\"}}", T.rank, T.rank);
    for (int t = 0; t < ntracks; t++) {
        fprintf(f, ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": %d, \"args\": {\"name\": ", T.rank, t);
        json_string(f, tracks[t]);
        fprintf(f, "}}");
    }
    const double base = (double)T.start_ns - (double)T.offset_ns;
    for (uint64_t i = 0; i < held; i++) {
        const Ev *e = &ev[i];
        if (e->step < first) continue;
        double ts = ((double)e->t0 - base) / 1e3;   // microseconds since the start
        fprintf(f, ",\n{\"name\": ");
        json_string(f, e->name);
        if (e->kind == EV_SPAN) {
            fprintf(f, ", \"ph\": \"X\", \"ts\": %.3f, \"dur\": %.3f, \"pid\": %d, \"tid\": %d, \"args\": {\"step\": %d",
                    ts, (double)(e->t1 - e->t0) / 1e3, T.rank, e->track, e->step);
            if (e->label[0]) {
                fprintf(f, ", \"label\": ");
                json_string(f, e->label);
            }
            fprintf(f, "}}");
        } else {
            fprintf(f, ", \"ph\": \"C\", \"ts\": %.3f, \"pid\": %d, \"args\": {\"value\": %.17g}}", ts, T.rank, e->value);
        }
    }
    for (int t = 0; t < ntracks; t++) {   // spans still running: a stuck collective, the wait behind it
        const Ev *e = &open[t];
        if (e->kind != EV_SPAN) continue;
        fprintf(f, ",\n{\"name\": ");
        json_string(f, e->name);
        fprintf(f, ", \"ph\": \"X\", \"ts\": %.3f, \"dur\": %.3f, \"pid\": %d, \"tid\": %d, \"args\": {\"step\": %d, "
                "\"open\": true, \"label\": ", ((double)e->t0 - base) / 1e3, (double)(now - e->t0) / 1e3, T.rank, e->track,
                e->step);
        json_string(f, e->label);
        fprintf(f, "}}");
    }
    fprintf(f, "\n]}\n");
    int bad = ferror(f);
    if (fclose(f) != 0 || bad || rename(tmp, T.path) != 0) {
        fprintf(stderr, "zero: rank %d: writing the trace %s failed: %s\n", T.rank, T.path, strerror(errno));
        remove(tmp);
        free(ev);
        return -1;
    }
    free(ev);
    return 0;
}

void zero_trace_flush_with(void (*flush)(void)) { flush_fn = flush; }

int zero_trace_finish(void) {
    if (!zero_trace_on) return 0;
    if (flush_fn) flush_fn();
    int rc = zero_trace_write();
    if (rc == 0 && T.rank == 0) {
        char base[4096];
        snprintf(base, sizeof base, "%s", T.path);
        char *dot = strstr(base, ".rank");
        if (dot) *dot = 0;
        printf("wrote the trace %s.rank*.json (scripts/trace_merge.py joins the ranks' files)\n", base);
    }
    zero_trace_stop();
    return rc;
}
