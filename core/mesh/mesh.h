#pragma once
// Device meshes and hardware profiles. Each mesh axis carries the bandwidth and latency of the
// slowest link its device groups cross (the hierarchical communication model of the ATP paper):
// innermost axes fill a node first, so an axis whose groups stay inside a node uses the
// intra-node fabric (NVLink) and one whose groups span nodes the per-GPU share of the network.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "../graph/graph.h"

namespace tp {

struct LinkSpec {
    double bandwidth = 0; ///< bytes/s per GPU per direction (bus bandwidth in ring-collective terms)
    double latency = 0;   ///< seconds per collective step
};

struct Hardware {
    std::string name;
    std::string description;
    std::map<DType, double> peakFlops; ///< dense FLOP/s per dtype
    double matmulEfficiency = 0.8;     ///< achievable fraction of peak for large matmuls
    double hbmBytes = 0;               ///< device memory capacity
    double hbmBandwidth = 0;           ///< bytes/s
    double minKernelSeconds = 0;       ///< floor for tiny kernels (launch overhead)
    int gpusPerNode = 8;
    LinkSpec intraNode; ///< NVLink / NVSwitch
    LinkSpec interNode; ///< per-GPU share of the inter-node network

    double peak(DType dtype) const; ///< peak for the dtype, falling back to bf16
};

struct MeshAxis {
    std::string name; ///< x, y, z from outer to inner
    int size = 1;
    LinkSpec link;
    bool crossesNodes = false;
};

struct Mesh {
    std::vector<MeshAxis> axes;

    int devices() const;
    int rank() const { return static_cast<int>(axes.size()); }
    std::string shapeText() const;                ///< "2x8"
    int axisIndex(const std::string& name) const; ///< -1 when absent
};

/// Parses "8", "2x8", "4x4x8" and assigns links from the hardware. Throws InputError.
Mesh parseMesh(const std::string& text, const Hardware& hardware);
/// Re-derives each axis's link from the hardware (after editing either).
void assignLinks(Mesh& mesh, const Hardware& hardware);

/// Names of the built-in hardware presets (resources/hardware/*.json), sorted.
std::vector<std::string> hardwarePresetNames();
/// A preset by name, or a hardware JSON file by path. Throws InputError naming the field.
Hardware loadHardware(const std::string& nameOrPath);
Hardware hardwareFromJson(const std::string& text, const std::string& origin);

} // namespace tp
