#include "units.h"

#include <cmath>

#include "error.h"

namespace tp {

double parseBytes(const std::string& text)
{
    struct Unit {
        const char* suffix;
        double factor;
    };
    static const Unit units[] = {{"TiB", 1099511627776.0},
                                 {"GiB", 1073741824.0},
                                 {"MiB", 1048576.0},
                                 {"KiB", 1024.0},
                                 {"TB", 1e12},
                                 {"GB", 1e9},
                                 {"MB", 1e6},
                                 {"KB", 1e3},
                                 {"B", 1.0}};
    double factor = 1;
    std::string number = text;
    for (const auto& u : units) {
        const std::string suffix = u.suffix;
        if (text.size() > suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0) {
            factor = u.factor;
            number = text.substr(0, text.size() - suffix.size());
            break;
        }
    }
    try {
        size_t used = 0;
        const double v = std::stod(number, &used);
        if (used == number.size() && std::isfinite(v) && v >= 0) return v * factor;
    } catch (const std::exception&) {}
    throw InputError("'" + text + "' is not a byte quantity (e.g. 80GiB, 40GB, 512MiB)");
}

} // namespace tp
