#pragma once
// Locks (docs/ARCHITECTURE.md, "core/search"): "GLOB=STRATEGY" parsed and resolved to op and
// strategy index (parseLockRequest, globMatch, resolveLocks in search.h), and the refold a lock
// on some but not all instances of a class needs. Internal to core/search.
#include <set>
#include <vector>

#include "search.h"

namespace tp::search {

/// The ops whose lock is not the same on every instance of their class in `base` (`forced`:
/// per op, its locked strategy or -1). Folding with these as FoldOptions::distinctOps splits
/// the differing instances out; a lock shared by all instances stays a constraint on the class.
std::set<OpId> opsSplitByLocks(const FoldedGraph& base, const std::vector<int>& forced, const std::vector<ResolvedLock>& locks);

} // namespace tp::search
