#pragma once
// The Alpa-style peer: the whole UNFOLDED graph as one integer linear program, solved with
// COIN-OR CBC. Alpa (Zheng et al., OSDI 2022) picks one strategy per op with binaries x and
// charges resharding on every edge through pair variables e; this is that program over exactly
// the CostModel terms our search minimises (node seconds + edge exposedSeconds), so both must
// find the same optimum and only their running times differ. Used by the benchmark and tests.
//
// Formulation (why this one): for each op, x[op][s] binary with sum_s x = 1. Each producer ->
// consumer pair with a non-separable cost matrix gets continuous e[p][q] >= 0 with the
// marginal ("local polytope") constraints sum_q e[p][q] = x_prod[p], sum_p e[p][q] = x_cons[q].
// Integral x force integral e, so e need not be integer. Its LP relaxation is exact on
// tree-shaped graphs and close on the low-treewidth graphs of networks, so CBC closes the
// program near the root. The textbook linearisation (e >= x_p + x_q - 1) needs e only for
// costly pairs, but its relaxation is weak (x = 1/n everywhere zeroes every e), so CBC must
// branch a lot; it is kept as an option to measure exactly that.
//
// Before building the program, each edge matrix is reparametrised (row minima moved to the
// producer, column minima to the consumer); edges that become zero vanish. Ops with one
// candidate (or locked) are constants. Both steps leave the optimum unchanged.
//
// CBC 2.10 is not thread-safe (its driver keeps static state): one solve at a time.
#include <string>
#include <vector>

#include "../cost/cost_model.h"
#include "../search/search.h"

namespace tp {

enum class IlpFormulation : std::uint8_t {
    Marginal,   ///< e[p][q] with row/column sums equal to x (Alpa's formulation)
    Linearized, ///< e[p][q] >= x_p + x_q - 1 for costly pairs only
};

enum class IlpStatus : std::uint8_t {
    Optimal,         ///< proven optimal (within CBC's tolerances; the cost is re-evaluated exactly)
    TimeLimit,       ///< stopped by the time limit with a feasible plan; see gap
    TimeLimitNoPlan, ///< stopped by the time limit before any feasible plan
    Infeasible,      ///< no assignment meets the memory limit and the locks
    Failed,          ///< CBC gave up for another reason
};
std::string_view ilpStatusName(IlpStatus status);

struct IlpOptions {
    double memoryLimitBytes = -1; ///< per device; 0: the hardware's capacity; negative: no limit
    double timeLimitSeconds = 60; ///< wall-clock limit of the CBC solve
    IlpFormulation formulation = IlpFormulation::Marginal;
    std::vector<ResolvedLock> locks;
    /// A feasible starting plan for CBC (strategy per op); empty: none (cold, as Alpa runs it).
    std::vector<int> initialStrategyOfOp;
    int logLevel = 0; ///< CBC's log level (0 silent)
};

struct IlpResult {
    IlpStatus status = IlpStatus::Failed;
    std::vector<int> strategyOfOp; ///< index into CostModel::strategies(op); empty without a plan
    /// The plan's cost under the CostModel (sum of node seconds and edge exposedSeconds),
    /// recomputed from strategyOfOp, not read back from CBC's floating-point objective.
    double objective = 0;
    double memoryBytes = 0; ///< sum of the plan's opCost memoryBytes
    double bestBound = 0;   ///< CBC's lower bound on the optimum, in seconds
    double gap = 0;         ///< (objective - bestBound) / objective; 0 when optimal
    double buildMs = 0;     ///< costing every edge and building the program
    double solveMs = 0;     ///< the CBC solve
    int variables = 0;
    int integerVariables = 0;
    int constraints = 0;
    long long nonzeros = 0;
    int pairFactors = 0; ///< producer/consumer pairs left after reparametrisation
};

/// Builds and solves the program for the model's graph. Throws InputError for a lock index out
/// of range; an infeasible memory limit is a status, not an exception.
IlpResult solveIlp(const CostModel& model, const IlpOptions& options = {});

} // namespace tp
