// tpplan explain: how one op of a plan is split over the mesh, which collectives surround it and
// why, and what the other candidate strategies would cost; with --versus, what changed against
// another plan per block class and per component.
#include <cmath>
#include <filesystem>
#include <map>
#include <iomanip>
#include <ostream>

#include "cli.h"
#include "explain/explain.h"
#include "plan/plan_file.h"
#include "search/evaluate.h"
#include "util/error.h"

namespace tp::cli {

namespace {

using nlohmann::json;

struct Loaded {
    std::shared_ptr<const PlanWorkspace> ws;
    SearchResult result;
    PlanRequest request; ///< for a model source: what made the plan (the comparison reuses it)
    bool fromFile = false;
};

bool isPlanFile(const std::string& path)
{
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) return false;
    const std::string text = readTextFile(path);
    return text.find("\"tpstudio.plan\"") != std::string::npos;
}

Loaded load(const Options& o, const std::string& source)
{
    Loaded l;
    if (isPlanFile(source)) {
        LoadedPlan plan = readPlanFile(readTextFile(source), source);
        l.ws = std::move(plan.workspace);
        l.result = std::move(plan.result);
        l.fromFile = true;
        return l;
    }
    l.request = planRequest(o, source);
    // The plan tpplan plan makes, with the settings it chooses (planner.h).
    Planner planner;
    PlannerResult planned = planner.plan(l.request);
    l.ws = planned.workspace;
    l.result = std::move(planned.result);
    return l;
}

/// The plan to compare against and the workspace that costs it.
struct Versus {
    SearchResult result;
    std::shared_ptr<const PlanWorkspace> ws; ///< null: the base plan's own
};

// A baseline or the unlocked search of a model is planned as tpplan plan plans it, choosing its
// own settings (the GUI's breakdown and explain dock show it so); against a plan file, and for
// a plan file's own layout, the file's settings cost both.
Versus versusPlan(const Options& o, Loaded& base)
{
    const CostModel& model = *base.ws->costModel;
    if (o.versus == "megatron" || o.versus == "megatron-sp" || o.versus == "dp" || o.versus == "search") {
        PlanRequest r = base.request;
        r.locks.clear();
        r.baseline = o.versus == "search" ? "" : o.versus;
        Versus v;
        if (base.fromFile) {
            r.model = base.ws->context.modelSource;
            r.mode = base.ws->context.mode;
            v.result = tp::runPlan(*base.ws, r);
        } else {
            Planner planner;
            PlannerResult planned = planner.plan(r);
            v.result = std::move(planned.result);
            v.ws = std::move(planned.workspace);
        }
        if (o.versus == "search") v.result.method = "search (no locks)";
        return v;
    }
    if (!isPlanFile(o.versus))
        throw UsageError("--versus '" + o.versus + "': use megatron, megatron-sp, dp, search or a .tpplan.json file");
    // The other plan is read like any plan file (validated, recompute modes kept), then costed
    // by this plan's model, matched op by op by name.
    const LoadedPlan other = readPlanFile(readTextFile(o.versus), o.versus);
    const CostModel& otherModel = *other.workspace->costModel;
    const Graph& g = model.graph();
    std::map<std::string, OpId> otherOpByName;
    for (const auto& op : otherModel.graph().ops) otherOpByName.emplace(op.name, op.id);
    std::vector<int> strategies(g.ops.size(), 0);
    std::vector<Recompute> recompute(g.ops.size(), Recompute::None);
    for (const auto& op : g.ops) {
        auto it = otherOpByName.find(op.name);
        if (it == otherOpByName.end())
            throw InputError(o.versus + ": op '" + op.name + "' is not in this plan (a plan of another model?)");
        const auto k = static_cast<size_t>(it->second);
        const OpStrategy& theirs = otherModel.strategies(it->second)[static_cast<size_t>(other.result.strategyOfOp[k])];
        const std::string text = strategyToString(theirs, otherModel.signature(it->second), otherModel.mesh());
        const int s = model.findStrategy(op.id, parseStrategy(text, model.signature(op.id), model.mesh()));
        if (s < 0) throw InputError(o.versus + ": op '" + op.name + "': strategy '" + text + "' is not a candidate here");
        strategies[static_cast<size_t>(op.id)] = s;
        if (!other.result.recomputeOfOp.empty()) recompute[static_cast<size_t>(op.id)] = other.result.recomputeOfOp[k];
    }
    return {evaluatePlan(model, &base.ws->folded, strategies, recompute, std::filesystem::path(o.versus).filename().string()),
            nullptr};
}

json componentsJson(const explain::Components& c)
{
    return {{"step_s", c.stepSeconds},
            {"compute_s", c.computeSeconds},
            {"comm_s", c.commSeconds},
            {"comm_by_kind", c.commByKind},
            {"memory_bytes", c.memoryBytes}};
}

json stepJson(const explain::CollectiveStep& s)
{
    return {{"kind", s.kind},       {"axis", s.axis},     {"phase", s.phase},       {"bytes", s.bytes},
            {"seconds", s.seconds}, {"tensor", s.tensor}, {"producer", s.producer}, {"consumer", s.consumer},
            {"from", s.fromSpec},   {"to", s.toSpec},     {"why", s.why},           {"formula", s.formula}};
}

json explanationJson(const explain::OpExplanation& x)
{
    json loops = json::array(), operands = json::array(), whyNot = json::array();
    for (const auto& l : x.loops)
        loops.push_back({{"label", std::string(1, l.label)}, {"size", l.size}, {"role", l.role}, {"axes", l.axes}});
    for (const auto& o : x.operands) {
        json devices = json::array();
        for (const auto& d : o.devices) devices.push_back({{"coords", d.coords}, {"ranges", d.ranges}});
        operands.push_back({{"role", o.role},
                            {"tensor", o.tensor},
                            {"shape", o.shape},
                            {"spec", o.spec},
                            {"words", o.words},
                            {"devices", devices}});
    }
    for (const auto& w : x.whyNot)
        whyNot.push_back({{"strategy", w.strategy},
                          {"chosen", w.chosen},
                          {"delta", componentsJson(w.delta)},
                          {"objective_delta", w.objectiveDelta}});
    auto steps = [](const std::vector<explain::CollectiveStep>& v) {
        json a = json::array();
        for (const auto& s : v) a.push_back(stepJson(s));
        return a;
    };
    return {{"op", x.op},
            {"kind", x.kind},
            {"einsum", x.einsum},
            {"strategy", x.strategy},
            {"block", x.block},
            {"loops", loops},
            {"operands", operands},
            {"incoming", steps(x.incoming)},
            {"own", steps(x.own)},
            {"outgoing", steps(x.outgoing)},
            {"compute_s", x.computeSeconds},
            {"comm_s", x.commSeconds},
            {"memory_bytes", x.memoryBytes},
            {"why_not", whyNot},
            {"summary", x.summary}};
}

void printExplanation(const explain::OpExplanation& x, const Mesh& mesh, std::ostream& out)
{
    out << x.op << "  " << x.kind << "  " << x.einsum << "  strategy " << x.strategy;
    if (!x.block.empty()) out << "  (block '" << x.block << "')";
    out << "\n  mesh " << mesh.shapeText() << ":";
    for (const auto& a : mesh.axes) out << " " << a.name << "=" << a.size << " (" << formatBandwidth(a.link.bandwidth) << ")";
    out << "\n  loops:";
    for (const auto& l : x.loops)
        out << " " << l.label << "=" << l.size << " " << l.role << (l.axes == "-" ? "" : " split over " + l.axes) << ";";
    out << "\n\n";
    for (const auto& o : x.operands) {
        out << "  " << o.role << " '" << o.tensor << "' [";
        for (size_t d = 0; d < o.shape.size(); ++d) out << (d ? "," : "") << o.shape[d];
        out << "]  " << o.spec << "\n    " << o.words << "\n" << o.picture;
        const size_t shown = std::min<size_t>(o.devices.size(), 4);
        for (size_t k = 0; k < shown; ++k) {
            out << "    device (";
            for (size_t a = 0; a < o.devices[k].coords.size(); ++a)
                out << (a ? "," : "") << mesh.axes[a].name << "=" << o.devices[k].coords[a];
            out << ") holds [";
            for (size_t d = 0; d < o.devices[k].ranges.size(); ++d)
                out << (d ? ", " : "") << o.devices[k].ranges[d].first << ":" << o.devices[k].ranges[d].second;
            out << "]\n";
        }
        if (o.devices.size() > shown) out << "    ... " << o.devices.size() - shown << " more devices\n";
        out << "\n";
    }
    auto steps = [&](const char* title, const std::vector<explain::CollectiveStep>& v) {
        out << "  " << title << (v.empty() ? ": none\n" : ":\n");
        for (const auto& s : v) {
            out << "    " << s.kind << " over " << s.axis << " (" << s.phase << ")";
            if (!s.producer.empty())
                out << " after '" << s.producer << "' " << s.fromSpec << " -> " << s.toSpec << " for '" << s.consumer << "'";
            out << "\n      why: " << s.why << "\n      cost: " << s.formula << "\n";
        }
    };
    steps("collectives into this op (charged to it)", x.incoming);
    steps("the op's own collectives", x.own);
    steps("collectives after this op (charged to its consumers)", x.outgoing);
    out << "\n  cost per device per step: compute " << formatSeconds(x.computeSeconds) << ", communication "
        << formatSeconds(x.commSeconds) << exposedInWords(x) << ", memory " << formatBytes(x.memoryBytes) << "\n\n";
    out << "  why not (other candidates, neighbours fixed; candidate minus chosen):\n";
    out << "    " << std::left << std::setw(22) << "strategy" << std::setw(14) << "step" << std::setw(14) << "compute"
        << std::setw(14) << "comm" << std::setw(14) << "memory" << std::setw(14) << "objective"
        << "by collective\n";
    for (const auto& w : x.whyNot) {
        out << "    " << std::left << std::setw(22) << (w.strategy + (w.chosen ? " *" : ""));
        if (w.chosen) {
            out << "chosen\n";
            continue;
        }
        out << std::setw(14) << formatSecondsDelta(w.delta.stepSeconds) << std::setw(14)
            << formatSecondsDelta(w.delta.computeSeconds) << std::setw(14) << formatSecondsDelta(w.delta.commSeconds)
            << std::setw(14) << formatBytesDelta(w.delta.memoryBytes) << std::setw(14) << formatSecondsDelta(w.objectiveDelta);
        bool any = false;
        for (const auto& [k, v] : w.delta.commByKind)
            if (v != 0) {
                out << (any ? ", " : "") << k << " " << formatSecondsDelta(v);
                any = true;
            }
        out << "\n";
    }
    out << "\n  " << x.summary << "\n";
}

json diffJson(const explain::PlanDiff& d)
{
    json blocks = json::array(), changes = json::array();
    for (const auto& b : d.blocks)
        blocks.push_back({{"block", b.block},
                          {"instances", b.instances},
                          {"ops_changed", b.opsChanged},
                          {"base", componentsJson(b.base)},
                          {"other", componentsJson(b.other)}});
    for (const auto& c : d.changes) changes.push_back({{"op", c.op}, {"before", c.before}, {"after", c.after}});
    return {{"base", d.baseMethod},
            {"other", d.otherMethod},
            {"base_total", componentsJson(d.base)},
            {"other_total", componentsJson(d.other)},
            {"blocks", blocks},
            {"changes", changes}};
}

void printDiff(const explain::PlanDiff& d, std::ostream& out)
{
    out << "plan '" << d.baseMethod << "' versus '" << d.otherMethod << "' (other minus this):\n";
    auto row = [&](const std::string& name, const explain::Components& a, const explain::Components& b) {
        out << "  " << std::left << std::setw(26) << name << std::setw(12) << formatSeconds(a.stepSeconds) << std::setw(12)
            << formatSeconds(b.stepSeconds) << std::setw(14) << formatSecondsDelta(b.stepSeconds - a.stepSeconds) << "compute "
            << formatSecondsDelta(b.computeSeconds - a.computeSeconds);
        std::map<std::string, double> kinds = b.commByKind;
        for (const auto& [k, v] : a.commByKind) kinds[k] -= v;
        for (const auto& [k, v] : kinds)
            if (std::fabs(v) > 0) out << ", " << k << " " << formatSecondsDelta(v);
        out << ", memory " << formatBytesDelta(b.memoryBytes - a.memoryBytes) << "\n";
    };
    out << "  " << std::left << std::setw(26) << "block" << std::setw(12) << "this" << std::setw(12) << "other"
        << "change\n";
    row("whole plan", d.base, d.other);
    for (const auto& b : d.blocks)
        if (b.opsChanged > 0 || b.base.stepSeconds != b.other.stepSeconds)
            row(b.block + " x" + std::to_string(b.instances) + " (" + std::to_string(b.opsChanged) + " ops differ)", b.base,
                b.other);
    out << "  strategies that differ (first instance of each block):\n";
    if (d.changes.empty()) out << "    none\n";
    for (const auto& c : d.changes)
        out << "    " << std::left << std::setw(34) << c.op << c.before << "  ->  " << c.after << "\n";
}

} // namespace

