// tpplan bench: the benchmark suite of docs/PERFORMANCE.md.
//
// Every case runs in a child process (this executable, `tpplan bench CASE`), for two reasons:
// its peak RSS is the child's own ru_maxrss (getrusage of one process only grows), and a case
// never inherits another's heap or warm caches. The parent runs the cases in a fixed order,
// collects one JSON object from each, prints a table and writes the document.
//
// Times are medians over repetitions, as wall clock and as the thread's CPU time (on a shared
// machine the CPU time is the steadier of the two). No case asserts anything about speed.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <thread>

#include "bench_child.h"
#include "cli.h"
#include "fold/fold.h"
#include "ilp/ilp.h"
#include "plan/planner.h"
#include "cost/baselines.h"
#include "search/evaluate.h"
#include "search/search.h"
#include "sharding/strategy.h"
#include "util/error.h"

#ifndef TP_BUILD_TYPE
#define TP_BUILD_TYPE "unknown"
#endif

namespace tp::cli {

namespace {

using Json = nlohmann::json;

// ---------------------------------------------------------------------------------------------
// Measuring

double threadCpuMs()
{
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}

struct Sample {
    double wallMs = 0;
    double cpuMs = 0;
};

/// Runs `work` `repetitions` times and returns the median wall and CPU times (each median taken
/// on its own). The last run's side effects are what the caller keeps.
template <typename Work>
Sample medianOf(int repetitions, Work&& work)
{
    std::vector<double> wall, cpu;
    for (int i = 0; i < repetitions; ++i) {
        const auto start = std::chrono::steady_clock::now();
        const double cpuStart = threadCpuMs();
        work();
        cpu.push_back(threadCpuMs() - cpuStart);
        wall.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(wall.begin(), wall.end());
    std::sort(cpu.begin(), cpu.end());
    return {wall[wall.size() / 2], cpu[cpu.size() / 2]};
}

Json sampleJson(const Sample& s) { return {{"wall_ms", s.wallMs}, {"cpu_ms", s.cpuMs}}; }

double relativeDifference(double a, double b) { return std::abs(a - b) / std::max({std::abs(a), std::abs(b), 1e-300}); }

// ---------------------------------------------------------------------------------------------
// The suite: which cases, in which order

struct Suite {
    bool quick = false;
    std::vector<int> scalingLayers;
    std::vector<std::string> compareModels;
    std::vector<std::string> compareMeshes;
    int repetitions = 0;     ///< fast measurements (fold, folded search, cold plan, lock)
    int slowRepetitions = 0; ///< slow ones (flat search)
    double ilpSeconds = 0;   ///< CBC time limit per program
    std::string coldModel = "llama3-8b";
    std::string coldMesh = "2x8";
    std::string hardware = "a100-80g-dgx";
    std::string scalingModel = "gpt3-175b";
    std::string scalingMesh = "8";
};

Suite suiteFor(bool quick)
{
    Suite s;
    s.quick = quick;
    if (quick) {
        // Under a minute on 2 shared cores: the scaling curve, one small and one large
        // comparison, and the interactive figures.
        s.scalingLayers = {24, 96, 384, 1536};
        s.compareModels = {"gpt3-1.3b", "gpt3-175b"};
        s.compareMeshes = {"8"}; // on 2x8 CBC's root LP overruns its time limit by a minute
        s.repetitions = 3;
        s.slowRepetitions = 1;
        s.ilpSeconds = 5;
    } else {
        s.scalingLayers = {24, 96, 384, 1536, 4800};
        s.compareModels = {"gpt3-1.3b", "gpt3-6.7b", "gpt3-175b", "llama2-70b", "t5-3b", "resnet50"};
        s.compareMeshes = {"8", "2x8", "8x8"};
        s.repetitions = 7;
        s.slowRepetitions = 3;
        s.ilpSeconds = 60;
    }
    return s;
}

Json suiteJson(const Suite& s)
{
    return {{"quick", s.quick},
            {"repetitions", s.repetitions},
            {"slow_repetitions", s.slowRepetitions},
            {"ilp_time_limit_s", s.ilpSeconds},
            {"hardware", s.hardware},
            {"mode", "train"},
            {"scaling_model", s.scalingModel},
            {"scaling_mesh", s.scalingMesh},
            {"search_memory_limit", "none (pure step time, so that folded, flat and the ILP minimise the same objective)"}};
}

std::vector<std::string> caseList(const Suite& s)
{
    std::vector<std::string> cases;
    for (int layers : s.scalingLayers) cases.push_back("scale:" + std::to_string(layers));
    for (int layers : s.scalingLayers) cases.push_back("scale:" + std::to_string(layers) + ":flat");
    for (const auto& model : s.compareModels)
        for (const auto& mesh : s.compareMeshes)
            for (const char* method : {"folded", "flat", "ilp"})
                cases.push_back(std::string("search:") + model + ":" + mesh + ":" + method);
    // Why the ILP uses the marginal formulation: the textbook linearisation on the smallest case.
    if (!s.quick) cases.push_back("search:" + s.compareModels[0] + ":" + s.compareMeshes[0] + ":ilp_linearized");
    cases.push_back("cold");
    cases.push_back("costmodel");
    cases.push_back("lock");
    if (!s.quick) cases.push_back("pipeline"); // seconds per run: the full suite only
    if (!s.quick)
        for (int layers : {96, 1536}) cases.push_back("pipeline:" + std::to_string(layers));
    cases.push_back("gui");
    return cases;
}

std::vector<std::string> splitColons(const std::string& text)
{
    std::vector<std::string> parts;
    std::stringstream in(text);
    std::string part;
    while (std::getline(in, part, ':')) parts.push_back(part);
    return parts;
}

// ---------------------------------------------------------------------------------------------
// The cases (run in the child)

/// The planner's own setup (model, hardware, mesh, cost-model settings, fold), so that the
/// benchmark costs plans exactly as tpplan and the GUI do.
PlanRequest planRequestFor(const Suite& s, const std::string& model, const std::string& mesh, int layers = 0)
{
    PlanRequest request;
    request.model = model;
    request.mesh = mesh;
    request.hardware = s.hardware;
    if (layers > 0) request.modelOptions.overrides = {"layers=" + std::to_string(layers)};
    return request;
}

SearchOptions unlimitedSearch(bool flat)
{
    SearchOptions o;
    o.memoryLimitBytes = -1;
    o.flat = flat;
    return o;
}

/// Fold and folded search of GPT-3 175B's layer stack at a given depth.
Json runScaleCase(const Suite& s, int layers)
{
    std::unique_ptr<PlanWorkspace> ws;
    const Sample prepare = medianOf(1, [&] { ws = preparePlan(planRequestFor(s, s.scalingModel, s.scalingMesh, layers)); });
    const Graph& graph = ws->model.graph;
    FoldedGraph folded;
    const Sample fold = medianOf(s.repetitions, [&] { folded = foldGraph(graph); });
    SearchResult r;
    std::vector<double> solverCpu;
    const Sample search = medianOf(s.repetitions, [&] {
        r = searchPlan(*ws->costModel, ws->folded, unlimitedSearch(false));
        solverCpu.push_back(r.searchCpuMs);
    });
    std::sort(solverCpu.begin(), solverCpu.end());
    const double ops = static_cast<double>(graph.ops.size());
    return {{"layers", layers},
            {"ops", graph.ops.size()},
            {"block_classes", folded.classes.size()},
            {"searched_ops", folded.searchedOps()},
            {"prepare_ms", prepare.wallMs},
            {"fold", sampleJson(fold)},
            {"fold_ops_per_s", ops / (fold.cpuMs / 1e3)},
            {"search", sampleJson(search)},
            // The solver alone (class tables, stitching, decoding per stretch of identical
            // instances), without the per-op work around it (session set-up, writing a
            // strategy per op, the final breakdown of every op).
            {"solver_cpu_ms", solverCpu[solverCpu.size() / 2]}, // median, like the rest
            {"expand_ms", r.expandMs},
            {"breakdown_ms", r.breakdownMs},
            {"step_time_s", r.objective}};
}

/// The same depth searched flat (one class per layer, nothing shared), in its own process so
/// that the folded row's peak RSS stays its own: how what folding buys grows with depth.
Json runScaleFlatCase(const Suite& s, int layers)
{
    const auto ws = preparePlan(planRequestFor(s, s.scalingModel, s.scalingMesh, layers));
    std::vector<double> solverCpu;
    SearchResult r;
    medianOf(s.slowRepetitions, [&] {
        r = searchPlan(*ws->costModel, ws->folded, unlimitedSearch(true));
        solverCpu.push_back(r.searchCpuMs);
    });
    std::sort(solverCpu.begin(), solverCpu.end());
    return {{"layers", layers}, {"solver_cpu_ms", solverCpu[solverCpu.size() / 2]}, {"step_time_s", r.objective}};
}

/// One method (folded search, flat search or the ILP) on one model and mesh.
Json runSearchCase(const Suite& s, const std::string& modelName, const std::string& meshText, const std::string& method)
{
    std::unique_ptr<PlanWorkspace> ws;
    const Sample prepare = medianOf(1, [&] { ws = preparePlan(planRequestFor(s, modelName, meshText)); });
    const CostModel* cost = ws->costModel.get();
    Json j = {{"model", modelName},
              {"mesh", meshText},
              {"method", method},
              {"ops", ws->model.graph.ops.size()},
              {"prepare_ms", prepare.wallMs}};
    if (method == "folded" || method == "flat") {
        FoldedGraph folded;
        const Sample fold = medianOf(method == "folded" ? s.repetitions : 1, [&] { folded = foldGraph(ws->model.graph); });
        SearchResult r;
        std::vector<double> solverCpu, withoutBreakdown;
        const Sample search = medianOf(method == "folded" ? s.repetitions : s.slowRepetitions, [&] {
            const auto start = std::chrono::steady_clock::now();
            r = searchPlan(*cost, ws->folded, unlimitedSearch(method == "flat"));
            const double wall = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
            solverCpu.push_back(r.searchCpuMs);
            withoutBreakdown.push_back(wall - r.breakdownMs);
        });
        std::sort(solverCpu.begin(), solverCpu.end());
        std::sort(withoutBreakdown.begin(), withoutBreakdown.end());
        j["fold"] = sampleJson(fold);
        j["search"] = sampleJson(search);
        j["solver_cpu_ms"] = solverCpu[solverCpu.size() / 2]; // median, like the rest
        // To a strategy per op (session set-up, solve, expansion), without the full breakdown
        // of every op and collective that the plan document shows: what the ILP's time covers
        // (building the program, costing every edge, solving).
        j["plan_without_breakdown_ms"] = withoutBreakdown[withoutBreakdown.size() / 2];
        j["cost_s"] = r.objective;
        j["block_classes"] = r.blockClasses;
        j["ops_searched"] = r.opsSearched;
        j["status"] = "optimal";
        return j;
    }
    if (method != "ilp" && method != "ilp_linearized") throw InputError("bench case: unknown method '" + method + "'");
    IlpOptions options;
    options.formulation = method == "ilp" ? IlpFormulation::Marginal : IlpFormulation::Linearized;
    // Cold, as Alpa runs it: no starting plan. (Starting CBC from the all-replicated plan was
    // tried: its MIP-start pass alone took 13 s on GPT-3 1.3B 2x8, which the cold run solves to
    // optimality in 6 s, because the LP relaxation of the marginal formulation is already tight.)
    if (const char* log = std::getenv("TPPLAN_BENCH_CBC_LOG")) options.logLevel = std::atoi(log); // diagnosing CBC
    options.timeLimitSeconds = s.ilpSeconds;
    IlpResult r;
    const Sample total = medianOf(1, [&] { r = solveIlp(*cost, options); });
    j["search"] = sampleJson(total); // build + solve: all the peer spends
    j["ilp_build_ms"] = r.buildMs;
    j["ilp_solve_ms"] = r.solveMs;
    j["status"] = std::string(ilpStatusName(r.status));
    if (!r.strategyOfOp.empty()) j["cost_s"] = r.objective;
    j["bound_s"] = r.bestBound;
    j["gap"] = r.gap;
    j["variables"] = r.variables;
    j["integer_variables"] = r.integerVariables;
    j["constraints"] = r.constraints;
    j["nonzeros"] = r.nonzeros;
    j["pair_factors"] = r.pairFactors;
    return j;
}

PlanRequest coldRequest(const Suite& s) { return planRequestFor(s, s.coldModel, s.coldMesh); }

/// A cold plan as tpplan and the GUI make it (Planner::plan with the request's defaults, so the
/// micro-batch and ZeRO stage are chosen too): load, cost models, folds, searches (default
/// memory limit: the hardware's capacity). The first run pays one-time costs (built-in
/// resources).
Json runColdCase(const Suite& s)
{
    const PlanRequest request = coldRequest(s);
    std::vector<double> prepare;
    double firstMs = 0;
    PlannerResult r;
    const Sample total = medianOf(s.repetitions, [&] {
        const auto start = std::chrono::steady_clock::now();
        Planner planner;
        r = planner.plan(request);
        prepare.push_back(r.prepareMs);
        if (firstMs == 0) firstMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    });
    std::sort(prepare.begin(), prepare.end());
    std::map<std::string, int> outcomes;
    for (const auto& c : r.candidates) ++outcomes[outcomeName(c.outcome)];
    const CostSettings& chosen = r.workspace->costModel->settings();
    return {{"model", s.coldModel},
            {"mesh", s.coldMesh},
            {"total", sampleJson(total)},
            {"first_run_ms", firstMs},
            {"prepare_ms", prepare[prepare.size() / 2]},
            {"combinations", r.candidates.size()},
            {"outcomes", outcomes},
            {"zero", chosen.zeroStage},
            {"micro_batch", chosen.microBatch},
            {"step_time_s", r.result.breakdown.stepSeconds},
            {"fits", r.result.fits}};
}

/// Pipelines (issue 19): GPT-3 175B on 8x8 with batch 64, Korthikanti et al.'s layout (8
/// stages of TP 8, interleaved with 3 chunks, micro-batch 1) against the search with the stages,
/// schedule and micro-batch open (`--pipeline auto --schedule auto`), as tpplan plans them.
Json runPipelineCase(const Suite& s)
{
    PlanRequest hand = planRequestFor(s, "gpt3-175b", "8x8");
    hand.modelOptions.batch = 64;
    hand.pipeline = 8;
    hand.schedule = "interleaved:3";
    hand.microBatch = 1;
    hand.baseline = "megatron-sp";
    hand.recompute = "selective";
    PlanRequest searched = planRequestFor(s, "gpt3-175b", "8x8");
    searched.modelOptions.batch = 64;
    searched.pipeline = kAuto;
    searched.schedule = "auto";
    searched.stageLayers = kDefaultStageLayers;
    PlannerResult a, b;
    const Sample handTime = medianOf(s.repetitions, [&] { a = Planner().plan(hand); });
    const Sample searchTime = medianOf(s.repetitions, [&] { b = Planner().plan(searched); });
    auto stepOf = [](const PlannerResult& r) { return r.pipeline ? r.pipeline->stepSeconds : r.result.breakdown.stepSeconds; };
    Json found = {{"step_time_s", stepOf(b)}, {"total", sampleJson(searchTime)}};
    if (b.pipeline) {
        found["stages"] = b.pipeline->schedule.stages;
        found["virtual_stages"] = b.pipeline->schedule.virtualStages;
        found["micro_batch"] = b.pipeline->microBatch;
    }
    return {{"model", "gpt3-175b"},
            {"mesh", "8x8"},
            {"batch", 64},
            {"hand_layout", {{"step_time_s", stepOf(a)}, {"total", sampleJson(handTime)}}},
            {"search", found}};
}

/// Pipelines searched at depth (issue 19): GPT-3 175B's shape with `layers` layers on 8x8 in
/// 8 stages, batch 64, no memory limit, the schedule, micro-batch and stage boundaries chosen,
/// on one thread. `solve_ms` is the searches proper (PlannerSession::solve, summed through
/// SearchProgress); the rest of `total` is linear in the ops (loading, cutting each probed
/// stage, its cost model, evaluating the plans).
Json runPipelineDepthCase(const Suite& s, int layers)
{
    PlanRequest request = planRequestFor(s, "gpt3-175b", "8x8", layers);
    request.modelOptions.batch = 64;
    request.memoryLimit = "none";
    request.pipeline = 8;
    request.schedule = "auto";
    request.stageLayers = kDefaultStageLayers;
    request.threads = 1;
    SearchProgress progress;
    PlannerResult r;
    std::vector<double> solveMs;
    const Sample total = medianOf(s.repetitions, [&] {
        progress.solveMicroseconds = 0;
        progress.solves = 0;
        r = Planner().plan(request, nullptr, &progress);
        solveMs.push_back(static_cast<double>(progress.solveMicroseconds.load()) / 1e3);
    });
    std::sort(solveMs.begin(), solveMs.end());
    return {{"layers", layers},
            {"total", sampleJson(total)},
            {"solve_ms", solveMs[solveMs.size() / 2]}, // median, like the rest
            {"solves", progress.solves.load()},
            {"stages", r.pipeline ? r.pipeline->schedule.stages : 1},
            {"virtual_stages", r.pipeline ? r.pipeline->schedule.virtualStages : 1},
            {"step_time_s", r.pipeline ? r.pipeline->stepSeconds : r.result.breakdown.stepSeconds}};
}

/// Building the cost model of GPT-3 175B on 8x8 (every op's candidates and node costs) and
/// evaluating Megatron's plan on it: the one-time set-up of a cold plan, on the largest built-in.
Json runCostModelCase(const Suite& s)
{
    PlanRequest request = planRequestFor(s, "gpt3-175b", "8x8");
    const LoadedModel lm = loadModel(request.model, request.modelOptions);
    const Hardware hw = loadHardware(request.hardware);
    const Mesh mesh = parseMesh(request.mesh, hw);
    std::size_t strategies = 0;
    double evaluateMs = 0, stepSeconds = 0;
    const Sample build = medianOf(s.repetitions, [&] {
        const CostModel model(lm.graph, mesh, hw);
        strategies = 0;
        for (const auto& op : lm.graph.ops) strategies += model.strategies(op.id).size();
        const auto start = std::chrono::steady_clock::now();
        stepSeconds = evaluatePlan(model, nullptr, megatronAssignment(model), {}, "megatron").breakdown.stepSeconds;
        evaluateMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    });
    return {{"model", request.model},
            {"mesh", request.mesh},
            {"ops", lm.graph.ops.size()},
            {"op_strategies", strategies},
            {"build", sampleJson(build)},
            {"megatron_evaluate_ms", evaluateMs},
            {"megatron_step_time_s", stepSeconds}};
}

/// Re-planning after one lock on a layer op, as the GUI does (Planner::plan with the lock, the
/// micro-batch and ZeRO stage still chosen): for the whole class ("layers.*/mlp/down") and for
/// one instance ("layers.5/mlp/down", which splits it out).
Json runLockCase(const Suite& s)
{
    const PlanRequest request = coldRequest(s);
    Json j = {{"model", s.coldModel}, {"mesh", s.coldMesh}};
    for (const bool wholeClass : {true, false}) {
        std::string lockText, instanceName;
        double firstPlanMs = 0;
        PlannerResult locked;
        std::vector<double> wall, cpu;
        for (int i = 0; i < s.repetitions; ++i) {
            Planner planner;
            const auto firstStart = std::chrono::steady_clock::now();
            const PlannerResult before = planner.plan(request);
            firstPlanMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - firstStart).count();
            const CostModel& model = *before.workspace->costModel;
            const Graph& g = model.graph();
            OpId target = -1;
            for (const Op& op : g.ops)
                if (op.kind == OpKind::Linear && op.name.rfind("layers.5/", 0) == 0 && (target < 0 || op.name.ends_with("/down")))
                    target = op.id;
            if (target < 0) throw InputError("bench lock: no linear op in layers.5 of " + s.coldModel);
            instanceName = g.op(target).name;
            const std::string className = "layers.*" + instanceName.substr(std::strlen("layers.5"));
            // Lock the op to the candidate the free plan does not use with the smallest node
            // cost (a plausible alternative, as a user would pick one in the inspector).
            const int chosen = before.result.strategyOfOp[static_cast<size_t>(target)];
            int other = -1;
            for (int c = 0; c < static_cast<int>(model.strategies(target).size()); ++c)
                if (c != chosen && (other < 0 || model.opCost(target, c).seconds() < model.opCost(target, other).seconds()))
                    other = c;
            lockText =
                (wholeClass ? className : instanceName) + "=" +
                strategyToString(model.strategies(target)[static_cast<size_t>(other)], model.signature(target), model.mesh());
            PlanRequest withLock = request;
            withLock.locks = {lockText};
            const auto start = std::chrono::steady_clock::now();
            const double cpuStart = threadCpuMs();
            locked = planner.plan(withLock);
            cpu.push_back(threadCpuMs() - cpuStart);
            wall.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
        }
        std::sort(wall.begin(), wall.end());
        std::sort(cpu.begin(), cpu.end());
        std::map<std::string, int> outcomes;
        int searched = 0;
        for (const auto& c : locked.candidates) {
            ++outcomes[outcomeName(c.outcome)];
            searched += c.searched;
        }
        j["op"] = instanceName;
        j[wholeClass ? "class_lock" : "instance_lock"] = {
            {"lock", lockText},
            {"resolve", {{"wall_ms", wall[wall.size() / 2]}, {"cpu_ms", cpu[cpu.size() / 2]}}},
            {"first_plan_ms", firstPlanMs},
            {"outcomes", outcomes},
            {"combinations_searched", searched},
            {"tables_solved", locked.result.tablesSolved},
            {"prices_tried", locked.result.pricesTried},
            {"step_time_s", locked.result.breakdown.stepSeconds}};
    }
    return j;
}

/// The GUI's open-to-first-paint, as `tpstudio MODEL --screenshot FILE` offscreen (process start
/// to exit, so an upper bound). A placeholder when the GUI has no --screenshot yet.
Json runGuiCase(const Suite& s)
{
    const auto gui = selfExecutable().parent_path() / "tpstudio" / "tpstudio";
    Json j = {{"model", s.scalingModel}, {"mesh", "8x8"}, {"available", false}};
    if (!std::filesystem::exists(gui)) {
        j["reason"] = "tpstudio not built next to tpplan (" + gui.string() + ")";
        return j;
    }
    const auto png = std::filesystem::temp_directory_path() / ("tpbench-" + std::to_string(getpid()) + ".png");
    std::vector<double> wall;
    long rss = 0;
    for (int i = 0; i < std::max(1, s.repetitions / 2); ++i) {
        std::filesystem::remove(png);
        const ChildResult c = runChild({gui.string(), s.scalingModel, "--mesh", "8x8", "--screenshot", png.string()},
                                       {"QT_QPA_PLATFORM=offscreen"});
        if (c.exitCode != 0 || !std::filesystem::exists(png)) {
            j["reason"] = "tpstudio --screenshot did not write an image (exit " + std::to_string(c.exitCode) +
                          "): not implemented yet; GUI timings come from the GUI's own tests";
            return j;
        }
        wall.push_back(c.wallMs);
        rss = std::max(rss, c.peakRssKiB);
    }
    std::filesystem::remove(png);
    std::sort(wall.begin(), wall.end());
    j["available"] = true;
    j["open_to_screenshot_ms"] = wall[wall.size() / 2];
    j["gui_peak_rss_bytes"] = static_cast<double>(rss) * 1024.0;

    // Edit to updated plan on screen: tpstudio times its own edits (lock / unlock of an op in
    // every instance of the largest class) and prints one JSON line.
    const int edits = s.quick ? 5 : 21;
    const ChildResult e = runChild({gui.string(), s.scalingModel, "--mesh", "8x8", "--bench-edits", std::to_string(edits)},
                                   {"QT_QPA_PLATFORM=offscreen"});
    std::string line = e.output;
    while (!line.empty() && line.back() == '\n') line.pop_back();
    if (const auto cut = line.rfind('\n'); cut != std::string::npos) line.erase(0, cut + 1);
    if (e.exitCode == 0 && !line.empty()) {
        try {
            const Json edit = Json::parse(line);
            j["first_plan_ms"] = edit.at("first_plan_ms");
            j["edit"] = edit.at("edit");
            j["edit_to_update_ms"] = {
                {"median", edit.at("median_ms")}, {"max", edit.at("max_ms")}, {"samples", edit.at("edit_to_update_ms")}};
            // Switching the bottom docks and selecting ops with Explain or Devices in front.
            for (const char* key : {"view_switch_ms", "select_op_explain_ms", "select_op_devices_ms"})
                if (edit.contains(key)) j[key] = edit.at(key);
        } catch (const Json::exception& ex) {
            j["edit_to_update_ms"] = {{"error", std::string("unreadable output of --bench-edits: ") + ex.what()}};
        }
    } else {
        j["edit_to_update_ms"] = {{"error", "tpstudio --bench-edits exited " + std::to_string(e.exitCode)}};
    }
    return j;
}

Json runCase(const Suite& s, const std::string& spec)
{
    const auto parts = splitColons(spec);
    if (parts.size() == 2 && parts[0] == "scale") return runScaleCase(s, std::stoi(parts[1]));
    if (parts.size() == 3 && parts[0] == "scale" && parts[2] == "flat") return runScaleFlatCase(s, std::stoi(parts[1]));
    if (parts.size() == 4 && parts[0] == "search") return runSearchCase(s, parts[1], parts[2], parts[3]);
    if (spec == "cold") return runColdCase(s);
    if (spec == "costmodel") return runCostModelCase(s);
    if (spec == "lock") return runLockCase(s);
    if (spec == "pipeline") return runPipelineCase(s);
    if (parts.size() == 2 && parts[0] == "pipeline") return runPipelineDepthCase(s, std::stoi(parts[1]));
    if (spec == "gui") return runGuiCase(s);
    throw UsageError("bench: unknown case '" + spec + "'");
}

// ---------------------------------------------------------------------------------------------
// Machine information

// ---------------------------------------------------------------------------------------------
// Assembling the document and the table

/// Groups the per-case objects into the document's sections and derives the ratios.
Json assemble(const Suite& s, const std::vector<std::pair<std::string, Json>>& results)
{
    Json doc = {{"format", "tpstudio.bench"}, {"version", 1}};
    doc["settings"] = suiteJson(s);
    Json scaling = Json::array(), comparison = Json::array();
    std::map<std::pair<std::string, std::string>, Json> rows;
    std::vector<std::pair<std::string, std::string>> order;
    std::map<int, Json> flatByLayers;
    for (const auto& [spec, j] : results) {
        const auto parts = splitColons(spec);
        if (parts[0] == "scale" && parts.size() == 2)
            scaling.push_back(j);
        else if (parts[0] == "scale")
            flatByLayers[std::stoi(parts[1])] = j;
        else if (parts[0] == "search") {
            const auto key = std::make_pair(parts[1], parts[2]);
            if (!rows.count(key)) {
                order.push_back(key);
                rows[key] = {{"model", parts[1]}, {"mesh", parts[2]}};
            }
            rows[key][parts[3]] = j;
            if (j.contains("ops")) rows[key]["ops"] = j["ops"];
        } else if (spec == "cold")
            doc["cold_plan"] = j;
        else if (spec == "costmodel")
            doc["cost_model"] = j;
        else if (spec == "lock")
            doc["lock_resolve"] = j;
        else if (spec == "pipeline")
            doc["pipeline"] = j;
        else if (parts[0] == "pipeline")
            doc["pipeline_depth"].push_back(j);
        else if (spec == "gui")
            doc["gui"] = j;
    }
    for (auto& row : scaling)
        if (auto flat = flatByLayers.find(row.value("layers", 0));
            flat != flatByLayers.end() && flat->second.contains("solver_cpu_ms")) {
            row["flat_solver_cpu_ms"] = flat->second["solver_cpu_ms"];
            row["flat_step_time_s"] = flat->second["step_time_s"];
            row["flat_peak_rss_bytes"] = flat->second.value("peak_rss_bytes", 0.0);
        }
    doc["scaling"] = scaling;
    Json summary = Json::object();
    auto layersRow = [&](int layers) -> const Json* {
        for (const auto& row : scaling)
            if (row.value("layers", 0) == layers && row.contains("search")) return &row;
        return nullptr;
    };
    if (const Json* a = layersRow(24), *b = layersRow(1536); a && b) {
        summary["search_ratio_1536_over_24_wall"] =
            (*b)["search"]["wall_ms"].get<double>() / (*a)["search"]["wall_ms"].get<double>();
        summary["search_ratio_1536_over_24_cpu"] =
            (*b)["search"]["cpu_ms"].get<double>() / (*a)["search"]["cpu_ms"].get<double>();
        // The solver alone: what the target is about. The whole call also writes a strategy per
        // op and builds the full breakdown, linear in the graph by nature.
        summary["solver_ratio_1536_over_24_cpu"] = (*b)["solver_cpu_ms"].get<double>() / (*a)["solver_cpu_ms"].get<double>();
        summary["search_ratio_target"] = 1.5;
    }
    for (const auto& row : scaling)
        if (row.value("ops", 0) >= 100000 && row.contains("fold")) summary["fold_ms_at_100k_ops"] = row["fold"]["cpu_ms"];
    doc["scaling_summary"] = summary;

    for (const auto& key : order) {
        Json row = rows[key];
        auto timeOf = [&](const char* m) {
            return row.contains(m) && row[m].contains("search") ? row[m]["search"]["wall_ms"].get<double>() : 0.0;
        };
        auto costOf = [&](const char* m) {
            return row.contains(m) && row[m].contains("cost_s") ? row[m]["cost_s"].get<double>() : -1.0;
        };
        const double folded = timeOf("folded"), flat = timeOf("flat"), ilp = timeOf("ilp");
        const double foldMs =
            row.contains("folded") && row["folded"].contains("fold") ? row["folded"]["fold"]["wall_ms"].get<double>() : 0.0;
        if (folded > 0 && flat > 0) row["speedup_vs_flat"] = flat / folded;
        if (row.contains("folded") && row.contains("flat") && row["folded"].contains("solver_cpu_ms") &&
            row["flat"].contains("solver_cpu_ms"))
            row["solver_speedup_vs_flat"] =
                row["flat"]["solver_cpu_ms"].get<double>() / row["folded"]["solver_cpu_ms"].get<double>();
        if (folded > 0 && ilp > 0) {
            // An ILP stopped by its time limit would have needed longer: the ratio is a lower bound.
            row["speedup_vs_ilp_is_lower_bound"] = row["ilp"].value("status", "") != "optimal";
            row["speedup_vs_ilp_with_breakdown"] = ilp / folded;
            const double plan = row["folded"].value("plan_without_breakdown_ms", folded);
            row["speedup_vs_ilp"] = ilp / plan; // like for like: the ILP builds no breakdown
            row["speedup_vs_ilp_with_fold"] = ilp / (plan + foldMs);
        }
        if (costOf("folded") > 0 && costOf("flat") > 0)
            row["cost_rel_diff_flat"] = relativeDifference(costOf("folded"), costOf("flat"));
        if (costOf("folded") > 0 && costOf("ilp") > 0)
            row["cost_rel_diff_ilp"] = relativeDifference(costOf("folded"), costOf("ilp"));
        comparison.push_back(row);
    }
    doc["comparison"] = comparison;
    return doc;
}

std::string fixed(double v, int precision)
{
    std::ostringstream o;
    o << std::fixed << std::setprecision(precision) << v;
    return o.str();
}

std::string msText(const Json& sample, const char* key = "wall_ms")
{
    return sample.is_object() && sample.contains(key) ? fixed(sample[key].get<double>(), 2) : "-";
}

std::string rssText(const Json& j)
{
    return j.contains("peak_rss_bytes") ? fixed(j["peak_rss_bytes"].get<double>() / (1024.0 * 1024.0), 0) : "-";
}

void printTable(const Json& doc, std::ostream& out)
{
    const Json& m = doc["machine"];
    out << "Machine: " << m["cpu"].get<std::string>() << ", " << m["cores"] << " cores, "
        << formatBytes(m["ram_bytes"].get<double>()) << " RAM, " << m["compiler"].get<std::string>() << ", "
        << m["build_type"].get<std::string>() << "\n"
        << "Load average at start " << m["load_average_start"].dump() << ", at end " << m["load_average_end"].dump() << "\n"
        << "Times are medians (wall ms; cpu ms = this thread's CPU time). Searches minimise step time without a memory "
           "limit.\n\n";

    out << "Fold and folded search vs depth (" << doc["settings"]["scaling_model"].get<std::string>() << " layers, mesh "
        << doc["settings"]["scaling_mesh"].get<std::string>() << ")\n";
    out << std::right << std::setw(7) << "layers" << std::setw(9) << "ops" << std::setw(11) << "fold ms" << std::setw(11)
        << "fold cpu" << std::setw(12) << "Mops/s" << std::setw(12) << "search ms" << std::setw(12) << "search cpu"
        << std::setw(12) << "solver cpu" << std::setw(10) << "flat cpu" << std::setw(8) << "x flat" << std::setw(11)
        << "prepare ms" << std::setw(10) << "RSS MiB"
        << "\n";
    for (const auto& row : doc["scaling"]) {
        if (row.contains("error")) {
            out << std::setw(7) << row.value("layers", 0) << "  error: " << row["error"].get<std::string>() << "\n";
            continue;
        }
        out << std::setw(7) << row["layers"].get<int>() << std::setw(9) << row["ops"].get<long>() << std::setw(11)
            << msText(row["fold"]) << std::setw(11) << msText(row["fold"], "cpu_ms") << std::setw(12)
            << fixed(row["fold_ops_per_s"].get<double>() / 1e6, 2) << std::setw(12) << msText(row["search"]) << std::setw(12)
            << msText(row["search"], "cpu_ms") << std::setw(12) << fixed(row["solver_cpu_ms"].get<double>(), 3) << std::setw(10)
            << (row.contains("flat_solver_cpu_ms") ? fixed(row["flat_solver_cpu_ms"].get<double>(), 1) : "-") << std::setw(8)
            << (row.contains("flat_solver_cpu_ms")
                    ? fixed(row["flat_solver_cpu_ms"].get<double>() / row["solver_cpu_ms"].get<double>(), 0)
                    : "-")
            << std::setw(11) << fixed(row["prepare_ms"].get<double>(), 1) << std::setw(10) << rssText(row) << "\n";
    }
    const Json& sum = doc["scaling_summary"];
    if (sum.contains("search_ratio_1536_over_24_wall"))
        out << "search time 1536 / 24 layers: " << fixed(sum["search_ratio_1536_over_24_wall"].get<double>(), 2) << "x wall, "
            << fixed(sum["search_ratio_1536_over_24_cpu"].get<double>(), 2) << "x cpu with the per-op work; solver "
            << fixed(sum["solver_ratio_1536_over_24_cpu"].get<double>(), 2) << "x cpu (target < 1.5x)\n";
    out << "\n";

    out << "Folded vs flat vs ILP (CBC, limit " << doc["settings"]["ilp_time_limit_s"].get<double>()
        << " s): search wall ms, step time s\n"
        << "(x flat: whole call / solver alone; x ILP: the ILP's build and solve over the folded search to a strategy per op)\n";
    out << std::left << std::setw(11) << "model" << std::setw(5) << "mesh" << std::right << std::setw(7) << "ops" << std::setw(10)
        << "folded" << std::setw(11) << "flat" << std::setw(11) << "ILP" << std::setw(9) << "x flat" << std::setw(10) << "x ILP"
        << std::setw(12) << "cost" << std::setw(10) << "flat diff" << std::setw(10) << "ILP diff"
        << "  RSS MiB f/fl/ilp  ILP status"
        << "\n";
    for (const auto& row : doc["comparison"]) {
        auto t = [&](const char* k) { return row.contains(k) ? msText(row[k]["search"]) : std::string("-"); };
        auto r = [&](const char* k) { return row.contains(k) ? rssText(row[k]) : std::string("-"); };
        std::string ilpStatus = row.contains("ilp") ? row["ilp"].value("status", "error") : "-";
        if (row.contains("ilp") && row["ilp"].value("status", "") == "time_limit")
            ilpStatus += ", gap " + fixed(row["ilp"]["gap"].get<double>() * 100, 1) + "%, best " +
                         fixed(row["ilp"].value("cost_s", 0.0), 5) + " s";
        out << std::left << std::setw(11) << row["model"].get<std::string>() << std::setw(5) << row["mesh"].get<std::string>()
            << std::right << std::setw(7) << row.value("ops", 0) << std::setw(10) << t("folded") << std::setw(11) << t("flat")
            << std::setw(11) << t("ilp") << std::setw(9)
            << (row.contains("solver_speedup_vs_flat")
                    ? fixed(row["speedup_vs_flat"].get<double>(), 0) + "/" + fixed(row["solver_speedup_vs_flat"].get<double>(), 0)
                    : "-")
            << std::setw(10)
            << (row.contains("speedup_vs_ilp") ? (row.value("speedup_vs_ilp_is_lower_bound", false) ? ">" : "") +
                                                     fixed(row["speedup_vs_ilp"].get<double>(), 0)
                                               : "-")
            << std::setw(12)
            << (row.contains("folded") && row["folded"].contains("cost_s") ? fixed(row["folded"]["cost_s"].get<double>(), 5)
                                                                           : "-")
            << std::setw(10) << (row.contains("cost_rel_diff_flat") ? fixed(row["cost_rel_diff_flat"].get<double>(), 7) : "-")
            << std::setw(10) << (row.contains("cost_rel_diff_ilp") ? fixed(row["cost_rel_diff_ilp"].get<double>(), 7) : "-")
            << "  " << std::left << std::setw(17) << (r("folded") + "/" + r("flat") + "/" + r("ilp")) << std::right << ilpStatus
            << "\n";
    }
    for (const auto& row : doc["comparison"])
        if (row.contains("ilp_linearized") && row.contains("ilp")) {
            const Json& lin = row["ilp_linearized"];
            out << "ILP formulations on " << row["model"].get<std::string>() << " mesh " << row["mesh"].get<std::string>()
                << ": marginal " << msText(row["ilp"]["search"]) << " ms (" << row["ilp"].value("status", "") << "), linearised "
                << msText(lin["search"]) << " ms (" << lin.value("status", "") << ", gap "
                << fixed(lin.value("gap", 0.0) * 100, 2) << "%)\n";
        }
    out << "\n";

    if (doc.contains("cold_plan") && !doc["cold_plan"].contains("error")) {
        const Json& c = doc["cold_plan"];
        out << "Cold plan " << c["model"].get<std::string>() << " on " << c["mesh"].get<std::string>() << ": "
            << msText(c["total"]) << " ms median (first run " << fixed(c["first_run_ms"].get<double>(), 2) << " ms; prepare "
            << fixed(c["prepare_ms"].get<double>(), 2) << ", then " << c["combinations"].get<int>()
            << " combinations of settings; cpu "
            << msText(c["total"], "cpu_ms") << " ms), RSS " << rssText(c) << " MiB (target < 100 ms with every setting chosen)\n";
    }
    if (doc.contains("lock_resolve") && !doc["lock_resolve"].contains("error")) {
        const Json& l = doc["lock_resolve"];
        for (const char* k : {"class_lock", "instance_lock"})
            out << "Re-solve after " << l[k]["lock"].get<std::string>() << ": " << msText(l[k]["resolve"]) << " ms median (cpu "
                << msText(l[k]["resolve"], "cpu_ms") << " ms; " << l[k]["tables_solved"].get<int>()
                << " tables solved) (target < 10 ms)\n";
    }
    if (doc.contains("gui")) {
        const Json& gjs = doc["gui"];
        if (gjs.value("available", false))
            out << "GUI open to screenshot (offscreen, " << gjs["model"].get<std::string>() << " "
                << gjs["mesh"].get<std::string>() << "): " << fixed(gjs["open_to_screenshot_ms"].get<double>(), 1)
                << " ms (process start to image, with dot's layout)\n";
        if (gjs.contains("edit_to_update_ms") && gjs["edit_to_update_ms"].contains("median"))
            out << "GUI edit to updated plan on screen (" << gjs["edit"].get<std::string>()
                << "): " << fixed(gjs["edit_to_update_ms"]["median"].get<double>(), 1) << " ms median, "
                << fixed(gjs["edit_to_update_ms"]["max"].get<double>(), 1) << " ms max (target < 100 ms)\n";
        else
            out << "GUI: not measured (" << gjs.value("reason", std::string("error")) << ")\n";
    }
}

} // namespace

int runBench(const Options& o, std::ostream& out)
{
    if (!o.positional.empty() && o.positional[0] == "fidelity") return runFidelity(o, out);
    if (!o.positional.empty() && o.positional[0] == "sweep") return runSweep(o, out);
    const Suite suite = suiteFor(o.quick);
    if (o.positional.size() == 1) { // a child: one case, one JSON object on stdout
        out << runCase(suite, o.positional[0]).dump() << "\n";
        return 0;
    }
    if (!o.positional.empty()) throw UsageError("usage: tpplan bench [--quick] [--json] [-o FILE]");

    Json machine = machineJson();
    const std::string self = selfExecutable().string();
    std::vector<std::pair<std::string, Json>> results;
    int failures = 0;
    for (const auto& spec : caseList(suite)) {
        std::cerr << "bench: " << spec << " ..." << std::flush;
        std::vector<std::string> argv{self, "bench", spec};
        if (suite.quick) argv.push_back("--quick");
        const ChildResult child = runChild(argv);
        Json j;
        try {
            if (child.exitCode != 0) throw std::runtime_error("exit code " + std::to_string(child.exitCode));
            j = Json::parse(child.output);
        } catch (const std::exception& e) {
            j = {{"error", std::string("case failed: ") + e.what()}};
            ++failures;
        }
        j["peak_rss_bytes"] = static_cast<double>(child.peakRssKiB) * 1024.0;
        j["process_wall_ms"] = child.wallMs;
        std::cerr << " " << fixed(child.wallMs / 1e3, 2) << " s" << (j.contains("error") ? "  FAILED" : "") << "\n";
        results.emplace_back(spec, std::move(j));
    }
    machine["load_average_end"] = loadAverage();
    Json doc = assemble(suite, results);
    doc["machine"] = machine;
    if (o.json || !o.output.empty()) emitJson(o, doc, out);
    if (!o.json) printTable(doc, out);
    if (failures) {
        std::cerr << "tpplan: bench: " << failures << " case(s) failed (their entries in the JSON say why)\n";
        return 1;
    }
    return 0;
}

} // namespace tp::cli
