// threads.c: OpenMP threads per rank (threads.h).
#include "threads.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

// A positive integer, or 0 when s is unset, empty or not one.
static long positive(const char *s) {
    if (s == NULL || *s == '\0') return 0;
    char *end;
    long v = strtol(s, &end, 10);
    return *end == '\0' && v > 0 ? v : 0;
}

int threads_choose(int requested, const char *omp_env, const char *ompi_local, int local_ranks,
                   const char *local_from, int cores, int allowed, char *why, size_t len) {
    if (requested > 0) {
        snprintf(why, len, "%d (--threads)", requested);
        return requested;
    }
    if (omp_env != NULL && *omp_env != '\0') {
        snprintf(why, len, "as OMP_NUM_THREADS=%s says", omp_env);
        return 0;
    }
    if (cores < 1) cores = 1;
    if (allowed < 1 || allowed > cores) allowed = cores;
    long local = positive(ompi_local);
    const char *from = "OMPI_COMM_WORLD_LOCAL_SIZE";
    if (local == 0) {
        local = local_ranks > 0 ? local_ranks : 1;
        from = local_from ? local_from : "the launcher";
    }
    int t = cores / local > 0 ? (int)(cores / local) : 1;
    char bound[64] = "";
    if (t > allowed) {   // the launcher (or taskset) bound this rank to fewer cores
        t = allowed;
        snprintf(bound, sizeof(bound), ", capped at the %d CPU(s) this process may run on", allowed);
    }
    if (local == 1) snprintf(why, len, "%d (%d cores, one rank on this node%s)", t, cores, bound);
    else snprintf(why, len, "%d per rank (%d cores / %ld ranks on this node, from %s%s; OMP_NUM_THREADS or --threads "
                  "sets it)", t, cores, local, from, bound);
    return t;
}

int threads_apply(int requested, int local_ranks, const char *local_from, int print) {
    char why[256];
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int t = threads_choose(requested, getenv("OMP_NUM_THREADS"), getenv("OMPI_COMM_WORLD_LOCAL_SIZE"), local_ranks,
                           local_from, online > 0 ? (int)online : omp_get_num_procs(), omp_get_num_procs(), why,
                           sizeof(why));
    if (t > 0) omp_set_num_threads(t);
    // Results do not depend on the thread count, so unless --threads fixed it, let OpenMP
    // shed threads on a busy machine.
    if (requested <= 0) omp_set_dynamic(1);
    if (print) printf("threads: %s\n", why);
    return omp_get_max_threads();
}
