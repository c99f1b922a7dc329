#pragma once
// How a tensor lies on a mesh: per tensor dim the mesh axes that split it (major first), and
// the axes over which each device holds a partial sum. Text form (docs/ARCHITECTURE.md, "core/mesh,
// core/sharding"): "[-,-,y]", "[x,-,-]", "[-,-,x*y]", "[-,-,-]+x", "[-,-]+x+y".
#include <compare>
#include <cstdint>
#include <string>
#include <vector>

#include "../mesh/mesh.h"

namespace tp {

using AxisMask = std::uint32_t; ///< bit a: mesh axis a

struct TensorSpec {
    std::vector<std::vector<int>> dims; ///< per tensor dim: splitting axes, major first
    AxisMask partial = 0;

    static TensorSpec replicated(size_t rank);
    AxisMask splitAxes() const; ///< axes that split some dim
    bool isReplicated() const { return splitAxes() == 0 && partial == 0; }
    /// Elements per device of a tensor of this shape.
    std::int64_t shardNumel(const std::vector<std::int64_t>& shape, const Mesh& mesh) const;
    /// Number of pieces dim d is cut into.
    std::int64_t splitsOf(size_t dim, const Mesh& mesh) const;

    auto operator<=>(const TensorSpec&) const = default;
};

std::string specToString(const TensorSpec& spec, const Mesh& mesh);
/// Parses the text form for a tensor of the given shape; checks axis names, that each axis is
/// used once and that split dims divide. Throws InputError saying which part is wrong.
TensorSpec parseSpec(const std::string& text, const std::vector<std::int64_t>& shape, const Mesh& mesh);

} // namespace tp
