#include "mesh_fit.h"

#include <algorithm>

#include "../util/error.h"
#include "../util/format.h"

namespace tp {

std::vector<std::string> presetMeshes(int gpusPerNode)
{
    const int perNode = std::max(1, gpusPerNode);
    std::vector<std::string> meshes;
    for (int devices = 1; devices < perNode; devices *= 2) meshes.push_back(std::to_string(devices));
    meshes.push_back(std::to_string(perNode));
    for (int nodes = 2; nodes <= 64; nodes *= 2) meshes.push_back(std::to_string(nodes) + "x" + std::to_string(perNode));
    return meshes;
}

std::optional<MeshFit> smallestFittingMesh(const PlanRequest& request, const PlanWorkspace& current,
                                           const std::atomic<bool>* cancel)
{
    const double limit = memoryLimitOf(request);
    if (limit < 0) return std::nullopt;
    const double capacity = memoryLimitBytes(limit, current.hardware);
    const CostSettings& s = current.costModel->settings();
    const double bytesPerParam =
        s.paramBytesPerParam + (s.training ? s.gradBytesPerParam + s.optimizerBytesPerParam : 0.0);
    const double stateBytes = static_cast<double>(current.model.graph.parameterCount()) * bytesPerParam;

    PlanRequest wider = request;
    wider.locks.clear();
    wider.compareBaselines.clear();
    wider.compareUnlocked = false;
    int searched = 0;
    Planner planner; // its own: the caller's planner keeps its sessions for the current mesh
    for (const std::string& text : presetMeshes(current.hardware.gpusPerNode)) {
        const int devices = parseMesh(text, current.hardware).devices();
        if (devices <= current.mesh.devices() || stateBytes / devices > capacity) continue;
        if (cancel && cancel->load()) throw Cancelled();
        wider.mesh = text;
        const PlannerResult planned = planner.plan(wider, cancel);
        ++searched;
        if (!planned.result.fits) continue;
        MeshFit fit;
        fit.mesh = text;
        fit.devices = devices;
        fit.stepSeconds = planned.result.breakdown.stepSeconds;
        fit.bytes = planned.result.breakdown.perDeviceBytes;
        fit.meshesSearched = searched;
        for (const auto& c : planned.candidates)
            if (c.outcome == SettingsCandidate::Outcome::Chosen) fit.settings = settingsText(c);
        return fit;
    }
    return std::nullopt;
}

std::string meshFitText(const MeshFit& fit)
{
    std::string text = "fits on " + fit.mesh + " (" + std::to_string(fit.devices) + " devices): " +
                       formatSeconds(fit.stepSeconds) + " per step, " + formatBytes(fit.bytes) + " per device";
    if (!fit.settings.empty()) text += ", " + fit.settings;
    return text;
}

} // namespace tp
