// The calibration results reader (tpplan calibrate --import RESULTS.json): any bytes either give
// a hardware file that reads back, or throw InputError.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "mesh/calibration.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::string text(reinterpret_cast<const char*>(data), size);
    static const tp::Hardware base = tp::loadHardware("a100-80g-dgx");
    tp::Hardware hardware;
    try {
        hardware = tp::hardwareFromCalibration(text, base, "fuzz.json");
    } catch (const tp::InputError&) {
        return 0;
    }
    // What the reader accepts, the hardware reader must read back (tpplan plan --hardware).
    try {
        (void)tp::hardwareFromJson(tp::hardwareToJsonText(hardware), "written.json");
    } catch (const tp::InputError&) {
        std::abort();
    }
    return 0;
}
