#pragma once
// What every device holds of an op's tensors, step by step, for the devices view (issue 21):
// teaching how tensor parallelism moves data. The steps follow one training step of the op:
// the collectives that bring its inputs into the layout it reads, its compute (every operand
// as it lies on the mesh), the collectives that take its output to its consumers; then
// backward: the gradients' collectives from its consumers, its weight gradients' own, and
// those into its producers. Each collective is one step over one mesh axis, from the layout
// before it to the layout after it, so a chain (all-to-all over x, then all-gather over y) is
// taken one axis at a time. The collectives are the plan's (explainOp's, the cost model's).
#include <string>
#include <vector>

#include "explain.h"

namespace tp::explain {

/// One tensor as the devices hold it at one moment.
struct TensorPicture {
    std::string tensor;
    std::string role;  ///< "input", "weight", "output", "gradient"
    std::vector<std::int64_t> shape;
    std::string spec;  ///< "[-,y]+x"
    bool partial = false; ///< the devices hold partial sums (over `partialAxes`)
    std::string partialAxes;
    std::vector<DeviceSlice> devices; ///< every device, in mesh order
};

struct DeviceStep {
    enum class Kind { Compute, Collective };
    Kind kind = Kind::Collective;
    std::string phase; ///< forward, backward, gradient
    std::string title; ///< "forward: all-gather over y of 'layers.0/mlp/gelu' for 'layers.0/mlp/fc2'"
    std::string why;   ///< explainOp's reason in words (collectives)
    std::string producer, consumer; ///< an edge's ops (empty for the op's own collectives)
    // A collective:
    std::string collective; ///< all-reduce, all-gather, reduce-scatter, all-to-all
    int axis = -1;          ///< the mesh axis it runs over
    double bytes = 0, seconds = 0;
    TensorPicture before, after;
    // The compute: every operand.
    std::vector<TensorPicture> operands;
};

/// The op's steps under the plan (its strategy and its neighbours'). `folded` is needed when
/// the plan recomputes some block fully (explainOp's). Throws InputError for an op id out of
/// range.
std::vector<DeviceStep> deviceSteps(const CostModel& model, const SearchResult& plan, OpId op, const FoldedGraph* folded = nullptr);

/// Every device's slice of a tensor laid out as `spec` (mesh order; per dim [lo, hi)).
std::vector<DeviceSlice> deviceSlices(const TensorSpec& spec, const std::vector<std::int64_t>& shape, const Mesh& mesh);

} // namespace tp::explain
