// mpi_stub.c: the stub MPI of mpi.h beside it. Nothing here is reached in a launch without
// MPI; under a launcher, initialization fails with a message instead of running wrongly.
#include "mpi.h"

#include <stdio.h>
#include <unistd.h>

static int unavailable(const char *fn) {
    fprintf(stderr, "%s: this program was built without MPI (zero/comm/mpi_stub); launch it with "
            "RANK/WORLD_SIZE instead of an MPI launcher\n", fn);
    return MPI_ERR_OTHER;
}

int MPI_Initialized(int *flag) { *flag = 0; return MPI_SUCCESS; }
int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
    (void)argc; (void)argv; (void)required;
    *provided = 0;
    return unavailable("MPI_Init_thread");
}
int MPI_Query_thread(int *provided) { *provided = 0; return unavailable("MPI_Query_thread"); }
int MPI_Finalize(void) { return MPI_SUCCESS; }
int MPI_Abort(MPI_Comm comm, int code) { (void)comm; _exit(code); }
int MPI_Error_string(int code, char *s, int *len) {
    int n = snprintf(s, MPI_MAX_ERROR_STRING, "MPI stub: error %d (built without MPI)", code);
    *len = n < MPI_MAX_ERROR_STRING ? n : MPI_MAX_ERROR_STRING - 1;
    return MPI_SUCCESS;
}
int MPI_Comm_dup(MPI_Comm c, MPI_Comm *out) { (void)c; *out = MPI_COMM_NULL; return unavailable("MPI_Comm_dup"); }
int MPI_Comm_free(MPI_Comm *c) { *c = MPI_COMM_NULL; return MPI_SUCCESS; }
int MPI_Comm_set_errhandler(MPI_Comm c, MPI_Errhandler h) { (void)c; (void)h; return unavailable("MPI_Comm_set_errhandler"); }
int MPI_Comm_rank(MPI_Comm c, int *rank) { (void)c; *rank = 0; return unavailable("MPI_Comm_rank"); }
int MPI_Comm_size(MPI_Comm c, int *size) { (void)c; *size = 1; return unavailable("MPI_Comm_size"); }
int MPI_Comm_split(MPI_Comm c, int color, int key, MPI_Comm *out) {
    (void)c; (void)color; (void)key;
    *out = MPI_COMM_NULL;
    return unavailable("MPI_Comm_split");
}
int MPI_Comm_split_type(MPI_Comm c, int type, int key, MPI_Info info, MPI_Comm *out) {
    (void)c; (void)type; (void)key; (void)info;
    *out = MPI_COMM_NULL;
    return unavailable("MPI_Comm_split_type");
}
int MPI_Barrier(MPI_Comm c) { (void)c; return unavailable("MPI_Barrier"); }
int MPI_Bcast(void *buf, int count, MPI_Datatype t, int root, MPI_Comm c) {
    (void)buf; (void)count; (void)t; (void)root; (void)c;
    return unavailable("MPI_Bcast");
}
int MPI_Allgather(const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt, MPI_Comm c) {
    (void)s; (void)sc; (void)st; (void)r; (void)rc; (void)rt; (void)c;
    return unavailable("MPI_Allgather");
}
int MPI_Alltoall(const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt, MPI_Comm c) {
    (void)s; (void)sc; (void)st; (void)r; (void)rc; (void)rt; (void)c;
    return unavailable("MPI_Alltoall");
}
int MPI_Gather(const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt, int root, MPI_Comm c) {
    (void)s; (void)sc; (void)st; (void)r; (void)rc; (void)rt; (void)root; (void)c;
    return unavailable("MPI_Gather");
}
int MPI_Op_create(MPI_User_function *fn, int commute, MPI_Op *op) {
    (void)fn; (void)commute;
    *op = 0;
    return unavailable("MPI_Op_create");
}
int MPI_Reduce_scatter_block(const void *s, void *r, int count, MPI_Datatype t, MPI_Op op, MPI_Comm c) {
    (void)s; (void)r; (void)count; (void)t; (void)op; (void)c;
    return unavailable("MPI_Reduce_scatter_block");
}
int MPI_Allreduce(const void *s, void *r, int count, MPI_Datatype t, MPI_Op op, MPI_Comm c) {
    (void)s; (void)r; (void)count; (void)t; (void)op; (void)c;
    return unavailable("MPI_Allreduce");
}
