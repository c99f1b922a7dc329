// The plan file readers (.tpplan.json): readPlanFile rebuilds the model, mesh and cost model a
// plan names and re-validates every strategy, and projectOfPlan (what tpstudio restores when it
// opens a plan) reads its settings; any bytes must either load or throw InputError.
#include <cstddef>
#include <cstdint>
#include <string>

#include "plan/plan_file.h"
#include "util/error.h"
#include "util/json_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::string text(reinterpret_cast<const char*>(data), size);
    try {
        const tp::LoadedPlan plan = tp::readPlanFile(text, "fuzz.tpplan.json");
        (void)tp::writePlanFile(tp::planDocument(plan));
    } catch (const tp::InputError&) {}
    try {
        (void)tp::projectOfPlan(tp::parseJsonText(text, "fuzz.tpplan.json"), "fuzz.tpplan.json");
    } catch (const tp::InputError&) {}
    return 0;
}
