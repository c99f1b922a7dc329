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

std::vector<std::string> overridesFromConfig(const std::string& name, const nlohmann::json& config)
{
    std::vector<std::string> out;
    if (!isBuiltinModel(name) || !config.is_object()) return out;
    const ModelConfig base = builtinModelConfig(name);
    for (const auto& [key, value] : config.items()) {
        if (key == "name" || key == "batch" || key == "seq") continue;
        if (base.contains(key) && base[key] == value) continue;
        if (value.is_string())
            out.push_back(key + "=" + value.get<std::string>());
        else if (value.is_array()) {
            std::string text; // "3,4,23,3", the form --set takes for lists
            for (const auto& v : value) text += (text.empty() ? "" : ",") + v.dump();
            out.push_back(key + "=" + text);
        } else
            out.push_back(key + "=" + value.dump());
    }
    return out;
}

namespace {

using nlohmann::json;

template <typename T>
T field(const json& object, const char* key, const T& fallback, const std::string& origin)
{
    if (!object.is_object() || !object.contains(key)) return fallback;
    try {
        return object.at(key).get<T>();
    } catch (const json::exception&) {
        throw InputError(origin + ": field '" + key + "' has the wrong type");
    }
}

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
    file.memoryLimit = s.memoryLimit;
    file.intraNodeGBps = s.intraNodeGBps;
    file.interNodeGBps = s.interNodeGBps;
    for (const auto& lock : project.locks) file.locks.push_back(lockText(lock));
    file.view = {{"expanded", project.expandedClasses}, {"selected", project.selectedOp}};
    return writeProjectJson(file);
}

ProjectData readProject(const std::string& text, const std::string& origin)
{
    const ProjectFile file = readProjectJson(text, origin);
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

ProjectData projectFromPlanJson(const json& doc, const std::string& origin)
{
    if (!doc.is_object() || doc.value("format", std::string()) != "tpstudio.plan")
        throw InputError(origin + ": not a TP Studio plan (expected \"format\": \"tpstudio.plan\")");
    ProjectData p;
    PlanSettings& s = p.settings;
    const json model = doc.value("model", json::object());
    s.model = field<std::string>(model, "source", "", origin);
    if (s.model.empty()) throw InputError(origin + ": field 'model.source' is missing");
    s.mesh = field<std::string>(doc.value("mesh", json::object()), "shape", s.mesh, origin);
    const json hardware = doc.value("hardware", json::object());
    s.hardware = field<std::string>(hardware, "name", s.hardware, origin);
    s.intraNodeGBps = field<double>(hardware, "intra_node_GBps", 0.0, origin);
    s.interNodeGBps = field<double>(hardware, "inter_node_GBps", 0.0, origin);
    s.batch = field<std::int64_t>(doc, "batch", 0, origin);
    s.seq = field<std::int64_t>(doc, "seq", 0, origin);
    s.microBatch = field<std::int64_t>(doc, "micro_batch", 0, origin);
    s.mode = field<std::string>(doc, "mode", s.mode, origin);
    const std::int64_t chunks = field<std::int64_t>(doc, "overlap_chunks", 1, origin);
    if (chunks < 1 || chunks > kMaxOverlapChunks)
        throw InputError(origin + ": field 'overlap_chunks' is " + std::to_string(chunks) + ", expected 1 to " +
                         std::to_string(kMaxOverlapChunks));
    s.overlapChunks = static_cast<int>(chunks);
    // A built-in model with a changed config was planned with overrides: recover them.
    if (model.contains("config")) s.overrides = overridesFromConfig(s.model, model["config"]);
    // The limit the plan was searched under: none (0), the capacity, or a number of bytes.
    const json memory = doc.value("memory", json::object());
    const double limit = field<double>(memory, "limit_bytes", -1.0, origin);
    const double capacity = field<double>(memory, "capacity_bytes", 0.0, origin);
    if (limit == 0)
        s.memoryLimit = "none";
    else if (limit > 0 && limit != capacity)
        s.memoryLimit = std::to_string(static_cast<long long>(limit));
    // The plan's own choices come back as per-op locks only where the user had locked them;
    // the rest is searched again (the same inputs give the same plan: the search is exact).
    if (doc.contains("ops") && doc["ops"].is_array())
        for (const auto& op : doc["ops"])
            if (op.value("locked", false)) p.locks.push_back({op.value("name", ""), op.value("strategy", "-")});
    return p;
}

} // namespace tp
