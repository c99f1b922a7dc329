// tpplan export: a saved plan as CSV, an annotated graph image, or framework configuration.
#include <fstream>
#include <iostream>

#include "cli.h"
#include "export/export_plan.h"
#include "plan/plan_file.h"

namespace tp::cli {

int runExport(const Options& o, std::ostream& out)
{
    if (o.positional.size() != 1 || o.format.empty())
        throw UsageError("usage: tpplan export PLAN.tpplan.json --format csv|dot|svg|png|pytorch|megatron|hf-tp-plan [-o OUT]");
    const auto formats = exportFormats();
    if (std::find(formats.begin(), formats.end(), o.format) == formats.end()) {
        std::string known;
        for (const auto& f : formats) known += (known.empty() ? "" : ", ") + f;
        throw UsageError("--format '" + o.format + "': use one of " + known);
    }
    if (o.format == "png" && o.output.empty()) throw UsageError("--format png writes binary data: give -o FILE");
    const std::string& path = o.positional[0];
    const LoadedPlan plan = readPlanFile(readTextFile(path), path);
    // Exports describe the plan as recomputed; a stale stored figure is only worth a warning.
    if (!plan.differences.empty())
        std::cerr << "tpplan: warning: " << path << " differs from its recomputation in " << plan.differences.size()
                  << " figure(s) (see tpplan check); exporting the recomputed plan\n";
    const std::string bytes = exportPlan(*plan.workspace, plan.result, o.format);
    if (o.output.empty()) {
        out << bytes;
        return 0;
    }
    writeFileAtomically(o.output, bytes);
    return 0;
}

} // namespace tp::cli
