/*
nvme.h: the NVMe engine (ZeRO-Infinity's): asynchronous reads and writes of one rank's
swap file, for optimizer states and parameters that live on NVMe. Host code, used by both
backends; it knows nothing of what the bytes are.

  - One file per rank, created 0600 under the --nvme-path folder, opened with O_DIRECT
    (no page cache: the point is to not use host memory) and never named there (O_TMPFILE;
    else unlinked at once), so that it disappears whatever way the process ends; its size
    is reserved at open (fallocate).
  - A fixed pool of aligned buffers (ZERO_NVME_ALIGN), allocated at open through the
    caller's allocator (the backend's pinned host memory under CUDA) and never again.
  - Several requests in flight: io_uring (liburing) when the kernel allows it, else a pool
    of threads doing pread/pwrite (io_uring is often refused by seccomp in containers).
    The engine in use is chosen at open and reported (zero_nvme_engine, and why:
    zero_nvme_engine_note). ZERO_NVME_ENGINE=threads forces the fallback (tests);
    ZERO_NVME_ENGINE=io_uring makes a refused io_uring an error instead.
  - A request returns a ticket; zero_nvme_wait(ticket) returns once it (and every request
    issued before it) has completed. Orchestration waits on tickets as on events. Queueing
    a request while queue_depth are in flight blocks until one completes.
  - The first failure stops the engine: later requests are refused (ticket 0) and every
    wait on a ticket from the failed one on returns -1, so no error goes unseen. After a
    failure of the io_uring ring itself, requests it held may still be moving bytes in the
    kernel: their buffers are not to be reused, only the engine closed (offload ends the run).

Offsets, sizes and buffer addresses are multiples of ZERO_NVME_ALIGN, and a request lies
inside file_bytes; anything else is refused with a message. Errors (missing or
unwritable folder, disk full, short read, I/O error) are returned as -1 with a message
naming the file, the operation, the offset and the size in the engine's error text;
nothing is retried silently.
*/
#ifndef ZERO_NVME_H
#define ZERO_NVME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ZERO_NVME_ALIGN 4096
#define ZERO_NVME_MAX_DEPTH 256            // queue_depth's limit
#define ZERO_NVME_MAX_BLOCK ((size_t)1 << 30)   // block_bytes' limit and default

typedef struct ZeroNvme ZeroNvme;
typedef uint64_t ZeroTicket;   // 0 is never a valid ticket

// The pool's memory: returns `bytes` aligned to ZERO_NVME_ALIGN, or NULL; frees it.
typedef void *(*ZeroNvmeAlloc)(void *ctx, size_t bytes);
typedef void (*ZeroNvmeFree)(void *ctx, void *p);

typedef struct {
    const char *dir;        // --nvme-path
    int rank;               // names the file: DIR/zero_swap_rank<R>_<pid>.bin
    uint64_t file_bytes;    // reserved at open (rounded up to ZERO_NVME_ALIGN)
    size_t buffer_bytes;    // each pool buffer (rounded up to ZERO_NVME_ALIGN)
    int num_buffers;        // pool size
    int queue_depth;        // requests in flight at most (io_uring entries, or threads), 1..ZERO_NVME_MAX_DEPTH
    ZeroNvmeAlloc alloc;    // NULL: aligned host memory from the C library
    ZeroNvmeFree free;
    void *alloc_ctx;
    size_t block_bytes;     // the most bytes one pread/pwrite or io_uring entry moves; a request
                            //   larger goes in blocks of this, one after another (DeepSpeed's
                            //   aio block_size). A multiple of ZERO_NVME_ALIGN; 0: ZERO_NVME_MAX_BLOCK
} ZeroNvmeConfig;

// Opens the engine. NULL with the reason in err (the folder, the call and errno's text).
ZeroNvme *zero_nvme_open(const ZeroNvmeConfig *cfg, char *err, size_t errlen);
// A second engine on `of`'s swap file: its own requests, tickets, pool and statistics (cfg's
// rank, buffers, queue depth, block size and allocator; not its dir or file_bytes), so that
// a second thread can move bytes without waiting behind the first's requests. Requests of
// the two engines are not ordered with each other: the caller keeps them to different
// bytes, or waits on one engine's ticket before the other touches the same bytes. Close it
// before or after `of`: the file goes away with the last.
ZeroNvme *zero_nvme_open_sibling(const ZeroNvme *of, const ZeroNvmeConfig *cfg, char *err, size_t errlen);
// Waits for everything in flight, closes the file (already unlinked) and frees the pool.
void zero_nvme_close(ZeroNvme *n);

// The pool's buffers, 0 .. num_buffers-1.
void *zero_nvme_buffer(ZeroNvme *n, int i);
size_t zero_nvme_buffer_bytes(const ZeroNvme *n);

// Queue a read of file bytes [offset, offset + bytes) into buf, or a write of buf there.
// Returns the ticket, or 0 when the request could not be queued (see zero_nvme_error).
ZeroTicket zero_nvme_read(ZeroNvme *n, void *buf, uint64_t offset, size_t bytes);
ZeroTicket zero_nvme_write(ZeroNvme *n, const void *buf, uint64_t offset, size_t bytes);
// Waits until ticket t and every earlier request have completed. 0, or -1 when any of
// them failed (the first failure's message: zero_nvme_error). Safe from one thread at a
// time per engine.
int zero_nvme_wait(ZeroNvme *n, ZeroTicket t);
// Waits for everything issued so far.
int zero_nvme_drain(ZeroNvme *n);

const char *zero_nvme_error(const ZeroNvme *n);   // the first failure's message, "" if none
const char *zero_nvme_engine(const ZeroNvme *n);  // "io_uring" or "threads"
// Why that engine, for the start-up report: "io_uring, queue depth 8", "threads (8):
// io_uring refused (io_uring_queue_init: Operation not permitted)", "threads (8): forced
// by ZERO_NVME_ENGINE=threads", "threads (8): built without liburing".
const char *zero_nvme_engine_note(const ZeroNvme *n);
const char *zero_nvme_path(const ZeroNvme *n);    // the (unlinked) file's path, for messages
int zero_nvme_unnamed(const ZeroNvme *n);         // 1: made unnamed (O_TMPFILE), the path never existed

typedef struct {
    uint64_t bytes_read, bytes_written;   // completed
    uint64_t read_asked, write_asked;     // the bytes of the requests accepted, complete or not: what a
                                          //   stretch of the caller's program asked for, whatever the timing
    uint64_t reads, writes;
    uint64_t transfers;                    // read and write calls made: a request moves in blocks of
                                           //   at most block_bytes (and a short one takes another)
    double busy_s;                         // wall time with at least one request in flight on
                                           //   this engine or a sibling (the file's, counted once)
} ZeroNvmeStats;
void zero_nvme_stats(const ZeroNvme *n, ZeroNvmeStats *out);

#ifdef __cplusplus
}
#endif
#endif
