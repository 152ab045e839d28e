// The project's scalar type and storage order, stated once for host and device code.
// nn_real is float, or double when built with USE_DOUBLE=1 (-DUSE_DOUBLE).
// No MPI here (src/comm chooses MPI_FLOAT or MPI_DOUBLE per call from the element type).
#pragma once
#include <cstddef>

#ifdef USE_DOUBLE
using nn_real = double;
#else
using nn_real = float;
#endif

// Every matrix in the project is column-major (Armadillo's order): element (i, j)
// of an m-by-n matrix with leading dimension ld sits at p[i + j * ld]. A batch of
// images is a D-by-B matrix: one image per column, so one image is contiguous.
#define IDX2C(i, j, ld) ((static_cast<std::size_t>(j)) * (ld) + (i))

// The network's fixed sizes: 28x28 inputs and 10 classes.
inline constexpr int kInputDim = 784;
inline constexpr int kNumClasses = 10;
