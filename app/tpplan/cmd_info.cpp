// tpplan models / tpplan info
#include <iomanip>
#include <ostream>

#include "cli.h"
#include "graph/stats.h"
#include "mesh/mesh.h"
#include "import/catalog.h"

namespace tp::cli {

ModelOptions modelOptions(const Options& o)
{
    ModelOptions m;
    m.overrides = o.sets;
    m.batch = o.batch;
    m.seq = o.seq;
    return m;
}

int runModels(const Options& o, std::ostream& out)
{
    nlohmann::json doc = {{"models", nlohmann::json::array()}};
    for (const auto& name : builtinModelNames()) {
        const auto config = builtinModelConfig(name);
        doc["models"].push_back(
            {{"name", name}, {"family", config.value("family", "")}, {"description", config.value("description", "")}});
    }
    doc["hardware"] = nlohmann::json::array();
    for (const auto& name : hardwarePresetNames()) {
        const Hardware hw = loadHardware(name);
        doc["hardware"].push_back({{"name", name}, {"description", hw.description}});
    }
    doc["mesh_examples"] = {"8", "2x8", "8x8", "4x4x8"};
    if (o.json || !o.output.empty()) {
        emitJson(o, doc, out);
        if (o.json) return 0;
    }
    out << "Built-in models:\n";
    for (const auto& m : doc["models"])
        out << "  " << std::left << std::setw(20) << m["name"].get<std::string>() << m["description"].get<std::string>() << "\n";
    out << "Hardware presets (--hardware NAME, or a JSON file):\n";
    for (const auto& h : doc["hardware"])
        out << "  " << std::left << std::setw(20) << h["name"].get<std::string>() << h["description"].get<std::string>() << "\n";
    out << "Mesh examples: 8 (1D), 2x8 (2 nodes x 8 GPUs), 8x8, 4x4x8\n";
    return 0;
}

int runInfo(const Options& o, std::ostream& out)
{
    if (o.positional.size() != 1) throw UsageError("usage: tpplan info MODEL [--set k=v] [--batch B] [--seq S] [--json]");
    const LoadedModel model = loadModel(o.positional[0], modelOptions(o));
    const GraphStats s = computeStats(model.graph);
    nlohmann::json doc = {{"name", model.name},
                          {"ops", s.ops},
                          {"tensors", s.tensors},
                          {"params", s.params},
                          {"flops_per_step", s.trainStepFlops},
                          {"forward_flops", s.forwardFlops},
                          {"ops_by_kind", s.opsByKind}};
    if (!model.config.is_null()) doc["config"] = model.config;
    if (o.json || !o.output.empty()) {
        emitJson(o, doc, out);
        if (o.json) return 0;
    }
    out << model.name << "\n"
        << "  ops             " << s.ops << "\n"
        << "  tensors         " << s.tensors << "\n"
        << "  parameters      " << s.params << " (" << formatCount(static_cast<double>(s.params)) << ")\n"
        << "  FLOPs per step  " << formatFlops(s.trainStepFlops) << " (training: forward + backward)\n"
        << "  forward FLOPs   " << formatFlops(s.forwardFlops) << "\n"
        << "  ops by kind    ";
    for (const auto& [kind, count] : s.opsByKind) out << " " << kind << " " << count;
    out << "\n";
    return 0;
}

} // namespace tp::cli
