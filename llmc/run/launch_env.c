// launch_env.c: launcher detection from the environment (launch_env.h).
#include "launch_env.h"

#include <stdio.h>
#include <stdlib.h>

#include "../utils.h"

// Positive integer value of an environment variable, or 0 when unset or not a number.
static long env_positive(const char *name) {
    const char *s = getenv(name);
    if (s == NULL || *s == '\0') return 0;
    char *end;
    long v = strtol(s, &end, 10);
    return *end == '\0' && v > 0 ? v : 0;
}

int launch_env_ranks(char *which, size_t len) {
    // The world size: Open MPI, MPICH/Hydra (PMI), srun's job step (its SLURM_NTASKS is
    // also set in a batch script that starts one process), torchrun and scripts/launch_ranks.sh.
    static const char *sizes[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS", "WORLD_SIZE"};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        long n = env_positive(sizes[i]);
        if (n > 1) {
            snprintf(which, len, "%s=%ld", sizes[i], n);
            return n > 1 << 30 ? 1 << 30 : (int)n;
        }
    }
    // PMIx tells the rank only: a rank above 0 has company, how much is unknown.
    static const char *ranks[] = {"PMIX_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID", "RANK"};
    for (size_t i = 0; i < sizeof(ranks) / sizeof(ranks[0]); i++) {
        long r = env_positive(ranks[i]);
        if (r > 0) {
            snprintf(which, len, "%s=%ld", ranks[i], r);
            return 0;
        }
    }
    snprintf(which, len, "no launcher");
    return 1;
}

void launch_env_refuse_ranks(const char *prog, const char *advice) {
    char which[96], count[32] = "several";
    int n = launch_env_ranks(which, sizeof(which));
    if (n == 1) return;
    if (n > 1) snprintf(count, sizeof(count), "%d", n);
    die("%s was started as one of %s ranks (%s): unsharded, every rank would train its own full copy into the same "
        "output folder. %s", prog, count, which, advice);
}
