#pragma once
// Folding (the TAPAS idea): find the unique substructures of a graph and every instance of each,
// so that the search solves each block class once and stitches the results. Names are never
// trusted for structure (they may be missing, random or misleading); they only make labels.
//
// Blocks come from repeats of the op sequence in topological order (found with structural
// labels, confirmed op by op), cut where the fewest tensors cross; the irregular rest is cut at
// single-tensor separators; parallel identical branches feeding one join (MoE experts) become
// sibling instances of their own class. Linear in graph size.
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "../graph/graph.h"

namespace tp {

/// One occurrence of a block. ops[i] corresponds to ops[i] of the class's representative
/// (the op bijection); inputs and outputs are ordered so that position k plays the same role in
/// every instance of the class.
struct BlockInstance {
    std::vector<OpId> ops;         ///< in topological order, matching the representative's
    std::vector<TensorId> inputs;  ///< read inside, produced outside or graph inputs (no weights)
    std::vector<TensorId> outputs; ///< produced inside and read outside, or graph outputs
};

/// A set of structurally identical blocks: same op kinds, equations, attrs, shapes, dtypes and
/// edges, op by op.
struct BlockClass {
    int id = -1;
    std::string label;                    ///< readable, e.g. "layers.*"; from names when they agree
    std::vector<BlockInstance> instances; ///< in topological order; instances[0] is the representative
    bool distinct = false;                ///< split off because it holds an op of FoldOptions::distinctOps
    int opsPerInstance() const;
};

/// A maximal chain of consecutive instances of one class: instance i's outputs feed i+1's inputs.
/// Every top-level instance is in exactly one run (count 1 for a lone instance).
struct Run {
    int classId = -1;
    int firstInstance = 0;
    int count = 0;
};

/// Parallel identical branches (MoE experts) inside one enclosing instance: they read outputs of
/// the same ops, do not depend on each other, and all feed the same join op of the parent.
struct SiblingGroup {
    int classId = -1;
    std::vector<int> instances;
    int parentClass = -1; ///< the instance that encloses them (holds their fan-out and join)
    int parentInstance = -1;
};

struct FoldedGraph {
    std::vector<BlockClass> classes; ///< ids are indices, in order of first appearance
    std::vector<int> classOfOp;      ///< per OpId
    std::vector<int> instanceOfOp;   ///< per OpId: index into classes[classOfOp].instances
    std::vector<Run> runs;           ///< over the top-level instances, in topological order
    std::vector<SiblingGroup> siblings;
    /// Every instance once, (classId, instanceIndex), ordered by the topological position of its
    /// first op. Top-level instances appear in a topological order; a sibling follows its parent
    /// (which both feeds it and reads it).
    std::vector<std::pair<int, int>> sequence;

    int totalOps() const;
    int searchedOps() const;  ///< sum over classes of opsPerInstance
    double foldRatio() const; ///< total ops / searched ops (1 for an empty graph)
    /// The class with the most ops over all its instances (a transformer's layer), the first
    /// of equals; null when there is none.
    const BlockClass* largestClass() const;
};

struct FoldOptions {
    /// Ops that must not be merged with their peers: the whole instance holding such an op becomes
    /// a class of its own (per-instance locks in the search).
    std::set<OpId> distinctOps;
    /// Rounds of neighbour refinement of the structural labels used to find repeat periods.
    int refinementRounds = 3;
};

/// Folds a graph. Deterministic. Throws InputError on a malformed graph (naming the op) or an
/// option out of range.
FoldedGraph foldGraph(const Graph& graph, const FoldOptions& options = {});

/// Each op's counterpart in the first instance of its block class (itself when it is in none):
/// ops with one counterpart have identical costs and identical edges.
std::vector<OpId> canonicalOps(const FoldedGraph& folded);

/// Checks every invariant of a fold against its graph: each op in exactly one instance and the
/// per-op tables agree; every instance matches its representative op by op (kind, equation,
/// attrs, shapes, dtypes, edges); inputs and outputs are the true boundary in canonical order;
/// runs are chains of consecutive instances; siblings and the sequence are consistent.
/// Throws std::logic_error naming the class, instance and op at fault.
void checkFold(const Graph& graph, const FoldedGraph& folded);

} // namespace tp
