// Folding speed on GPT-3 175B with 24 to 4800 layers: the median of several folds per size,
// and ops per second. Usage: bench_fold [repetitions]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include "fold/fold.h"
#include "import/catalog.h"

namespace {
// CPU time of this thread: the wall clock alone is unreliable while other jobs share the cores.
double threadCpuMs()
{
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}
} // namespace

int main(int argc, char** argv)
{
    const int repetitions = argc > 1 ? std::max(1, std::atoi(argv[1])) : 7;
    std::printf("%8s %9s %8s %10s %10s %10s %14s\n", "layers", "ops", "classes", "searched", "wall_ms", "cpu_ms",
                "ops_per_cpu_s");
    for (int layers : {24, 96, 384, 1536, 4800}) {
        tp::ModelOptions options;
        options.overrides = {"layers=" + std::to_string(layers)};
        const tp::LoadedModel model = tp::loadModel("gpt3-175b", options);
        std::vector<double> ms, cpu;
        tp::FoldedGraph folded;
        for (int r = 0; r < repetitions; ++r) {
            const auto start = std::chrono::steady_clock::now();
            const double cpuStart = threadCpuMs();
            folded = tp::foldGraph(model.graph);
            cpu.push_back(threadCpuMs() - cpuStart);
            ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
        }
        std::sort(ms.begin(), ms.end());
        std::sort(cpu.begin(), cpu.end());
        const double median = ms[ms.size() / 2], cpuMedian = cpu[cpu.size() / 2];
        std::printf("%8d %9zu %8zu %10d %10.3f %10.3f %14.3g\n", layers, model.graph.ops.size(), folded.classes.size(),
                    folded.searchedOps(), median, cpuMedian, static_cast<double>(model.graph.ops.size()) / (cpuMedian / 1e3));
    }
    return 0;
}
