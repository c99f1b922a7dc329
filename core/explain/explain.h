#pragma once
// Explain a plan, for teaching and for trust: how one op's operands lie on the mesh, which
// collectives surround it and why, what it costs, and what every other candidate strategy
// would cost instead ("why not"); and for a whole plan, what changed against another plan per
// block class and per component. Plain structs; the CLI prints them, the GUI panel draws them.
// Every figure is taken from the CostModel that made the plan, so they add up to its Breakdown.
#include <map>
#include <string>
#include <vector>

#include "../cost/cost_model.h"
#include "../fold/fold.h"
#include "../search/search.h"

namespace tp::explain {

/// Which slice of an operand one device holds: per tensor dim [lo, hi).
struct DeviceSlice {
    std::vector<int> coords; ///< mesh coordinates, axis 0 first
    std::vector<std::pair<std::int64_t, std::int64_t>> ranges;
};

struct OperandLayout {
    std::string role; ///< "input", "weight" or "output"
    std::string tensor;
    std::vector<std::int64_t> shape;
    std::string spec;                 ///< "[-,-,y]+x"
    std::string words;                ///< "dim 2 (h=1536) split over y into 8 slices of 192; replicated over x"
    std::string picture;              ///< a few lines of ASCII: one bar per split dim
    std::vector<DeviceSlice> devices; ///< every device, in mesh order
};

/// One collective next to the op.
struct CollectiveStep {
    std::string kind; ///< all-reduce, all-gather, reduce-scatter, all-to-all
    std::string axis;
    std::string phase;    ///< forward, backward, gradient
    double bytes = 0;     ///< message size per device
    double seconds = 0;   ///< the cost model's time of this call
    std::string tensor;   ///< the tensor it moves (the weight for a gradient all-reduce)
    std::string producer; ///< op before it ("" for a gradient all-reduce)
    std::string consumer; ///< op after it ("" for a gradient all-reduce)
    std::string fromSpec, toSpec;
    std::string why;     ///< in words
    std::string formula; ///< "2(g-1)/g x 384.00 MiB / 235 GB/s = 2.860 ms"
};

/// Cost components of one op (or a sum of ops), per device per step.
struct Components {
    double stepSeconds = 0; ///< compute + own comm + exposed time of the edges into the op(s)
    double computeSeconds = 0;
    double commSeconds = 0;                   ///< own + edges into the op(s), before overlap
    std::map<std::string, double> commByKind; ///< by collective name
    double memoryBytes = 0;
};

struct WhyNot {
    int strategyIndex = 0; ///< index into CostModel::strategies(op)
    std::string strategy;  ///< text form
    bool chosen = false;
    /// Differences against the chosen strategy, the neighbours' strategies held fixed (for the
    /// edges into the op AND the edges from it to its consumers): candidate minus chosen.
    Components delta;
    /// The search's objective change: delta.stepSeconds + lambda * delta.memoryBytes, with the
    /// plan's memory price lambda (0 when memory did not constrain it). A searched plan minimises
    /// this, so a candidate may be faster yet rejected for its memory.
    double objectiveDelta = 0;
};

/// One candidate of an op, its neighbours' strategies held fixed: the op's node cost and the
/// edges into it (as evaluate charges them) plus the edges out of it into its consumers, with
/// every collective call on them. WhyNot::delta is the difference of two of these; tpstudio's
/// candidate table shows them.
struct CandidateCost {
    int strategyIndex = 0; ///< index into CostModel::strategies(op)
    std::string strategy;  ///< text form
    Components local;
    std::vector<CollectiveCall> collectives; ///< the op's own, then into it, then out of it
    double objective = 0;                    ///< local.stepSeconds + lambda * local.memoryBytes
};

struct OpExplanation {
    std::string op, kind, einsum, strategy, block;
    struct Loop {
        char label;
        std::int64_t size;
        std::string role;
        std::string axes;
    };
    std::vector<Loop> loops;
    std::vector<OperandLayout> operands;
    std::vector<CollectiveStep> incoming; ///< edges into the op (charged to it)
    std::vector<CollectiveStep> own;      ///< the op's own (weight-gradient all-reduce)
    std::vector<CollectiveStep> outgoing; ///< edges to its consumers (charged to them)
    /// Equal to the Breakdown's OpBreakdown of this op.
    double computeSeconds = 0, commSeconds = 0, memoryBytes = 0;
    /// Of commSeconds, what overlap leaves on the step (tpstudio's candidate table's Comm).
    double exposedCommSeconds = 0;
    double lambda = 0;          ///< the plan's memory price (seconds per byte)
    std::vector<WhyNot> whyNot; ///< every candidate: the chosen one, then by objective delta
    std::string summary;        ///< a few sentences
};

/// The op named `name`: an exact name, else the first op (topological order) matching it as a
/// glob. Throws InputError naming it when none matches.
OpId findOp(const Graph& graph, const std::string& name);

OpExplanation explainOp(const CostModel& model, const SearchResult& plan, OpId op, const FoldedGraph* folded = nullptr);

/// " (X of it not hidden by overlap)" where overlap hides part of the op's communication,
/// else "": its charged and exposed figures side by side (summary, tpplan explain).
std::string exposedInWords(const OpExplanation& x);

/// Components of every op of a plan (node cost + edges into it), from the same model terms
/// that evaluatePlan sums (core/search/evaluate.h): compute, comm and memory add up to its
/// Breakdown's totals. `folded` may be null when no op recomputes fully.
std::vector<Components> opComponents(const CostModel& model, const FoldedGraph* folded, const SearchResult& plan);

/// Every candidate of `op` (in CostModel::strategies order) against the plan's other choices,
/// with what the kept inputs of fully recomputed blocks change (`folded` may be null when no op
/// recomputes fully).
std::vector<CandidateCost> costCandidates(const CostModel& model, const SearchResult& plan, OpId op, const FoldedGraph* folded);

struct BlockDiff {
    std::string block; ///< class label
    int instances = 0;
    int opsChanged = 0; ///< ops of the class (all instances) whose strategy differs
    Components base, other;
};

struct OpChange {
    std::string op, before, after;
    /// The op's components in each plan (node cost and the edges into it, one instance): their
    /// difference is what the change costs at this op.
    Components base, other;
};

struct PlanDiff {
    std::string baseMethod, otherMethod;
    Components base, other;        ///< sums over all ops (== the Breakdowns' compute/comm)
    std::vector<BlockDiff> blocks; ///< in class order
    std::vector<OpChange> changes; ///< representative ops (first instance of a class) that differ
};

/// `base` costed by `model`, `other` by `otherModel` when given (a baseline under the settings it
/// chose itself: its ZeRO stage and micro-batch, as the breakdown shows it), else by `model`.
/// Both models must be of the same graph and mesh (their strategy lists are the same).
PlanDiff comparePlans(const CostModel& model, const FoldedGraph& folded, const SearchResult& base, const SearchResult& other,
                      const CostModel* otherModel = nullptr);

} // namespace tp::explain
