#pragma once
// Device meshes and hardware profiles. Each mesh axis carries the bandwidth and latency of the
// slowest link its device groups cross (the hierarchical communication model of the ATP paper):
// innermost axes fill a node first, so an axis whose groups stay inside a node uses the
// intra-node fabric (NVLink) and one whose groups span nodes the per-GPU share of the network.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "../graph/graph.h"

namespace tp {

/// Measured bus bandwidth (nccl-tests "busbw") against message size, as (bytes, bytes/s) points
/// sorted by size. Between points it is interpolated in log(size); below the first point the
/// time stays that of the first point (latency-bound); above the last the bandwidth holds.
struct BandwidthCurve {
    std::vector<std::pair<double, double>> points;
    bool empty() const { return points.empty(); }
    double at(double bytes) const; ///< bus bandwidth in bytes/s for a message of this size
    bool operator==(const BandwidthCurve&) const = default;
};

struct LinkSpec {
    double bandwidth = 0; ///< bytes/s per GPU per direction (bus bandwidth in ring-collective terms)
    double latency = 0;   ///< seconds per collective step
    /// Bus bandwidth by message size per collective ("all-reduce", "all-gather",
    /// "reduce-scatter", "all-to-all"); a kind without a curve uses the all-reduce one, and with
    /// none at all `bandwidth` holds for every size. Looked up by string_view (std::less<>): the
    /// cost model asks per collective (core/cost/collectives.cpp flatSeconds).
    std::map<std::string, BandwidthCurve, std::less<>> busbw;
    bool operator==(const LinkSpec&) const = default;
};

/// How a matmul's achieved rate follows from its shape (core/cost/kernels.h). smCount 0: every
/// matmul runs at Hardware::matmulEfficiency of peak whatever its shape.
struct GemmModel {
    int smCount = 0;              ///< streaming multiprocessors: one output tile per SM per wave
    int tileM = 128, tileN = 256; ///< the output tile of the large-matmul kernels (either orientation)
    double halfEfficiencyK = 0;   ///< a contraction of this length runs at half the large-K rate
    bool operator==(const GemmModel&) const = default;
};

/// How the devices of a node are joined: through a switch (NVSwitch: every group of the node
/// gets the link's bandwidth), by direct links to every peer (MI300X's Infinity Fabric: a group
/// of m devices of a node uses its m - 1 peer links at once, `intraNode` is one link's), or as
/// a torus whose every axis is a ring with links of its own (TPU ICI: like a switch here, each
/// mesh axis at `intraNode`, the axes independent, as ATP models them).
enum class LinkTopology : std::uint8_t { Switch, FullMesh, Torus };
std::string_view linkTopologyName(LinkTopology topology);

struct Hardware {
    std::string name;
    std::string description;
    std::map<DType, double> peakFlops; ///< dense FLOP/s per dtype
    double matmulEfficiency = 0.8;     ///< achievable fraction of peak for large matmuls
    GemmModel gemm;
    double hbmBytes = 0;         ///< device memory capacity
    double hbmBandwidth = 0;     ///< bytes/s
    double hbmEfficiency = 1;    ///< achieved fraction of hbmBandwidth for streaming kernels
    double minKernelSeconds = 0; ///< floor for tiny kernels (launch overhead)
    int gpusPerNode = 8;
    LinkSpec intraNode; ///< NVLink / NVSwitch (a full mesh: one peer link)
    LinkTopology intraTopology = LinkTopology::Switch;
    LinkSpec interNode; ///< per-GPU share of the inter-node network
    /// The fields a calibration measured ("matmul", "hbm", "min_kernel_us",
    /// "intra_node/all-reduce", ...); the rest come from the preset the file was made from.
    std::vector<std::string> calibrated;
    std::string sources; ///< where the figures come from

    double peak(DType dtype) const; ///< peak for the dtype, falling back to bf16
    bool operator==(const Hardware&) const = default;
};

struct MeshAxis {
    std::string name; ///< x, y, z from outer to inner
    int size = 1;
    LinkSpec link; ///< the slowest link a group crosses
    bool crossesNodes = false;
    /// Members of one group inside one node (1 when the group has one device per node): a
    /// group spanning nodes with several members per node reduces hierarchically, inside the
    /// node over `nodeLink` first (core/cost/collectives.cpp).
    int membersPerNode = 1;
    LinkSpec nodeLink;

    bool operator==(const MeshAxis&) const = default;
};

struct Mesh {
    std::vector<MeshAxis> axes;

    int devices() const;
    int rank() const { return static_cast<int>(axes.size()); }
    std::string shapeText() const;                ///< "2x8"
    int axisIndex(const std::string& name) const; ///< -1 when absent

    bool operator==(const Mesh&) const = default;
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
/// The hardware as JSON text in the format hardwareFromJson reads (docs/formats.md), pretty
/// printed; reading it back gives h (to the rounding of the unit conversions).
std::string hardwareToJsonText(const Hardware& hardware);

} // namespace tp
