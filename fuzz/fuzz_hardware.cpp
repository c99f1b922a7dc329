// The hardware file reader (--hardware FILE.json, and the hardware a plan file embeds): any bytes
// either give a hardware spec or throw InputError.
#include <cstddef>
#include <cstdint>
#include <string>

#include "mesh/mesh.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::string text(reinterpret_cast<const char*>(data), size);
    try {
        const tp::Hardware hardware = tp::hardwareFromJson(text, "fuzz.json");
        (void)tp::parseMesh("2x8", hardware);
    } catch (const tp::InputError&) {}
    return 0;
}
