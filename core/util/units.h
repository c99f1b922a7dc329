#pragma once
// Byte quantities as users write them: "80GiB", "80GB", "512MiB", "75e9".
#include <string>

namespace tp {

/// Parses a byte quantity; GB/MB/KB are powers of 10, GiB/MiB/KiB powers of 2.
/// Throws InputError naming the text when it is not one.
double parseBytes(const std::string& text);

} // namespace tp
