#pragma once
// The one set of human-readable number formats, used by the CLI, the GUI (which converts to
// QString at the call site), explain and the exports, so that a figure reads the same everywhere.
// Fixed rules:
//   - the unit is chosen from the magnitude as it will be printed, so a value that rounds up to
//     the next unit is printed in it ("1.00 KiB", not "1024.00 B"; "1.000 s", not "1000.000 ms");
//   - a negative value prints as its magnitude with a leading '-', zero prints "0 <base unit>";
//   - NaN and infinities print as "nan" / "inf" / "-inf" followed by the base unit.
#include <string>

namespace tp {

/// Bytes in binary units: below 1 KiB a whole number ("0 B", "1023 B"), then two decimals in
/// KiB, MiB, GiB or TiB ("1.00 KiB", "1.50 GiB", "-384.00 MiB").
std::string formatBytes(double bytes);

/// Seconds with three decimals in s, ms or us ("1.500 s", "999.500 ms", "42.000 us"); "0 s".
std::string formatSeconds(double seconds);

/// The same units with `significantDigits` significant digits ("%g"), for telling two close
/// values apart (a saved plan's figures against recomputed ones): "1.2345678 s", "80.000001 GiB".
std::string formatBytes(double bytes, int significantDigits);
std::string formatSeconds(double seconds, int significantDigits);

/// A difference, always signed: "+1.500 ms", "-40.00 MiB"; zero is "0 s" / "0 B".
std::string formatSecondsDelta(double seconds);
std::string formatBytesDelta(double bytes);

/// A count with SI suffixes and two decimals ("124.44M", "1.50B", "999"); below 1000 a whole number.
std::string formatCount(double count);

/// Floating-point operations with SI prefixes and two decimals ("1.50 PFLOP", "999 FLOP").
std::string formatFlops(double flops);

/// Bandwidth in decimal GB/s, shortest form ("235 GB/s", "12.5 GB/s"), as link specs are written.
std::string formatBandwidth(double bytesPerSecond);

} // namespace tp
