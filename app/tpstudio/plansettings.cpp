#include "plansettings.h"

#include <sstream>

#include "util/error.h"
#include "util/units.h"

namespace tp {

std::string PlanSettings::modelKey() const
{
    std::ostringstream key;
    key << model << '|' << batch << '|' << seq;
    return key.str();
}

std::string PlanSettings::workspaceKey() const
{
    std::ostringstream key;
    key << modelKey() << '|' << mesh << '|' << hardware << '|' << microBatch << '|' << mode << '|' << intraNodeGBps << '|'
        << interNodeGBps;
    return key.str();
}

PlanRequest PlanSettings::toRequest(const std::vector<LockRequest>& locks) const
{
    PlanRequest request;
    request.model = model;
    request.modelOptions.batch = batch;
    request.modelOptions.seq = seq;
    request.mesh = mesh;
    request.hardware = hardware;
    request.mode = mode;
    request.memoryLimit = memoryLimit;
    request.microBatch = microBatch;
    for (const auto& lock : locks) request.locks.push_back(lockText(lock));
    return request;
}

double PlanSettings::memoryLimitBytes() const
{
    if (memoryLimit.empty()) return 0;
    if (memoryLimit == "none") return -1;
    return parseBytes(memoryLimit);
}

std::string lockText(const LockRequest& lock) { return lock.pattern + "=" + lock.strategy; }

namespace {

using nlohmann::json;

json settingsToJson(const PlanSettings& s)
{
    json j = {{"model", s.model}, {"mesh", s.mesh},       {"hardware", s.hardware},       {"batch", s.batch},
              {"seq", s.seq},     {"micro_batch", s.microBatch}, {"mode", s.mode}, {"memory_limit", s.memoryLimit}};
    if (s.intraNodeGBps > 0) j["intra_node_GBps"] = s.intraNodeGBps;
    if (s.interNodeGBps > 0) j["inter_node_GBps"] = s.interNodeGBps;
    return j;
}

template <typename T>
T field(const json& object, const char* key, const T& fallback, const std::string& origin)
{
    if (!object.contains(key)) return fallback;
    try {
        return object.at(key).get<T>();
    } catch (const json::exception&) {
        throw InputError(origin + ": field '" + key + "' has the wrong type");
    }
}

} // namespace

json projectToJson(const ProjectData& project)
{
    json locks = json::array();
    for (const auto& lock : project.locks) locks.push_back(lockText(lock));
    return {{"format", "tpstudio.project"},
            {"version", kProjectFormatVersion},
            {"settings", settingsToJson(project.settings)},
            {"locks", locks},
            {"view", {{"expanded", project.expandedClasses}, {"selected", project.selectedOp}}}};
}

ProjectData projectFromJson(const json& doc, const std::string& origin)
{
    if (!doc.is_object() || doc.value("format", std::string()) != "tpstudio.project")
        throw InputError(origin + ": not a TP Studio project (expected \"format\": \"tpstudio.project\")");
    const int version = field<int>(doc, "version", 0, origin);
    if (version > kProjectFormatVersion)
        throw InputError(origin + ": project version " + std::to_string(version) + " is newer than this TP Studio reads (" +
                         std::to_string(kProjectFormatVersion) + ")");
    if (version < 1) throw InputError(origin + ": field 'version' is missing or invalid");
    ProjectData p;
    const json settings = doc.value("settings", json::object());
    if (!settings.is_object()) throw InputError(origin + ": field 'settings' must be an object");
    PlanSettings& s = p.settings;
    s.model = field<std::string>(settings, "model", s.model, origin);
    s.mesh = field<std::string>(settings, "mesh", s.mesh, origin);
    s.hardware = field<std::string>(settings, "hardware", s.hardware, origin);
    s.batch = field<std::int64_t>(settings, "batch", 0, origin);
    s.seq = field<std::int64_t>(settings, "seq", 0, origin);
    s.microBatch = field<std::int64_t>(settings, "micro_batch", 0, origin);
    s.mode = field<std::string>(settings, "mode", s.mode, origin);
    s.memoryLimit = field<std::string>(settings, "memory_limit", "", origin);
    s.intraNodeGBps = field<double>(settings, "intra_node_GBps", 0.0, origin);
    s.interNodeGBps = field<double>(settings, "inter_node_GBps", 0.0, origin);
    for (const auto& text : field<std::vector<std::string>>(doc, "locks", {}, origin)) p.locks.push_back(parseLockRequest(text));
    const json view = doc.value("view", json::object());
    if (view.is_object()) {
        p.expandedClasses = field<std::vector<std::string>>(view, "expanded", {}, origin);
        p.selectedOp = field<std::string>(view, "selected", "", origin);
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
    s.hardware = field<std::string>(doc.value("hardware", json::object()), "name", s.hardware, origin);
    s.batch = field<std::int64_t>(doc, "batch", 0, origin);
    s.seq = field<std::int64_t>(doc, "seq", 0, origin);
    s.microBatch = field<std::int64_t>(doc, "micro_batch", 0, origin);
    s.mode = field<std::string>(doc, "mode", s.mode, origin);
    // The limit the plan was searched under: none (0), the capacity, or a number of bytes.
    const json memory = doc.value("memory", json::object());
    const double limit = field<double>(memory, "limit_bytes", -1.0, origin);
    const double capacity = field<double>(memory, "capacity_bytes", 0.0, origin);
    if (limit == 0) s.memoryLimit = "none";
    else if (limit > 0 && limit != capacity) s.memoryLimit = std::to_string(static_cast<long long>(limit));
    // The plan's own choices come back as per-op locks only where the user had locked them;
    // the rest is searched again (the same inputs give the same plan: the search is exact).
    if (doc.contains("ops") && doc["ops"].is_array())
        for (const auto& op : doc["ops"])
            if (op.value("locked", false)) p.locks.push_back({op.value("name", ""), op.value("strategy", "-")});
    return p;
}

} // namespace tp
