#include "classify.h"

#include <algorithm>
#include <array>

namespace tp {

std::string_view shardClassName(ShardClass c)
{
    static constexpr std::array<std::string_view, kShardClassCount> names{
        "replicated",      "data-parallel", "sequence-parallel", "feature-split",
        "column-parallel", "row-parallel",  "expert-parallel",   "mixed"};
    return names[static_cast<size_t>(c)];
}

std::string_view shardClassColor(ShardClass c)
{
    // grey, green, teal, light blue, blue, orange, gold, purple
    static constexpr std::array<std::string_view, kShardClassCount> colors{"#c8cbd0", "#8fd08a", "#7ccfc4", "#b9d6f2",
                                                                           "#6fa8e8", "#f4a55a", "#e8cf5a", "#b69ddb"};
    return colors[static_cast<size_t>(c)];
}

namespace {

bool indexes(const OperandIndexing& operand, int loop)
{
    for (const auto& group : operand.dims)
        if (std::find(group.begin(), group.end(), loop) != group.end()) return true;
    return false;
}

bool fact(const std::vector<bool>& facts, size_t k) { return k < facts.size() && facts[k]; }

// One activation operand: how it is indexed, whether its dim 0 is the graph's batch, whether
// its dim 1 is the experts of routed tokens.
struct Activation {
    const OperandIndexing* indexing;
    bool batchLeading;
    bool isInput;
    bool routed;
};

bool atDim(const OperandIndexing& operand, size_t dim, int loop)
{
    return dim < operand.dims.size() && !operand.dims[dim].empty() && operand.dims[dim][0] == loop;
}

// The token axis of an activation laid out [batch, ..., tokens, features]: the dim before the
// last, when the tensor has a dim besides the batch and the features; -1 when it has none.
int tokenDim(const Activation& a)
{
    const int rank = static_cast<int>(a.indexing->dims.size());
    return rank - (a.batchLeading ? 1 : 0) >= 2 ? rank - 2 : -1;
}

// The kind of a split loop that indexes no weight, from its place in the activation operands.
ShardClass batchLikeKind(const std::vector<Activation>& activations, int loop)
{
    for (const Activation& a : activations)
        if (a.routed && atDim(*a.indexing, 1, loop)) return ShardClass::Expert;
    for (const Activation& a : activations)
        if (a.batchLeading && atDim(*a.indexing, 0, loop)) return ShardClass::Data;
    for (const Activation& a : activations)
        if (const int d = tokenDim(a); d >= 0 && atDim(*a.indexing, static_cast<size_t>(d), loop)) return ShardClass::Sequence;
    return ShardClass::Feature;
}

ShardClass loopKind(const Signature& sig, const OperandFacts& facts, const std::vector<Activation>& activations, int loop)
{
    bool inWeight = false, weightContracts = false;
    for (size_t k = 0; k < sig.inputs.size(); ++k) {
        if (!fact(facts.weightInput, k) || !indexes(sig.inputs[k], loop)) continue;
        inWeight = true;
        for (size_t l = 0; l < sig.loops.size(); ++l)
            weightContracts =
                weightContracts || (sig.loops[l].role == DimRole::Contracted && indexes(sig.inputs[k], static_cast<int>(l)));
    }
    if (!inWeight) return batchLikeKind(activations, loop);
    const DimRole role = sig.loops[static_cast<size_t>(loop)].role;
    if (role == DimRole::Contracted || role == DimRole::Gather) return ShardClass::Row;
    const bool inActivationInput = std::any_of(activations.begin(), activations.end(),
                                               [&](const Activation& a) { return a.isInput && indexes(*a.indexing, loop); });
    return inActivationInput && weightContracts ? ShardClass::Expert : ShardClass::Column;
}

} // namespace

StrategyClass classifyStrategy(const Signature& sig, const OperandFacts& facts, const OpStrategy& strategy, int meshRank)
{
    StrategyClass out;
    const size_t axes = static_cast<size_t>(std::max(meshRank, 0));
    out.loopClass.assign(sig.loops.size(), ShardClass::Replicated);
    out.axisClass.assign(axes, ShardClass::Replicated);
    out.axisLoop.assign(axes, -1);
    std::vector<Activation> activations;
    for (size_t k = 0; k < sig.inputs.size(); ++k) {
        if (fact(facts.weightInput, k))
            out.hasWeight = true;
        else
            activations.push_back({&sig.inputs[k], fact(facts.batchInput, k), true, fact(facts.routedInput, k)});
    }
    for (size_t k = 0; k < sig.outputs.size(); ++k)
        activations.push_back({&sig.outputs[k], fact(facts.batchOutput, k), false, fact(facts.routedOutput, k)});

    bool anySplit = false;
    ShardClass model = ShardClass::Replicated; // the one non-Data kind seen, Mixed for several
    for (size_t l = 0; l < strategy.loopAxes.size() && l < sig.loops.size(); ++l) {
        if (strategy.loopAxes[l].empty()) continue;
        const ShardClass kind = loopKind(sig, facts, activations, static_cast<int>(l));
        out.loopClass[l] = kind;
        for (int a : strategy.loopAxes[l])
            if (a >= 0 && static_cast<size_t>(a) < axes) {
                out.axisClass[static_cast<size_t>(a)] = kind;
                out.axisLoop[static_cast<size_t>(a)] = static_cast<int>(l);
            }
        anySplit = true;
        if (kind == ShardClass::Data) continue;
        model = model == ShardClass::Replicated || model == kind ? kind : ShardClass::Mixed;
    }
    out.kind = !anySplit ? ShardClass::Replicated : model == ShardClass::Replicated ? ShardClass::Data : model;
    return out;
}

} // namespace tp
