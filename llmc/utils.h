// utils.h: checked wrappers around libc calls. Every failure names the call site,
// the file involved and what went wrong, then exits; nothing fails silently.
#ifndef LLMC_UTILS_H
#define LLMC_UTILS_H

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

// die: print "error: <message>" (with the source location) and exit(1).
static inline void die_at(const char *srcfile, int line, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 3, 4)));
static inline void die_at(const char *srcfile, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "error: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " [%s:%d]\n", srcfile, line);
    va_end(ap);
    fflush(stderr);
    exit(EXIT_FAILURE);
}
#define die(...) die_at(__FILE__, __LINE__, __VA_ARGS__)

static inline FILE *fopen_check_at(const char *path, const char *mode, const char *srcfile, int line) {
    FILE *f = fopen(path, mode);
    if (f == NULL) die_at(srcfile, line, "cannot open '%s' (mode %s): %s", path, mode, strerror(errno));
    // a folder opens for reading, and then reads as an error or as a size of 2^63
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) die_at(srcfile, line, "'%s' is a folder, not a file", path);
    return f;
}
#define fopen_check(path, mode) fopen_check_at(path, mode, __FILE__, __LINE__)

// fread_check: short reads are errors; `path` names the file in the message.
static inline void fread_check_at(void *ptr, size_t size, size_t n, FILE *f, const char *path,
                                  const char *srcfile, int line) {
    size_t got = fread(ptr, size, n, f);
    if (got != n) {
        if (feof(f)) die_at(srcfile, line, "'%s' is truncated: wanted %zu items of %zu bytes, got %zu", path, n, size, got);
        die_at(srcfile, line, "read error on '%s': %s", path, strerror(errno));
    }
}
#define fread_check(ptr, size, n, f, path) fread_check_at(ptr, size, n, f, path, __FILE__, __LINE__)

static inline void fwrite_check_at(const void *ptr, size_t size, size_t n, FILE *f, const char *path,
                                   const char *srcfile, int line) {
    if (fwrite(ptr, size, n, f) != n) die_at(srcfile, line, "write error on '%s': %s", path, strerror(errno));
}
#define fwrite_check(ptr, size, n, f, path) fwrite_check_at(ptr, size, n, f, path, __FILE__, __LINE__)

static inline void fseek_check_at(FILE *f, long off, int whence, const char *path, const char *srcfile, int line) {
    if (fseek(f, off, whence) != 0) die_at(srcfile, line, "seek failed on '%s': %s", path, strerror(errno));
}
#define fseek_check(f, off, whence, path) fseek_check_at(f, off, whence, path, __FILE__, __LINE__)

static inline void *malloc_check_at(size_t size, const char *srcfile, int line) {
    void *p = malloc(size ? size : 1);
    if (p == NULL) die_at(srcfile, line, "out of host memory allocating %zu bytes", size);
    return p;
}
#define malloc_check(size) malloc_check_at(size, __FILE__, __LINE__)

static inline void *calloc_check_at(size_t n, size_t size, const char *srcfile, int line) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (p == NULL) die_at(srcfile, line, "out of host memory allocating %zu x %zu bytes", n, size);
    return p;
}
#define calloc_check(n, size) calloc_check_at(n, size, __FILE__, __LINE__)

// Overflow-checked size arithmetic for sizes computed from files and flags: a product
// or sum that does not fit size_t exits, naming `what`, instead of wrapping around.
static inline size_t size_mul_at(size_t a, size_t b, const char *what, const char *srcfile, int line) {
    size_t r;
    if (__builtin_mul_overflow(a, b, &r)) die_at(srcfile, line, "%s: %zu x %zu overflows size_t", what, a, b);
    return r;
}
static inline size_t size_add_at(size_t a, size_t b, const char *what, const char *srcfile, int line) {
    size_t r;
    if (__builtin_add_overflow(a, b, &r)) die_at(srcfile, line, "%s: %zu + %zu overflows size_t", what, a, b);
    return r;
}
#define size_mul(a, b, what) size_mul_at(a, b, what, __FILE__, __LINE__)
#define size_add(a, b, what) size_add_at(a, b, what, __FILE__, __LINE__)

// Size of an open file in bytes (restores the position to the start).
static inline long file_size_check_at(FILE *f, const char *path, const char *srcfile, int line) {
    fseek_check_at(f, 0, SEEK_END, path, srcfile, line);
    long n = ftell(f);
    if (n < 0) die_at(srcfile, line, "cannot tell size of '%s': %s", path, strerror(errno));
    fseek_check_at(f, 0, SEEK_SET, path, srcfile, line);
    return n;
}
#define file_size_check(f, path) file_size_check_at(f, path, __FILE__, __LINE__)

#endif // LLMC_UTILS_H
