// threads.h: how many OpenMP threads a rank of the CPU trainer runs. Several ranks on one
// machine each taking every core (OpenMP's default) put cores x ranks threads on the cores,
// and two threads sharing a core run several times slower than one. So by default each rank
// takes cores / ranks on this node (at least 1). --threads N wins, then OMP_NUM_THREADS.
#ifndef LLMC_THREADS_H
#define LLMC_THREADS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// The choice, without side effects. requested: --threads (0 = not given); omp_env: the
// value of OMP_NUM_THREADS (NULL or "" = unset); ompi_local: OMPI_COMM_WORLD_LOCAL_SIZE (Open
// MPI's count of this node's ranks; NULL = unset); local_ranks, local_from: this node's
// ranks as the world found them (an MPI_COMM_TYPE_SHARED split, LOCAL_WORLD_SIZE) and what
// told, used when Open MPI's variable is unset; cores: the machine's CPUs; allowed: those
// this process may run on (a launcher that binds ranks to cores narrows it): a cap.
// Returns the threads to set, or 0 to leave OpenMP's own setting (OMP_NUM_THREADS) alone;
// `why` receives one line saying how it was chosen.
int threads_choose(int requested, const char *omp_env, const char *ompi_local, int local_ranks,
                   const char *local_from, int cores, int allowed, char *why, size_t len);
// threads_choose on this process's environment and cores, then sets it (and lets OpenMP
// shed threads on a busy machine unless --threads fixed them). Prints "threads: ..." when
// `print`. Returns the threads OpenMP will use.
int threads_apply(int requested, int local_ranks, const char *local_from, int print);

#ifdef __cplusplus
}
#endif
#endif
