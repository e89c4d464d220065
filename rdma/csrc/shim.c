/* Constants that mpi-sys (rsmpi) does not export. In MPICH they are macros
 * over integer literals, in Open MPI macros over addresses of library
 * globals, so they can only be read portably from C. Built with the same
 * MPI as mpi-sys (build.rs uses build-probe-mpi, as mpi-sys does). */
#include <mpi.h>

const MPI_Op AIR_MPI_REPLACE = MPI_REPLACE;
const MPI_Op AIR_MPI_NO_OP = MPI_NO_OP;
const MPI_Op AIR_MPI_SUM = MPI_SUM;
const MPI_Datatype AIR_MPI_BYTE = MPI_BYTE;
const MPI_Datatype AIR_MPI_UINT64_T = MPI_UINT64_T;
const int AIR_MPI_MODE_NOCHECK = MPI_MODE_NOCHECK;
const int AIR_MPI_WIN_UNIFIED = MPI_WIN_UNIFIED;
const int AIR_MPI_WIN_MODEL = MPI_WIN_MODEL;
const int AIR_MPI_MAX_ERROR_STRING = MPI_MAX_ERROR_STRING;
