#pragma once
// Decoding (docs/ARCHITECTURE.md, "core/search"): the folded answer of one search at a memory
// price, as stretches of consecutive instances that take the same class table entry
// (ChosenRun) plus the ops solved at the top level; materialize() writes it out as a strategy
// per op, once, for the chosen plan. Internal to core/search.
#include <memory>
#include <tuple>
#include <vector>

#include "ids.h"
#include "search.h"

namespace tp::search {

/// The decoded choice of one class table entry: strategies of the representative's ops, the
/// recompute mode, the per-device memory of one instance (its siblings excluded) and the
/// choices of its absorbed siblings. Identical instances share it; a search's answer holds it
/// by pointer, so it outlives the per-price tables.
struct DecodedEntry {
    std::vector<int> strategies;
    Recompute mode = Recompute::None;
    double memoryBytes = 0;
    std::vector<std::shared_ptr<const DecodedEntry>> siblings; ///< per absorbed sibling position
};

/// Consecutive instances of one class that take the same decoded entry: the search's answer is
/// a list of these (plus the inlined ops), so its size grows with the number of distinct
/// layouts, not with depth.
struct ChosenRun {
    ClassId classId;
    InstanceId firstInstance{0};
    int count = 0;
    std::shared_ptr<const DecodedEntry> entry;
};

/// Appends `count` instances from `first` taking `entry` to a folded answer, extending the last
/// stretch when it is the same class and entry and ends just before `first`.
void appendChosen(std::vector<ChosenRun>& runs, ClassId cls, InstanceId first, int count,
                  std::shared_ptr<const DecodedEntry> entry);

/// One search at a memory price: its result (step time, memory, objective) and the folded
/// choice that materialize() expands into a strategy per op.
struct Attempt {
    SearchResult result;
    std::vector<ChosenRun> runs;
    std::vector<std::tuple<OpId, int, Recompute>> inlinedChoice; ///< ops solved at the top level
    /// Stopped at its bound (PlannerSession::Impl::solveAt's `stopWhen`): no plan, and
    /// `result.objective` only bounds the least at this price from below.
    bool stopped = false;
};

} // namespace tp::search
