#pragma once
// Collectives and resharding under the alpha-beta ring model, per mesh axis.
#include <string_view>
#include <vector>

#include "../sharding/spec.h"

namespace tp {

enum class CollectiveKind : std::uint8_t { AllReduce, AllGather, ReduceScatter, AllToAll };
std::string_view collectiveName(CollectiveKind kind); ///< "all-reduce", "all-gather", ...

enum class Phase : std::uint8_t { Forward, Backward, Gradient };
std::string_view phaseName(Phase phase); ///< "forward", "backward", "gradient"

struct CollectiveCall {
    CollectiveKind kind = CollectiveKind::AllReduce;
    int axis = 0;     ///< mesh axis the group runs over
    double bytes = 0; ///< message size per device (the full tensor shard each device holds before/after)
    double seconds = 0;
    Phase phase = Phase::Forward;
    /// The op input (a weight it owns) whose gradient or parameters this call moves; -1 for a
    /// tensor resharded between ops.
    int weightInput = -1;
};

/// Time of one collective over a mesh axis of size g, n bytes per device as defined per kind in
/// the .cpp. With the link's measured bus-bandwidth curve B(n): f n / B(n), f = 2(g-1)/g
/// (all-reduce), (g-1)/g (all-gather, reduce-scatter), (g-1)/g^2 (all-to-all). Without one, the
/// alpha-beta ring f n / B + steps a (2(g-1) steps for all-reduce, g-1 for the others), an
/// all-reduce across nodes taking the tree's 2 ceil(log2 g) steps when fewer. A group spanning
/// nodes with several members per node runs hierarchically: inside the node, then across nodes
/// on 1/members of the message.
double collectiveSeconds(CollectiveKind kind, double bytes, const MeshAxis& axis);

/// The cheapest sequence of collectives turning `from` into `to` for a tensor of the given shape
/// and element size (a local slice is free). Throws std::logic_error only for inconsistent specs.
std::vector<CollectiveCall> planReshard(const TensorSpec& from, const TensorSpec& to, const std::vector<std::int64_t>& shape,
                                        int elementBytes, const Mesh& mesh, Phase phase);

} // namespace tp
