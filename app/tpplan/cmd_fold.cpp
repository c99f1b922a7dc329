// tpplan fold: block classes, instances, runs and sibling groups of a model, and the fold time.
#include <chrono>
#include <cstdio>
#include <iomanip>
#include <ostream>

#include "cli.h"
#include "fold/fold.h"
#include "import/catalog.h"

namespace tp::cli {

namespace {

// "0-95" for a run of 96 from instance 0; "7" for a lone instance.
std::string runText(const Run& run)
{
    if (run.count == 1) return std::to_string(run.firstInstance);
    return std::to_string(run.firstInstance) + "-" + std::to_string(run.firstInstance + run.count - 1);
}

} // namespace

int runFold(const Options& o, std::ostream& out)
{
    if (o.positional.size() != 1) throw UsageError("usage: tpplan fold MODEL [--set k=v] [--batch B] [--seq S] [--json]");
    const LoadedModel model = loadModel(o.positional[0], modelOptions(o));
    const auto started = std::chrono::steady_clock::now();
    const FoldedGraph folded = foldGraph(model.graph);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
    const Graph& graph = model.graph;

    nlohmann::json classes = nlohmann::json::array();
    for (const auto& block : folded.classes) {
        nlohmann::json representative = nlohmann::json::array();
        for (OpId id : block.instances.front().ops) representative.push_back(graph.ops[id].name);
        nlohmann::json runs = nlohmann::json::array();
        for (const auto& run : folded.runs)
            if (run.classId == block.id) runs.push_back({{"first", run.firstInstance}, {"count", run.count}});
        classes.push_back({{"id", block.id},
                           {"label", block.label},
                           {"ops", block.opsPerInstance()},
                           {"instances", block.instances.size()},
                           {"inputs", block.instances.front().inputs.size()},
                           {"outputs", block.instances.front().outputs.size()},
                           {"runs", runs},
                           {"representative", representative}});
    }
    nlohmann::json runs = nlohmann::json::array();
    for (const auto& run : folded.runs)
        runs.push_back({{"class", run.classId}, {"first", run.firstInstance}, {"count", run.count}});
    nlohmann::json siblings = nlohmann::json::array();
    for (const auto& group : folded.siblings)
        siblings.push_back({{"class", group.classId},
                            {"instances", group.instances},
                            {"parent_class", group.parentClass},
                            {"parent_instance", group.parentInstance}});
    const nlohmann::json doc = {{"name", model.name},
                                {"ops", folded.totalOps()},
                                {"block_classes", classes},
                                {"runs", runs},
                                {"siblings", siblings},
                                {"searched_ops", folded.searchedOps()},
                                {"fold_ratio", folded.foldRatio()},
                                {"time_ms", ms}};
    if (o.json || !o.output.empty()) {
        emitJson(o, doc, out);
        if (o.json) return 0;
    }

    char ratio[32];
    std::snprintf(ratio, sizeof ratio, "%.1f", folded.foldRatio());
    out << model.name << ": " << folded.totalOps() << " ops in " << folded.classes.size() << " block classes; search "
        << folded.searchedOps() << " ops (fold ratio " << ratio << "x); folded in " << formatSeconds(ms / 1e3) << "\n";
    out << "  " << std::right << std::setw(4) << "id"
        << "  " << std::left << std::setw(28) << "block" << std::right << std::setw(6) << "ops" << std::setw(11) << "instances"
        << "  runs / siblings\n";
    for (const auto& block : folded.classes) {
        std::string where;
        for (const auto& run : folded.runs)
            if (run.classId == block.id) where += (where.empty() ? "" : ", ") + runText(run);
        int groups = 0;
        for (const auto& group : folded.siblings)
            if (group.classId == block.id) ++groups;
        if (groups > 0)
            where += (where.empty() ? "" : "; ") + std::to_string(groups) + " sibling group" + (groups > 1 ? "s" : "") + " of " +
                     std::to_string(block.instances.size() / static_cast<size_t>(groups));
        out << "  " << std::right << std::setw(4) << block.id << "  " << std::left << std::setw(28) << block.label << std::right
            << std::setw(6) << block.opsPerInstance() << std::setw(11) << ("x" + std::to_string(block.instances.size())) << "  "
            << where << "\n";
    }
    return 0;
}

} // namespace tp::cli
