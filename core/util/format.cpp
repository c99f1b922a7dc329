#include "format.h"

#include <cmath>
#include <cstdio>

namespace tp {

namespace {

std::string printed(const char* format, double value, const char* unit)
{
    char buf[64];
    std::snprintf(buf, sizeof buf, format, value, unit);
    return buf;
}

// Rounds to `decimals` places as printf will print it (for choosing the unit).
double rounded(double v, int decimals)
{
    const double scale = std::pow(10.0, decimals);
    return std::round(v * scale) / scale;
}

std::string nonFinite(double v, const char* unit)
{
    return std::string(std::isnan(v) ? "nan" : v < 0 ? "-inf" : "inf") + (*unit ? " " : "") + unit;
}

// A value on a ladder of units, each `step` times the last: the base unit prints a whole
// number, the others `decimals` places; the largest unit takes everything above it.
struct Ladder {
    double step;
    const char* const* units; // units[0] is the base, printed whole
    int count;
    int decimals;
    const char* separator; // between number and unit
};

std::string onLadder(double v, const Ladder& l)
{
    if (!std::isfinite(v)) return nonFinite(v, l.units[0]);
    const double a = std::fabs(v);
    if (a == 0) return std::string("0") + l.separator + l.units[0];
    const std::string wholeFormat = std::string("%.0f") + l.separator + "%s";
    if (std::round(a) < l.step) return printed(wholeFormat.c_str(), v, l.units[0]);
    const std::string format = "%." + std::to_string(l.decimals) + "f" + l.separator + "%s";
    double factor = l.step;
    int u = 1;
    while (u + 1 < l.count && rounded(a / factor, l.decimals) >= l.step) {
        factor *= l.step;
        ++u;
    }
    return printed(format.c_str(), v / factor, l.units[u]);
}

} // namespace

std::string formatBytes(double bytes)
{
    static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    return onLadder(bytes, {1024.0, units, 5, 2, " "});
}

std::string formatCount(double count)
{
    static const char* const units[] = {"", "K", "M", "B", "T"};
    return onLadder(count, {1000.0, units, 5, 2, ""});
}

std::string formatFlops(double flops)
{
    static const char* const units[] = {"FLOP", "KFLOP", "MFLOP", "GFLOP", "TFLOP", "PFLOP", "EFLOP"};
    return onLadder(flops, {1000.0, units, 7, 2, " "});
}

std::string formatSeconds(double seconds)
{
    if (!std::isfinite(seconds)) return nonFinite(seconds, "s");
    const double a = std::fabs(seconds);
    if (a == 0) return "0 s";
    if (rounded(a * 1e6, 3) < 1000) return printed("%.3f %s", seconds * 1e6, "us");
    if (rounded(a * 1e3, 3) < 1000) return printed("%.3f %s", seconds * 1e3, "ms");
    return printed("%.3f %s", seconds, "s");
}

std::string formatBytes(double bytes, int significantDigits)
{
    static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    if (!std::isfinite(bytes)) return nonFinite(bytes, "B");
    int u = 0;
    double factor = 1;
    while (u < 4 && std::fabs(bytes) >= factor * 1024) {
        factor *= 1024;
        ++u;
    }
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*g %s", significantDigits, bytes / factor, units[u]);
    return buf;
}

std::string formatSeconds(double seconds, int significantDigits)
{
    if (!std::isfinite(seconds)) return nonFinite(seconds, "s");
    const double a = std::fabs(seconds);
    const double factor = a >= 1 || a == 0 ? 1 : a >= 1e-3 ? 1e-3 : 1e-6;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*g %s", significantDigits, seconds / factor,
                  factor == 1      ? "s"
                  : factor == 1e-3 ? "ms"
                                   : "us");
    return buf;
}

std::string formatSecondsDelta(double seconds) { return (seconds > 0 ? "+" : "") + formatSeconds(seconds); }

std::string formatBytesDelta(double bytes) { return (bytes > 0 ? "+" : "") + formatBytes(bytes); }

std::string formatBandwidth(double bytesPerSecond)
{
    if (!std::isfinite(bytesPerSecond)) return nonFinite(bytesPerSecond, "GB/s");
    return printed("%g %s", bytesPerSecond / 1e9, "GB/s");
}

} // namespace tp
