// test_util.h: helpers shared by the cmocka tests in dev/test. Header-only; include it
// after <cmocka.h> (it uses cmocka's assertions).
#ifndef TEST_UTIL_H
#define TEST_UTIL_H

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

// A float's bits and back.
static inline uint32_t bits_of(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}
static inline float float_of(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

// Runs fn(arg) in a forked child whose stderr goes into msg: NUL-terminated, cut to
// cap - 1 bytes (the rest is read and dropped, so a chatty child cannot block). The
// child exits 0 when fn returns. Returns the child's exit status, or -1 when it did not
// exit normally (e.g. killed by a signal).
static inline int run_in_child(void (*fn)(void *), void *arg, char *msg, size_t cap) {
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    fflush(NULL); // or the child would write the parent's buffered output again
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], STDERR_FILENO);
        close(fds[1]);
        fn(arg);
        _exit(0); // fn returned
    }
    close(fds[1]);
    size_t len = 0;
    for (;;) {
        char spill[512];
        int keep = len + 1 < cap;
        ssize_t got = keep ? read(fds[0], msg + len, cap - 1 - len) : read(fds[0], spill, sizeof(spill));
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) break;
        if (keep) len += (size_t)got;
    }
    if (cap > 0) msg[len] = '\0';
    close(fds[0]);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// For expect_death: any non-zero exit status will do.
#define DEATH_ANY_STATUS (-1)

// Runs fn(arg) in a child (run_in_child) and fails the test unless the child exits with
// status want (any non-zero status for DEATH_ANY_STATUS) and its stderr contains each
// string of the NULL-terminated list that follows want.
static inline void expect_death(void (*fn)(void *), void *arg, int want, ...) {
    char msg[8192];
    int got = run_in_child(fn, arg, msg, sizeof(msg));
    if (want == DEATH_ANY_STATUS ? got <= 0 : got != want) {
        if (want == DEATH_ANY_STATUS)
            fail_msg("expected a non-zero exit status, got %d (-1: no normal exit); stderr: %s", got, msg);
        else
            fail_msg("expected exit status %d, got %d (-1: no normal exit); stderr: %s", want, got, msg);
    }
    va_list ap;
    va_start(ap, want);
    for (const char *needle; (needle = va_arg(ap, const char *)) != NULL;) {
        if (strstr(msg, needle) == NULL) {
            va_end(ap);
            fail_msg("stderr lacks \"%s\"; it was: %s", needle, msg);
        }
    }
    va_end(ap);
}

// 1 when dir's file system makes unnamed files for direct I/O (O_TMPFILE | O_DIRECT).
static inline int makes_unnamed_files(const char *dir) {
    int fd = open(dir, O_TMPFILE | O_RDWR | O_DIRECT | O_CLOEXEC, 0600);
    if (fd >= 0) close(fd);
    return fd >= 0;
}

// What is created, removed or moved into a folder between folder_watch_begin and
// folder_watch_end: " created NAME; removed NAME;" ... in seen ("" for nothing).
static inline int folder_watch_begin(const char *dir) {
    int watch = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    assert_true(watch >= 0);
    assert_true(inotify_add_watch(watch, dir, IN_CREATE | IN_DELETE | IN_MOVED_TO) >= 0);
    return watch;
}

static inline void folder_watch_end(int watch, char *seen, size_t cap) {
    char events[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    ssize_t got = read(watch, events, sizeof events);
    seen[0] = '\0';
    for (ssize_t at = 0; got > 0 && at < got;) {
        const struct inotify_event *e = (const struct inotify_event *)(events + at);
        size_t used = strlen(seen);
        snprintf(seen + used, cap - used, " %s %s;", e->mask & IN_CREATE ? "created" : e->mask & IN_DELETE ? "removed"
                 : "moved in", e->len ? e->name : "?");
        at += (ssize_t)sizeof *e + e->len;
    }
    close(watch);
}

#endif // TEST_UTIL_H
