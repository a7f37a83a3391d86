/*
mpi.h (stub): just enough of MPI's interface to build zero/comm/comm_mpi.c on a machine without
MPI (the GPU test machine may have none). A program built with it runs only launched
without MPI (RANK / WORLD_SIZE in the environment: comm_mpi.c never calls MPI then); under
a launcher MPI_Init_thread fails with a message. Used by dev/test/zero/gpu_zero.sh only.
*/
#ifndef ZERO_MPI_STUB_H
#define ZERO_MPI_STUB_H

typedef int MPI_Comm;
typedef int MPI_Datatype;
typedef int MPI_Info;
typedef int MPI_Errhandler;
typedef int MPI_Op;

#define MPI_SUCCESS 0
#define MPI_ERR_OTHER 16
#define MPI_MAX_ERROR_STRING 256
#define MPI_THREAD_MULTIPLE 3
#define MPI_COMM_NULL 0
#define MPI_COMM_WORLD 1
#define MPI_COMM_TYPE_SHARED 1
#define MPI_INFO_NULL 0
#define MPI_ERRORS_RETURN 1
#define MPI_DATATYPE_NULL 0
#define MPI_BYTE 1
#define MPI_INT 2
#define MPI_FLOAT 3
#define MPI_DOUBLE 4
#define MPI_UINT16_T 5
#define MPI_IN_PLACE ((void *)1)
#define MPI_MIN 1
#define MPI_MAX 2
#define MPI_SUM 3

int MPI_Initialized(int *flag);
int MPI_Init_thread(int *argc, char ***argv, int required, int *provided);
int MPI_Query_thread(int *provided);
int MPI_Finalize(void);
int MPI_Abort(MPI_Comm comm, int code);
int MPI_Error_string(int code, char *s, int *len);
int MPI_Comm_dup(MPI_Comm c, MPI_Comm *out);
int MPI_Comm_free(MPI_Comm *c);
int MPI_Comm_set_errhandler(MPI_Comm c, MPI_Errhandler h);
int MPI_Comm_rank(MPI_Comm c, int *rank);
int MPI_Comm_size(MPI_Comm c, int *size);
int MPI_Comm_split(MPI_Comm c, int color, int key, MPI_Comm *out);
int MPI_Comm_split_type(MPI_Comm c, int type, int key, MPI_Info info, MPI_Comm *out);
int MPI_Barrier(MPI_Comm c);
int MPI_Bcast(void *buf, int count, MPI_Datatype t, int root, MPI_Comm c);
int MPI_Allgather(const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt, MPI_Comm c);
int MPI_Alltoall(const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt, MPI_Comm c);
int MPI_Allreduce(const void *s, void *r, int count, MPI_Datatype t, MPI_Op op, MPI_Comm c);
int MPI_Gather(const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt, int root, MPI_Comm c);
typedef void MPI_User_function(void *in, void *inout, int *len, MPI_Datatype *type);
int MPI_Op_create(MPI_User_function *fn, int commute, MPI_Op *op);
int MPI_Reduce_scatter_block(const void *s, void *r, int count, MPI_Datatype t, MPI_Op op, MPI_Comm c);

#endif
