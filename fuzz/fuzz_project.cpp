// The project file reader (.tpproj.json): any bytes either load or throw InputError, and a
// project that loads writes back to text that loads to the same project.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "plan/plan_file.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::string text(reinterpret_cast<const char*>(data), size);
    tp::ProjectFile project;
    try {
        project = tp::readProjectJson(text, "fuzz.tpproj.json");
    } catch (const tp::InputError&) {
        return 0;
    }
    const std::string written = tp::writeProjectJson(project);
    if (tp::writeProjectJson(tp::readProjectJson(written, "written")) != written) std::abort();
    return 0;
}