int runExplain(const Options& o, std::ostream& out)
{
    if (o.positional.empty() || o.positional.size() > 2 || (o.positional.size() == 1 && o.versus.empty()))
        throw UsageError("usage: tpplan explain PLAN.tpplan.json|MODEL OP [options] [--versus megatron|dp|search|PLAN] [--json]");
    Loaded base = load(o, o.positional[0]);
    const CostModel& model = *base.ws->costModel;
    json doc = json::object();
    if (o.positional.size() == 2) {
        const OpId op = explain::findOp(model.graph(), o.positional[1]);
        const auto x = explain::explainOp(model, base.result, op, &base.ws->folded);
        if (o.json)
            doc["explain"] = explanationJson(x);
        else
            printExplanation(x, model.mesh(), out);
    }
    if (!o.versus.empty()) {
        const Versus other = versusPlan(o, base);
        const auto d = explain::comparePlans(model, base.ws->folded, base.result, other.result,
                                             other.ws ? other.ws->costModel.get() : nullptr);
        if (o.json)
            doc["compare"] = diffJson(d);
        else {
            if (o.positional.size() == 2) out << "\n";
            printDiff(d, out);
        }
    }
    if (o.json || !o.output.empty()) emitJson(o, doc, out);
    return 0;
}

} // namespace tp::cli
