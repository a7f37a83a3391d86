// launch_env.h: whether a launcher (mpirun, srun, torchrun-style RANK/WORLD_SIZE) started
// this process as one of several ranks. The unsharded trainers refuse that: every rank
// would train its own full copy into the same output folder. (The ZeRO plugin's own
// launcher detection is zero/comm/comm_mpi.c; llmc/ does not depend on zero/.)
#ifndef LLMC_LAUNCH_ENV_H
#define LLMC_LAUNCH_ENV_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// The number of ranks the launcher started, 1 when there is none, 0 when it is more than
// one but unknown (a launcher that tells this rank's index only, as PMIx does, on a rank
// above 0). `which` receives the variable that told, e.g. "OMPI_COMM_WORLD_SIZE=2".
int launch_env_ranks(char *which, size_t len);
// Exits with a message naming the launcher's variable when more than one rank was
// started; `advice` says what to run instead.
void launch_env_refuse_ranks(const char *prog, const char *advice);

#ifdef __cplusplus
}
#endif
#endif
