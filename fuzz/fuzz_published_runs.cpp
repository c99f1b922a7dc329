// The published-runs reader (tpplan bench fidelity RUNS.json): any bytes either give runs or
// throw InputError.
#include <cstddef>
#include <cstdint>
#include <string>

#include "plan/fidelity.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::string text(reinterpret_cast<const char*>(data), size);
    try {
        (void)tp::readPublishedRuns(text, "fuzz.json");
    } catch (const tp::InputError&) {}
    return 0;
}
