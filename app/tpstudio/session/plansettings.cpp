#include "plansettings.h"

#include <sstream>

#include "plan/plan_file.h"
#include "util/error.h"
#include "util/units.h"

namespace tp {

PlanRequest PlanSettings::toRequest(const std::vector<LockRequest>& locks) const
{
    PlanRequest request;
    request.model = model;
    request.modelOptions.overrides = overrides;
    request.modelOptions.batch = batch;
    request.modelOptions.seq = seq;
    request.mesh = mesh;
    request.hardware = hardware;
    request.mode = mode;
    request.memoryLimit = memoryLimit;
    request.microBatch = microBatch;
    request.zero = zero;
    request.pipeline = pipeline;
    request.schedule = schedule;
    request.stageLayers = stageLayers;
    request.overlapChunks = overlapChunks;
    request.intraNodeGBps = intraNodeGBps;
    request.interNodeGBps = interNodeGBps;
    for (const auto& lock : locks) request.locks.push_back(lockText(lock));
    return request;
}

std::string lockText(const LockRequest& lock) { return lock.pattern + "=" + lock.strategy; }

std::string overrideValue(const std::vector<std::string>& overrides, const std::string& key)
{
    std::string value;
    for (const auto& item : overrides) // the last one wins, as in applyOverrides
        if (item.size() > key.size() && item.compare(0, key.size(), key) == 0 && item[key.size()] == '=')
            value = item.substr(key.size() + 1);
    return value;
}

std::vector<std::string> withOverride(const std::vector<std::string>& overrides, const std::string& key, const std::string& value)
{
    std::vector<std::string> out;
    bool placed = false;
    for (const auto& item : overrides) {
        const bool same = item.size() > key.size() && item.compare(0, key.size(), key) == 0 && item[key.size()] == '=';
        if (!same) {
            out.push_back(item);
        } else if (!placed && !value.empty()) {
            out.push_back(key + "=" + value);
            placed = true;
        }
    }
    if (!placed && !value.empty()) out.push_back(key + "=" + value);
    return out;
}

namespace {

using nlohmann::json;

} // namespace

std::string writeProject(const ProjectData& project)
{
    ProjectFile file;
    const PlanSettings& s = project.settings;
    file.model = s.model;
    file.overrides = s.overrides;
    file.overlapChunks = s.overlapChunks;
    file.mesh = s.mesh;
    file.hardware = s.hardware;
    file.batch = s.batch;
    file.seq = s.seq;
    file.mode = s.mode;
    file.microBatch = s.microBatch;
    file.zero = s.zero;
    file.pipeline = s.pipeline;
    file.schedule = s.schedule;
    file.stageLayers = s.stageLayers;
    file.memoryLimit = s.memoryLimit;
    file.intraNodeGBps = s.intraNodeGBps;
    file.interNodeGBps = s.interNodeGBps;
    for (const auto& lock : project.locks) file.locks.push_back(lockText(lock));
    file.view = {{"expanded", project.expandedClasses}, {"selected", project.selectedOp}};
    return writeProjectJson(file);
}

ProjectData readProject(const std::string& text, const std::string& origin)
{
    return projectDataOf(readProjectJson(text, origin));
}

ProjectData projectDataOf(const ProjectFile& file)
{
    ProjectData p;
    PlanSettings& s = p.settings;
    s.model = file.model;
    s.overrides = file.overrides;
    s.overlapChunks = file.overlapChunks;
    s.mesh = file.mesh;
    s.hardware = file.hardware;
    s.batch = file.batch;
    s.seq = file.seq;
    s.mode = file.mode;
    s.microBatch = file.microBatch;
    s.zero = file.zero;
    s.pipeline = file.pipeline;
    s.schedule = file.schedule;
    s.stageLayers = file.stageLayers;
    s.memoryLimit = file.memoryLimit;
    s.intraNodeGBps = file.intraNodeGBps;
    s.interNodeGBps = file.interNodeGBps;
    for (const auto& text : file.locks) p.locks.push_back(parseLockRequest(text));
    // The view is the GUI's own: tolerate what it does not understand.
    const json& view = file.view;
    if (view.is_object()) {
        if (view.contains("expanded") && view["expanded"].is_array())
            for (const auto& label : view["expanded"])
                if (label.is_string()) p.expandedClasses.push_back(label.get<std::string>());
        if (view.contains("selected") && view["selected"].is_string()) p.selectedOp = view["selected"].get<std::string>();
    }
    return p;
}

ProjectData projectFromPlanJson(const json& doc, const std::string& origin) { return projectDataOf(projectOfPlan(doc, origin)); }

} // namespace tp
