#include "locks.h"

#include <algorithm>
#include <map>

#include "../util/error.h"

namespace tp {

LockRequest parseLockRequest(const std::string& text)
{
    const auto eq = text.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
        throw InputError("--lock '" + text + "': expected GLOB=STRATEGY, e.g. 'layers.*/mlp/fc1=f=y'");
    return {text.substr(0, eq), text.substr(eq + 1)};
}

bool globMatch(const std::string& pattern, const std::string& name)
{
    // Iterative wildcard match with backtracking to the last '*'.
    size_t p = 0, n = 0, star = std::string::npos, mark = 0;
    while (n < name.size()) {
        if (p < pattern.size() && pattern[p] == '*') {
            star = p++;
            mark = n;
        } else if (p < pattern.size() && pattern[p] == name[n]) {
            ++p;
            ++n;
        } else if (star != std::string::npos) {
            p = star + 1;
            n = ++mark;
        } else {
            return false;
        }
    }
    while (p < pattern.size() && pattern[p] == '*') ++p;
    return p == pattern.size();
}

namespace {

std::string lockLabel(const LockRequest& lock) { return "lock '" + lock.pattern + "=" + lock.strategy + "'"; }

InputError noMatch(const LockRequest& lock)
{
    return InputError(lockLabel(lock) + ": no op matches '" + lock.pattern + "'");
}

} // namespace

void requireLockMatches(const Graph& graph, const std::vector<LockRequest>& locks)
{
    for (const auto& lock : locks)
        if (std::none_of(graph.ops.begin(), graph.ops.end(), [&](const Op& op) { return globMatch(lock.pattern, op.name); }))
            throw noMatch(lock);
}

std::vector<ResolvedLock> resolveLocks(const CostModel& model, const std::vector<LockRequest>& locks, bool requireMatch)
{
    std::map<OpId, int> chosen;
    for (const auto& lock : locks) {
        const std::string label = lockLabel(lock);
        bool matched = false;
        for (const auto& op : model.graph().ops) {
            if (!globMatch(lock.pattern, op.name)) continue;
            matched = true;
            OpStrategy st;
            try {
                st = parseStrategy(lock.strategy, model.signature(op.id), model.mesh());
            } catch (const InputError& e) {
                throw InputError(label + ": op '" + op.name + "': " + e.what());
            }
            const int index = model.findStrategy(op.id, st);
            if (index < 0)
                throw InputError(label + ": op '" + op.name + "': strategy '" + lock.strategy + "' is not a candidate on mesh " +
                                 model.mesh().shapeText());
            chosen[op.id] = index; // a later lock overrides an earlier one on the same op
        }
        if (!matched && requireMatch) throw noMatch(lock);
    }
    std::vector<ResolvedLock> out;
    for (const auto& [op, s] : chosen) out.push_back({op, s});
    return out;
}

namespace search {

std::set<OpId> opsSplitByLocks(const FoldedGraph& base, const std::vector<int>& forced, const std::vector<ResolvedLock>& locks)
{
    std::set<OpId> split;
    for (const auto& l : locks) {
        const auto& bc = base.classes[static_cast<size_t>(base.classOfOp[static_cast<size_t>(l.op)])];
        const auto& inst = bc.instances[static_cast<size_t>(base.instanceOfOp[static_cast<size_t>(l.op)])];
        const size_t pos = static_cast<size_t>(std::find(inst.ops.begin(), inst.ops.end(), l.op) - inst.ops.begin());
        bool uniform = true;
        for (const auto& other : bc.instances)
            if (forced[static_cast<size_t>(other.ops[pos])] != l.strategy) uniform = false;
        if (!uniform) split.insert(l.op);
    }
    return split;
}

} // namespace search
} // namespace tp
