// tpplan verify: run a plan on simulated devices (each holding only its slices, the plan's
// collectives performed in memory) and compare every op with a single-device run; a train-mode
// plan also runs the backward pass and compares every op's gradients and every weight gradient.
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <ostream>

#include "cli.h"
#include "util/error.h"
#include "util/json_reader.h"
#include "verify/verify.h"

namespace tp::cli {

namespace {

nlohmann::json errorJson(double e) { return std::isfinite(e) ? nlohmann::json(e) : nlohmann::json(nullptr); }

std::string errorCell(double e)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2e", e);
    return std::isfinite(e) ? buf : "cannot run";
}

} // namespace

int runVerify(const Options& o, std::ostream& out)
{
    if (o.positional.size() != 1)
        throw UsageError("usage: tpplan verify PLAN.tpplan.json [--devices-as-threads] [--set k=v (after the shrink)] [--json]");
    const std::string& path = o.positional[0];
    const nlohmann::json plan = parseJsonText(readTextFile(path), path);
    verify::VerifyOptions options;
    options.devicesAsThreads = o.devicesAsThreads;
    options.overrides = o.sets;
    verify::VerifyReport r;
    try {
        r = verify::verifyPlan(plan, options);
    } catch (const InputError& e) {
        throw InputError(path + ": " + e.what());
    }
    if (o.json || !o.output.empty()) {
        nlohmann::json ops = nlohmann::json::array(), collectives = nlohmann::json::array();
        for (const auto& c : r.ops) {
            nlohmann::json op = {{"name", c.name},
                                 {"kind", c.kind},
                                 {"strategy", c.strategy},
                                 {"max_error", errorJson(c.maxError)},
                                 {"ok", c.ok && c.backwardOk},
                                 {"note", c.note}};
            if (c.backwardRun)
                op.update({{"backward_error", errorJson(c.backwardError)},
                           {"backward_ok", c.backwardOk},
                           {"backward_note", c.backwardNote},
                           {"weight_gradients", c.weightGradients}});
            ops.push_back(std::move(op));
        }
        for (const auto& c : r.collectives)
            collectives.push_back({{"at", c.at},
                                   {"kind", c.kind},
                                   {"axis", c.axis},
                                   {"phase", c.phase},
                                   {"performed", c.performed},
                                   {"in_shrunk_model", c.inShrunkModel}});
        emitJson(o,
                 {{"file", path},
                  {"passed", r.passed},
                  {"failed_op", r.failedOp},
                  {"failed_phase", r.failedPhase},
                  {"message", r.message},
                  {"mesh", r.mesh},
                  {"devices", r.devices},
                  {"mode", r.mode},
                  {"executed", r.backward ? "forward+backward" : "forward"},
                  {"forward_error", r.forwardError},
                  {"backward_error", r.backward ? errorJson(r.backwardError) : nlohmann::json(nullptr)},
                  {"weight_gradients", r.weightGradients},
                  {"shrunk", r.shrunk},
                  {"ops", ops},
                  {"collectives", collectives},
                  {"missing", r.missing},
                  {"unlisted", r.unlisted},
                  {"collectives_performed", r.collectivesPerformed}},
                 out);
    }
    if (!o.json) {
        out << path << ": mesh " << r.mesh << " (" << r.devices << " simulated devices), "
            << (r.backward ? "forward and backward passes" : "forward pass");
        if (r.mode == "train" && !r.backward) out << " (backward not run: the forward failed)";
        out << "\n  shrunk model:";
        for (const auto& s : r.shrunk) out << " " << s;
        out << "\n  " << std::left << std::setw(40) << "op" << std::setw(14) << "kind" << std::setw(18) << "strategy"
            << std::setw(14) << "forward" << (r.backward ? "backward (max rel. error)\n" : "(max rel. error)\n");
        for (const auto& c : r.ops) {
            out << "  " << std::left << std::setw(40) << c.name << std::setw(14) << c.kind << std::setw(18) << c.strategy
                << std::setw(14) << errorCell(c.maxError)
                << (c.backwardRun ? errorCell(c.backwardError) : std::string(r.backward ? "-" : ""))
                << (c.ok && c.backwardOk ? "" : "  FAIL") << "\n";
            if (!c.ok && !c.note.empty()) out << "      " << c.note << "\n";
            if (!c.backwardOk && !c.backwardNote.empty()) out << "      backward: " << c.backwardNote << "\n";
        }
        out << "  collectives listed in the plan, times performed:\n";
        for (const auto& c : r.collectives)
            out << "    " << std::left << std::setw(9) << c.phase << std::setw(15) << c.kind << "over " << c.axis << " after "
                << std::setw(36) << c.at << c.performed << "\n";
        for (const auto& m : r.missing) out << "  missing: " << m << "\n";
        for (const auto& m : r.unlisted) out << "  performed but not listed in the plan: " << m << "\n";
        out << (r.passed ? "PASS: " : "FAIL: ") << r.message << "\n";
    }
    if (!r.passed) std::cerr << "tpplan: verify failed: " << r.message << "\n";
    return r.passed ? 0 : 3;
}

} // namespace tp::cli
