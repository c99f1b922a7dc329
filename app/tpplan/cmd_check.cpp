// tpplan check: re-validate a saved plan against its graph and mesh, re-cost it, and list every
// stored figure the recomputation does not reproduce.
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli.h"
#include "plan/plan_file.h"
#include "util/error.h"

namespace tp::cli {

std::string readTextFile(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    if (!in) throw InputError(path + ": cannot open the file");
    std::ostringstream buffer;
    buffer << in.rdbuf();
    return buffer.str();
}

int runCheck(const Options& o, std::ostream& out)
{
    if (o.positional.size() != 1) throw UsageError("usage: tpplan check PLAN.tpplan.json [--json]");
    const std::string& path = o.positional[0];
    LoadedPlan plan;
    try {
        plan = readPlanFile(readTextFile(path), path);
    } catch (const InputError& e) {
        // With --json the verdict is also a document; the one-line message goes to stderr as always.
        if (o.json) out << nlohmann::json{{"file", path}, {"valid", false}, {"error", e.what()}}.dump(2) << "\n";
        throw;
    }
    const Breakdown& b = plan.result.breakdown;
    if (o.json) {
        nlohmann::json differences = nlohmann::json::array();
        for (const auto& d : plan.differences)
            differences.push_back({{"path", d.path}, {"stored", d.stored}, {"recomputed", d.recomputed}, {"message", d.message}});
        nlohmann::json doc = {{"file", path},
                              {"valid", true},
                              {"differences", differences},
                              {"recomputed",
                               {{"step_time_s", b.stepSeconds},
                                {"comm_s", b.commSeconds},
                                {"per_device_bytes", b.perDeviceBytes},
                                {"fits", plan.result.fits}}}};
        out << doc.dump(2) << "\n";
        return 0;
    }
    const PlanWorkspace& ws = *plan.workspace;
    out << path << ": valid plan for " << ws.context.modelName << " on mesh " << ws.mesh.shapeText() << " ("
        << ws.context.hardwareName << ", " << ws.context.mode << ", batch " << ws.context.batch << "), "
        << ws.model.graph.ops.size() << " ops\n";
    out << "  recomputed: step time " << formatSeconds(b.stepSeconds) << ", communication " << formatSeconds(b.commSeconds)
        << ", memory/device " << formatBytes(b.perDeviceBytes) << (plan.result.fits ? "" : " (does not fit)") << "\n";
    if (plan.differences.empty()) {
        out << "  no differences from the stored figures\n";
    } else {
        out << "  " << plan.differences.size() << " difference" << (plan.differences.size() == 1 ? "" : "s")
            << " from the stored figures:\n";
        for (const auto& d : plan.differences) out << "    " << d.message << "\n";
    }
    return 0;
}

} // namespace tp::cli
