// Repeats one folded search many times so that a profiler sees the search and not the model
// building around it: bench_search MODEL LAYERS MESH REPETITIONS [flat]
// (e.g. `perf record --call-graph dwarf bench_search gpt3-175b 1536 8 200`).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "plan/planner.h"
#include "search/search.h"

int main(int argc, char** argv)
{
    if (argc < 5) {
        std::fprintf(stderr, "usage: bench_search MODEL LAYERS MESH REPETITIONS [flat|limit]\n");
        return 2;
    }
    // The planner's setup (cost-model settings, fold), exactly as tpplan and the GUI make it.
    tp::PlanRequest request;
    request.model = argv[1];
    if (std::atoi(argv[2]) > 0) request.modelOptions.overrides = {std::string("layers=") + argv[2]};
    request.mesh = argv[3];
    const auto ws = tp::preparePlan(request);
    const tp::CostModel& cost = *ws->costModel;
    const tp::FoldedGraph& folded = ws->folded;
    const tp::Graph& graph = ws->model.graph;
    tp::SearchOptions search;
    const std::string mode = argc > 5 ? argv[5] : "";
    search.memoryLimitBytes = mode == "limit" ? 0 : -1; // "limit": the hardware's capacity
    search.flat = mode == "flat";
    const int repetitions = std::atoi(argv[4]);
    double objective = 0;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < repetitions; ++i) objective = tp::searchPlan(cost, folded, search).objective;
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::printf("%s layers=%s mesh=%s: %zu ops, %.3f ms per search, objective %.9g\n", argv[1], argv[2], argv[3],
                graph.ops.size(), ms / repetitions, objective);
    return 0;
}
