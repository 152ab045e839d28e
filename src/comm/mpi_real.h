// The MPI datatype that matches nn_real (kernels/nn_real.h). MPI lives only in src/comm.
#pragma once
#include <mpi.h>

#include "nn_real.h"

#ifdef USE_DOUBLE
#define NN_MPI_REAL MPI_DOUBLE
#else
#define NN_MPI_REAL MPI_FLOAT
#endif
