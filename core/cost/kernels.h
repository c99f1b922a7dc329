#pragma once
// Kernel times on one device: matmuls from their shape, streaming kernels from their bytes, and
// the one overlap rule (communication hidden under compute). The cost model (cost_model.cpp)
// prices every op with these; docs/FIDELITY.md explains each term and where its figures come from.
#include "../mesh/mesh.h"

namespace tp {

/// A matmul as cuBLAS sees it: `batch` independent (m x k) . (k x n) products.
struct GemmShape {
    double batch = 1, m = 1, n = 1, k = 1;
};

/// Achieved fraction of peak for a matmul of this shape: the large-matmul efficiency, times
/// the tile and wave quantization of its output tiles over the SMs (the better of the two tile
/// orientations), times K / (K + halfEfficiencyK) for short contractions. Without a shape
/// model (GemmModel::smCount 0) the flat Hardware::matmulEfficiency.
double gemmEfficiency(const Hardware& hardware, const GemmShape& shape);

/// Seconds to stream this many bytes through HBM at the achieved bandwidth.
double streamSeconds(const Hardware& hardware, double bytes);

/// Seconds of `flops` at the shape's efficiency of `peakFlops`, or of streaming `bytes`,
/// whichever is slower (the roofline).
double gemmSeconds(const Hardware& hardware, double peakFlops, double flops, double bytes, const GemmShape& shape);

/// The part of `comm` seconds that stays exposed when it runs alongside `compute` seconds of
/// independent work: max(0, comm - compute). Gradient reduction under the backward pass and
/// Megatron's tensor-parallel all-reduce under the weight-gradient matmul both use it.
double exposedAfterOverlap(double comm, double compute);

} // namespace tp
