#include "ilp.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <string>

#include <Cbc_C_Interface.h>

#include "../search/evaluate.h"
#include "../util/error.h"

namespace tp {

namespace {

constexpr double kUnbounded = std::numeric_limits<double>::infinity();
// Memory rows in GiB keep the constraint's coefficients near 1 (bytes would be ~1e9).
constexpr double kBytesPerMemoryUnit = 1024.0 * 1024.0 * 1024.0;
// Objective coefficients are scaled so the program's optimum is near this value: CBC's absolute
// tolerances (cutoff increment 1e-5, LP tolerances 1e-7) then sit ~1e-11 below the optimum,
// whatever the model's magnitude (a toy graph's step is microseconds, GPT-3's seconds).
constexpr double kTargetScaledObjective = 1e6;

double elapsedMs(std::chrono::steady_clock::time_point start)
{
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

/// The tensor's position among its producer's outputs.
int outputSlot(const Graph& graph, OpId producer, TensorId tensor)
{
    const auto& outs = graph.op(producer).outputs;
    return static_cast<int>(std::find(outs.begin(), outs.end(), tensor) - outs.begin());
}

/// A non-separable cost between the strategies of a producer and a consumer (all inputs of the
/// consumer fed by that producer summed), after reparametrisation: entries >= 0 or infinite.
struct PairFactor {
    OpId producer = -1;
    OpId consumer = -1;
    int rows = 0;             ///< allowed strategies of the producer
    int cols = 0;             ///< allowed strategies of the consumer
    std::vector<double> cost; ///< rows x cols, row-major, seconds
};

/// The program before it becomes matrices: the candidate strategies still open per op, their
/// node costs (with separable edge parts folded in), and the non-separable pairs.
struct Reduced {
    std::vector<std::vector<int>> allowed;   ///< per op: strategy indices
    std::vector<std::vector<double>> unary;  ///< per op, per allowed index: seconds
    std::vector<std::vector<double>> memory; ///< per op, per allowed index: bytes
    std::vector<PairFactor> pairs;
    double constantSeconds = 0;
};

Reduced reduce(const CostModel& model, const IlpOptions& options)
{
    const Graph& g = model.graph();
    const size_t n = g.ops.size();
    Reduced r;
    r.allowed.resize(n);
    r.unary.resize(n);
    r.memory.resize(n);
    std::vector<int> lockedStrategy(n, -1);
    for (const auto& lock : options.locks) {
        if (lock.op < 0 || static_cast<size_t>(lock.op) >= n)
            throw InputError("ILP lock: op id " + std::to_string(lock.op) + " is not in the graph");
        const int count = static_cast<int>(model.strategies(lock.op).size());
        if (lock.strategy < 0 || lock.strategy >= count)
            throw InputError("ILP lock on '" + g.op(lock.op).name + "': strategy index " + std::to_string(lock.strategy) +
                             " out of range");
        lockedStrategy[static_cast<size_t>(lock.op)] = lock.strategy;
    }
    for (size_t op = 0; op < n; ++op) {
        const OpId id = static_cast<OpId>(op);
        const int count = static_cast<int>(model.strategies(id).size());
        if (lockedStrategy[op] >= 0)
            r.allowed[op] = {lockedStrategy[op]};
        else
            for (int s = 0; s < count; ++s) r.allowed[op].push_back(s);
        for (int s : r.allowed[op]) {
            const OpCost& c = model.opCost(id, s);
            r.unary[op].push_back(c.seconds());
            r.memory[op].push_back(c.memoryBytes());
        }
    }

    const auto producers = g.producers();
    for (size_t c = 0; c < n; ++c) {
        const Op& consumer = g.ops[c];
        // One matrix per producer: a consumer reading two outputs of one op (or one tensor
        // twice) has a single pair factor with both edges summed.
        std::map<OpId, size_t> factorOfProducer;
        for (size_t k = 0; k < consumer.inputs.size(); ++k) {
            const OpId p = producers[static_cast<size_t>(consumer.inputs[k])];
            if (p < 0) continue; // graph inputs and weights: no resharding
            const int slot = outputSlot(g, p, consumer.inputs[k]);
            auto [it, fresh] = factorOfProducer.try_emplace(p, r.pairs.size());
            if (fresh) {
                PairFactor f;
                f.producer = p;
                f.consumer = static_cast<OpId>(c);
                f.rows = static_cast<int>(r.allowed[static_cast<size_t>(p)].size());
                f.cols = static_cast<int>(r.allowed[c].size());
                f.cost.assign(static_cast<size_t>(f.rows) * static_cast<size_t>(f.cols), 0.0);
                r.pairs.push_back(std::move(f));
            }
            PairFactor& f = r.pairs[it->second];
            for (int a = 0; a < f.rows; ++a) {
                const TensorSpec& produced = model.outputSpec(p, r.allowed[static_cast<size_t>(p)][static_cast<size_t>(a)], slot);
                for (int b = 0; b < f.cols; ++b)
                    f.cost[static_cast<size_t>(a * f.cols + b)] +=
                        model.edgeCost(&produced, static_cast<OpId>(c), static_cast<int>(k), r.allowed[c][static_cast<size_t>(b)])
                            .exposedSeconds;
            }
        }
    }

    // Reparametrise: min over each row into the producer's node cost, then min over each column
    // into the consumer's. Every plan pays the same total, so the optimum is unchanged, and a
    // separable matrix (e.g. one side has a single candidate) becomes all zeros and is dropped.
    std::vector<PairFactor> kept;
    for (PairFactor& f : r.pairs) {
        auto& pu = r.unary[static_cast<size_t>(f.producer)];
        auto& cu = r.unary[static_cast<size_t>(f.consumer)];
        std::vector<bool> deadRow(static_cast<size_t>(f.rows), false), deadCol(static_cast<size_t>(f.cols), false);
        for (int a = 0; a < f.rows; ++a) {
            double* row = &f.cost[static_cast<size_t>(a * f.cols)];
            const double m = *std::min_element(row, row + f.cols);
            pu[static_cast<size_t>(a)] += m;
            if (!std::isfinite(m)) deadRow[static_cast<size_t>(a)] = true; // that strategy is impossible
            for (int b = 0; b < f.cols; ++b) row[b] = deadRow[static_cast<size_t>(a)] ? 0.0 : row[b] - m;
        }
        for (int b = 0; b < f.cols; ++b) {
            double m = kUnbounded;
            for (int a = 0; a < f.rows; ++a)
                if (!deadRow[static_cast<size_t>(a)]) m = std::min(m, f.cost[static_cast<size_t>(a * f.cols + b)]);
            if (!std::isfinite(m)) {
                deadCol[static_cast<size_t>(b)] = true;
                cu[static_cast<size_t>(b)] = kUnbounded;
            } else {
                cu[static_cast<size_t>(b)] += m;
            }
            for (int a = 0; a < f.rows; ++a) {
                double& v = f.cost[static_cast<size_t>(a * f.cols + b)];
                v = deadCol[static_cast<size_t>(b)] || deadRow[static_cast<size_t>(a)] ? 0.0 : v - m;
            }
        }
        const bool separable = std::all_of(f.cost.begin(), f.cost.end(), [](double v) { return v == 0.0; });
        if (!separable) kept.push_back(std::move(f));
    }
    r.pairs = std::move(kept);

    // Ops left with one candidate are constants.
    for (size_t op = 0; op < n; ++op)
        if (r.allowed[op].size() == 1) r.constantSeconds += r.unary[op][0];
    return r;
}

/// Column-wise sparse matrix assembled from (row, column, value) entries.
struct ProgramBuilder {
    std::vector<double> colLower, colUpper, objective;
    std::vector<bool> integer;
    std::vector<double> rowLower, rowUpper;
    std::vector<std::vector<std::pair<int, double>>> columns;

    int addColumn(double lower, double upper, double cost, bool isInteger)
    {
        colLower.push_back(lower);
        colUpper.push_back(upper);
        objective.push_back(cost);
        integer.push_back(isInteger);
        columns.emplace_back();
        return static_cast<int>(columns.size()) - 1;
    }
    int addRow(double lower, double upper)
    {
        rowLower.push_back(lower);
        rowUpper.push_back(upper);
        return static_cast<int>(rowLower.size()) - 1;
    }
    void set(int row, int col, double value) { columns[static_cast<size_t>(col)].emplace_back(row, value); }
};

struct CbcModelDeleter {
    void operator()(Cbc_Model* m) const { Cbc_deleteModel(m); }
};

} // namespace

std::string_view ilpStatusName(IlpStatus status)
{
    switch (status) {
    case IlpStatus::Optimal:
        return "optimal";
    case IlpStatus::TimeLimit:
        return "time_limit";
    case IlpStatus::TimeLimitNoPlan:
        return "time_limit_no_plan";
    case IlpStatus::Infeasible:
        return "infeasible";
    case IlpStatus::Failed:
        return "failed";
    }
    return "failed";
}

namespace {

/// The program over the reduced problem: one binary per allowed strategy of each op with a
/// choice, the pair factors in the chosen formulation, and the memory row.
struct Program {
    ProgramBuilder pb;
    std::vector<int> firstColumn; ///< x[op][k] = firstColumn[op] + k, for ops with a choice; -1 otherwise
    double constantMemory = 0;    ///< memory of the ops without a choice
    bool constantInfeasible = false;
};

void addPairFactor(ProgramBuilder& pb, const PairFactor& f, int xp, int xc, double scale, IlpFormulation formulation)
{
    if (formulation == IlpFormulation::Marginal) {
        std::vector<int> rowOf(static_cast<size_t>(f.rows)), colOf(static_cast<size_t>(f.cols));
        for (int a = 0; a < f.rows; ++a) {
            rowOf[static_cast<size_t>(a)] = pb.addRow(0, 0);
            pb.set(rowOf[static_cast<size_t>(a)], xp + a, -1);
        }
        for (int b = 0; b < f.cols; ++b) {
            colOf[static_cast<size_t>(b)] = pb.addRow(0, 0);
            pb.set(colOf[static_cast<size_t>(b)], xc + b, -1);
        }
        for (int a = 0; a < f.rows; ++a)
            for (int b = 0; b < f.cols; ++b) {
                const double v = f.cost[static_cast<size_t>(a * f.cols + b)];
                const int e = std::isfinite(v) ? pb.addColumn(0, kUnbounded, v * scale, false) : pb.addColumn(0, 0, 0, false);
                pb.set(rowOf[static_cast<size_t>(a)], e, 1);
                pb.set(colOf[static_cast<size_t>(b)], e, 1);
            }
        return;
    }
    for (int a = 0; a < f.rows; ++a)
        for (int b = 0; b < f.cols; ++b) {
            const double v = f.cost[static_cast<size_t>(a * f.cols + b)];
            if (v == 0) continue;
            if (!std::isfinite(v)) { // forbidden pair: x_p + x_q <= 1
                const int row = pb.addRow(-kUnbounded, 1);
                pb.set(row, xp + a, 1);
                pb.set(row, xc + b, 1);
                continue;
            }
            const int e = pb.addColumn(0, kUnbounded, v * scale, false);
            const int row = pb.addRow(-1, kUnbounded); // e - x_p - x_q >= -1
            pb.set(row, e, 1);
            pb.set(row, xp + a, -1);
            pb.set(row, xc + b, -1);
        }
}

Program buildProgram(const Reduced& r, size_t n, double scale, double memoryLimit, IlpFormulation formulation)
{
    Program p;
    p.firstColumn.assign(n, -1);
    ProgramBuilder& pb = p.pb;
    for (size_t op = 0; op < n; ++op) {
        if (r.allowed[op].size() == 1) {
            p.constantMemory += r.memory[op][0];
            if (!std::isfinite(r.unary[op][0])) p.constantInfeasible = true;
            continue;
        }
        const int row = pb.addRow(1, 1); // exactly one strategy
        for (size_t k = 0; k < r.allowed[op].size(); ++k) {
            const double u = r.unary[op][k];
            const int col = std::isfinite(u) ? pb.addColumn(0, 1, u * scale, true) : pb.addColumn(0, 0, 0, true);
            if (k == 0) p.firstColumn[op] = col;
            pb.set(row, col, 1);
        }
    }
    for (const PairFactor& f : r.pairs)
        addPairFactor(pb, f, p.firstColumn[static_cast<size_t>(f.producer)], p.firstColumn[static_cast<size_t>(f.consumer)],
                      scale, formulation);
    if (memoryLimit > 0) {
        const int row = pb.addRow(-kUnbounded, (memoryLimit - p.constantMemory) / kBytesPerMemoryUnit);
        for (size_t op = 0; op < n; ++op)
            if (p.firstColumn[op] >= 0)
                for (size_t k = 0; k < r.allowed[op].size(); ++k)
                    if (r.memory[op][k] != 0)
                        pb.set(row, p.firstColumn[op] + static_cast<int>(k), r.memory[op][k] / kBytesPerMemoryUnit);
    }
    return p;
}

/// One strategy per op from a (possibly fractional) solution: the largest x of each op.
std::vector<int> decodeSolution(const Reduced& r, const std::vector<int>& firstColumn, const double* solution)
{
    std::vector<int> strategyOfOp(firstColumn.size(), 0);
    for (size_t op = 0; op < firstColumn.size(); ++op) {
        if (firstColumn[op] < 0) {
            strategyOfOp[op] = r.allowed[op][0];
            continue;
        }
        size_t best = 0;
        for (size_t k = 1; k < r.allowed[op].size(); ++k)
            if (solution[firstColumn[op] + static_cast<int>(k)] > solution[firstColumn[op] + static_cast<int>(best)]) best = k;
        strategyOfOp[op] = r.allowed[op][best];
    }
    return strategyOfOp;
}

/// CBC loaded with the program (compressed sparse columns), its options and the MIP start.
std::unique_ptr<Cbc_Model, CbcModelDeleter> loadCbc(const Program& p, const Reduced& r, const IlpOptions& options)
{
    const ProgramBuilder& pb = p.pb;
    std::vector<CoinBigIndex> starts{0};
    std::vector<int> indices;
    std::vector<double> values;
    for (const auto& col : pb.columns) {
        for (const auto& [row, value] : col) {
            indices.push_back(row);
            values.push_back(value);
        }
        starts.push_back(static_cast<CoinBigIndex>(indices.size()));
    }
    std::unique_ptr<Cbc_Model, CbcModelDeleter> cbc(Cbc_newModel());
    Cbc_loadProblem(cbc.get(), static_cast<int>(pb.columns.size()), static_cast<int>(pb.rowLower.size()), starts.data(),
                    indices.data(), values.data(), pb.colLower.data(), pb.colUpper.data(), pb.objective.data(),
                    pb.rowLower.data(), pb.rowUpper.data());
    for (size_t c = 0; c < pb.integer.size(); ++c)
        if (pb.integer[c]) Cbc_setInteger(cbc.get(), static_cast<int>(c));
    Cbc_setObjSense(cbc.get(), 1);
    Cbc_setLogLevel(cbc.get(), options.logLevel);
    Cbc_setMaximumSeconds(cbc.get(), options.timeLimitSeconds);
    Cbc_setParameter(cbc.get(), "timeMode", "elapsed"); // the limit is wall clock, as the benchmark measures
    Cbc_setAllowableGap(cbc.get(), 1e-7);
    Cbc_setAllowableFractionGap(cbc.get(), 1e-12);
    if (!options.initialStrategyOfOp.empty()) {
        if (options.initialStrategyOfOp.size() != p.firstColumn.size())
            throw InputError("ILP initial plan: one strategy per op expected");
        std::vector<int> cols;
        std::vector<double> ones;
        for (size_t op = 0; op < p.firstColumn.size(); ++op) {
            if (p.firstColumn[op] < 0) continue;
            const auto& al = r.allowed[op];
            const auto it = std::find(al.begin(), al.end(), options.initialStrategyOfOp[op]);
            if (it == al.end()) continue; // not allowed (locked otherwise): let CBC complete it
            cols.push_back(p.firstColumn[op] + static_cast<int>(it - al.begin()));
            ones.push_back(1.0);
        }
        Cbc_setMIPStartI(cbc.get(), static_cast<int>(cols.size()), cols.data(), ones.data());
    }
    return cbc;
}

} // namespace

IlpResult solveIlp(const CostModel& model, const IlpOptions& options)
{
    const auto buildStart = std::chrono::steady_clock::now();
    const size_t n = model.graph().ops.size();
    IlpResult result;
    Reduced r = reduce(model, options);

    // Scale so the optimum is near kTargetScaledObjective; the lower bound from the node costs'
    // minima (pair costs are >= 0 after reparametrisation) estimates its size.
    double lowerBound = 0;
    for (size_t op = 0; op < n; ++op)
        if (r.allowed[op].size() > 1) {
            double m = kUnbounded;
            for (double v : r.unary[op]) m = std::min(m, v);
            if (std::isfinite(m)) lowerBound += m;
        }
    const double scale = lowerBound > 0 ? kTargetScaledObjective / lowerBound : 1.0;

    double memoryLimit = options.memoryLimitBytes;
    if (memoryLimit == 0) memoryLimit = model.hardware().hbmBytes;
    const bool limitMemory = memoryLimit > 0;

    const Program program = buildProgram(r, n, scale, limitMemory ? memoryLimit : 0, options.formulation);
    const ProgramBuilder& pb = program.pb;
    result.variables = static_cast<int>(pb.columns.size());
    result.integerVariables = static_cast<int>(std::count(pb.integer.begin(), pb.integer.end(), true));
    result.constraints = static_cast<int>(pb.rowLower.size());
    result.pairFactors = static_cast<int>(r.pairs.size());
    for (const auto& col : pb.columns) result.nonzeros += static_cast<long long>(col.size());

    auto finish = [&](std::vector<int> strategyOfOp) {
        result.strategyOfOp = std::move(strategyOfOp);
        // Re-costed exactly by the one evaluation (the ILP chooses no recomputation).
        const Breakdown b = evaluatePlan(model, nullptr, result.strategyOfOp, {}, "ilp").breakdown;
        result.objective = b.stepSeconds;
        result.memoryBytes = b.perDeviceBytes;
    };

    if (program.constantInfeasible || (limitMemory && program.constantMemory > memoryLimit)) {
        result.buildMs = elapsedMs(buildStart);
        result.status = IlpStatus::Infeasible;
        return result;
    }
    if (pb.columns.empty()) { // every op fixed: nothing to solve
        result.buildMs = elapsedMs(buildStart);
        finish(decodeSolution(r, program.firstColumn, nullptr));
        result.status = IlpStatus::Optimal;
        result.bestBound = result.objective;
        return result;
    }
    const auto cbc = loadCbc(program, r, options);
    result.buildMs = elapsedMs(buildStart);

    const auto solveStart = std::chrono::steady_clock::now();
    Cbc_solve(cbc.get());
    result.solveMs = elapsedMs(solveStart);

    const double* best = Cbc_bestSolution(cbc.get());
    const bool haveSolution = best != nullptr && Cbc_numberSavedSolutions(cbc.get()) >= 0 && !Cbc_isProvenInfeasible(cbc.get()) &&
                              Cbc_getObjValue(cbc.get()) < 1e50;
    const double bound = Cbc_getBestPossibleObjValue(cbc.get());
    result.bestBound = r.constantSeconds + bound / scale;
    // The time limit first: CBC 2.10 stopped mid-way (e.g. in preprocessing) may also flag the
    // problem infeasible, which is wrong for a program without a memory limit.
    if (!haveSolution && Cbc_isSecondsLimitReached(cbc.get())) {
        result.status = IlpStatus::TimeLimitNoPlan;
        return result;
    }
    if (Cbc_isProvenInfeasible(cbc.get())) {
        result.status = IlpStatus::Infeasible;
        return result;
    }
    if (!haveSolution) {
        result.status = IlpStatus::Failed;
        return result;
    }
    finish(decodeSolution(r, program.firstColumn, best));
    if (Cbc_isProvenOptimal(cbc.get())) {
        result.status = IlpStatus::Optimal;
        result.gap = 0;
        result.bestBound = std::min(result.bestBound, result.objective);
    } else {
        result.status = Cbc_isSecondsLimitReached(cbc.get()) ? IlpStatus::TimeLimit : IlpStatus::Failed;
        result.gap = result.objective > 0 ? std::max(0.0, (result.objective - result.bestBound) / result.objective) : 0.0;
    }
    return result;
}

} // namespace tp
