#pragma once
// Class tables (docs/ARCHITECTURE.md, "core/search"): a block class solved once per memory price
// and recompute mode, its ops' strategies eliminated with the boundary kept, leaving a table
// over the specs of its boundary tensors (min over the modes). Internal to core/search.
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "../cost/cost_model.h"
#include "factor.h"
#include "ids.h"

namespace tp::search {

/// The recompute modes a block chooses among at a memory price: recomputing only pays when
/// memory has a price, and only in training.
std::vector<Recompute> recomputeModes(double lambda, bool recomputeAllowed, bool training);

/// One class solved under one recompute mode: the elimination over its variables with the
/// boundary kept, converted into a table over boundary specs.
struct ModeSolve {
    std::vector<int> domains;  ///< per variable of the class factor graph
    std::vector<int> keepVars; ///< ascending
    EliminationResult elimination;
    std::vector<std::size_t> keepEntry; ///< per table entry: the remaining-factor index it came from
    std::vector<double> table;          ///< over ClassTable::dims

    /// What it holds in memory (the tables and the elimination's argmin records).
    double bytes() const;
};

/// What a class table's boundary is made of, a property of the fold (not of the price): the
/// spec domain of each input position (empty: no variable, or absorbed from a sibling) and the
/// output positions that are table dims.
struct ClassBoundary {
    std::vector<std::vector<TensorSpec>> inputDomains;
    std::vector<int> outputs;
};

/// The solved table of a block class and how to decode it.
struct ClassTable {
    ClassId classId;
    int slot = 0; ///< which memory price of a split solve (0: the base price, 1: the high one)
    std::vector<std::vector<TensorSpec>> inputDomains;  ///< per input position; empty: no variable
    std::vector<std::vector<TensorSpec>> outputDomains; ///< per entry of outputPos
    std::vector<int> outputPos;                         ///< instance output positions that are table dims
    std::vector<int> dims;                              ///< inputs with a variable, then outputs
    std::vector<int> inputDim;                          ///< per input position: index into dims or -1
    std::vector<double> table;                          ///< min over modes
    std::vector<std::uint8_t> modeOfEntry;              ///< which ModeSolve won
    std::vector<std::shared_ptr<const ModeSolve>> modes;
    std::vector<Recompute> modeKinds;

    // Variable layout of the class factor graph: op i -> var i; input position k -> inputVar[k];
    // for each absorbed sibling instance s: its table dims -> siblingVars[s][d].
    int opCount = 0;
    std::vector<int> inputVar;
    std::vector<std::vector<int>> siblingVars;
    std::vector<ClassId> siblingClass;    ///< class of each absorbed sibling instance
    std::vector<InstanceId> siblingIndex; ///< its instance (in the representative's groups)

    /// The first dim of the outputs (after the inputs that have a variable).
    std::size_t firstOutputDim() const { return dims.size() - outputPos.size(); }
};

/// Per entry, the minimum over the modes' tables and which mode reaches it (the first on ties).
void takeMinOverModes(ClassTable& ct);

/// Solved modes by key, bounded in bytes: on a 3D mesh one wide class table per price can take
/// hundreds of MB. The oldest go first (an edit's re-solve mostly wants the latest prices);
/// tables in use stay alive through their ClassTable until the solve that uses them ends.
class ModeCache {
public:
    explicit ModeCache(double maxBytes = 3.0 * 1024 * 1024 * 1024, std::size_t maxEntries = 4096) :
        maxBytes_(maxBytes),
        maxEntries_(maxEntries)
    {}

    std::shared_ptr<const ModeSolve> find(const std::string& key) const;
    void remember(const std::string& key, std::shared_ptr<const ModeSolve> solve);
    double bytes() const { return bytes_; }
    std::size_t size() const { return entries_.size(); }

private:
    double maxBytes_;
    std::size_t maxEntries_;
    std::map<std::string, std::shared_ptr<const ModeSolve>> entries_;
    std::deque<std::string> order_; ///< keys, oldest first
    double bytes_ = 0;
};

} // namespace tp::search
