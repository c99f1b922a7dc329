#pragma once
// The iteration space of an op in einsum form. One description drives sharding (which loop
// dims may be split and what a split does to each operand), FLOPs and saved-activation bytes.
//
// Equation grammar: operands separated by ',', inputs and outputs by "->". An operand is a
// sequence of terms, one per tensor dim: a letter names a loop dim, "(nd)" says the tensor dim
// is the row-major merge of loop dims n and d (a reshape), "1" is a size-1 dim bound to no loop.
// "bsh,hf->bsf" is a linear layer; "bs(nd)->bnsd" splits heads out of the hidden dim.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "graph.h"

namespace tp {

enum class DimRole : std::uint8_t {
    Parallel,         ///< indexes the output; a split shards the output
    Contracted,       ///< summed over; a split leaves the output partial (all-reduce later)
    ReducedNonlinear, ///< normalised over (softmax, layer norm); splitting is not allowed
    Gather,           ///< looked up (embedding vocab); a split leaves the output partial
    Spatial,          ///< a window slides over it (conv, pool) or parts are joined; not split
};
std::string_view dimRoleName(DimRole role);

/// Whether a split of a loop dim with this role is allowed by the sharding rules.
bool dimRoleSplittable(DimRole role);
/// Whether splitting a dim with this role leaves outputs holding partial sums.
bool dimRoleMakesPartial(DimRole role);

struct LoopDim {
    char label = '?';
    std::int64_t size = 1;
    DimRole role = DimRole::Parallel;
};

/// How one tensor is indexed: per tensor dim, the loop dims (indices into Signature::loops),
/// outermost first. An empty group is a size-1 dim.
struct OperandIndexing {
    std::vector<std::vector<int>> dims;
};

struct Signature {
    std::string equation;
    std::vector<LoopDim> loops;
    std::vector<OperandIndexing> inputs;
    std::vector<OperandIndexing> outputs;
    /// The share of the iteration space computed: 1, or a sliding window's band (opSignature).
    double density = 1;

    /// Product of all loop sizes times the density (the points of the iteration space computed).
    double points() const;
    int loopIndex(char label) const; ///< -1 when absent
};

/// Parse an equation and bind loop sizes from the operand shapes. Roles default to Parallel for
/// loops that index an output and Contracted otherwise. Loops in `spatialLabels` take their size
/// from the outputs and are not checked against the inputs (strided windows).
/// Throws InputError (message without op context) on malformed text or inconsistent shapes.
Signature parseSignature(std::string_view equation, const std::vector<std::vector<std::int64_t>>& inputShapes,
                         const std::vector<std::vector<std::int64_t>>& outputShapes, std::string_view spatialLabels = {});

} // namespace tp
