// tpplan verify: run a plan on simulated devices (each holding only its slices, the plan's
// collectives performed in memory) and compare every op with a single-device run.
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <ostream>

#include "cli.h"
#include "util/error.h"
#include "verify/verify.h"

namespace tp::cli {

int runVerify(const Options& o, std::ostream& out)
{
    if (o.positional.size() != 1) throw UsageError("usage: tpplan verify PLAN.tpplan.json [--devices-as-threads] [--json]");
    const std::string& path = o.positional[0];
    nlohmann::json plan;
    try {
        plan = nlohmann::json::parse(readTextFile(path));
    } catch (const nlohmann::json::parse_error& e) {
        throw InputError(path + ": not JSON (" + e.what() + ")");
    }
    verify::VerifyOptions options;
    options.devicesAsThreads = o.devicesAsThreads;
    verify::VerifyReport r;
    try {
        r = verify::verifyPlan(plan, options);
    } catch (const InputError& e) {
        throw InputError(path + ": " + e.what());
    }
    if (o.json || !o.output.empty()) {
        nlohmann::json ops = nlohmann::json::array(), collectives = nlohmann::json::array();
        for (const auto& c : r.ops)
            ops.push_back({{"name", c.name}, {"kind", c.kind}, {"strategy", c.strategy},
                           {"max_error", std::isfinite(c.maxError) ? nlohmann::json(c.maxError) : nlohmann::json(nullptr)},
                           {"ok", c.ok}, {"note", c.note}});
        for (const auto& c : r.collectives)
            collectives.push_back({{"at", c.at}, {"kind", c.kind}, {"axis", c.axis}, {"performed", c.performed}, {"in_shrunk_model", c.inShrunkModel}});
        emitJson(o, {{"file", path}, {"passed", r.passed}, {"failed_op", r.failedOp}, {"message", r.message},
                     {"mesh", r.mesh}, {"devices", r.devices}, {"mode", r.mode}, {"executed", "forward"},
                     {"shrunk", r.shrunk}, {"ops", ops}, {"collectives", collectives}, {"missing", r.missing},
                     {"collectives_performed", r.collectivesPerformed}},
                 out);
    }
    if (!o.json) {
        out << path << ": mesh " << r.mesh << " (" << r.devices << " simulated devices), forward pass";
        if (r.mode == "train") out << " (gradients not executed)";
        out << "\n  shrunk model:";
        for (const auto& s : r.shrunk) out << " " << s;
        out << "\n  " << std::left << std::setw(40) << "op" << std::setw(14) << "kind" << std::setw(18) << "strategy" << "max rel. error\n";
        for (const auto& c : r.ops) {
            char err[32];
            std::snprintf(err, sizeof err, "%.2e", c.maxError);
            out << "  " << std::left << std::setw(40) << c.name << std::setw(14) << c.kind << std::setw(18) << c.strategy
                << (std::isfinite(c.maxError) ? err : "cannot run") << (c.ok ? "" : "  FAIL") << "\n";
            if (!c.ok && !c.note.empty()) out << "      " << c.note << "\n";
        }
        out << "  forward collectives listed in the plan, times performed:\n";
        for (const auto& c : r.collectives)
            out << "    " << std::left << std::setw(15) << c.kind << "over " << c.axis << " after " << std::setw(36) << c.at << c.performed << "\n";
        for (const auto& m : r.missing) out << "  missing: " << m << "\n";
        out << (r.passed ? "PASS: " : "FAIL: ") << r.message << "\n";
    }
    if (!r.passed) std::cerr << "tpplan: verify failed: " << r.message << "\n";
    return r.passed ? 0 : 3;
}

} // namespace tp::cli
