#pragma once
// Bounds on the JSON text the readers accept, checked before parsing. nlohmann::json parses
// iteratively, but dumping, copying and comparing a value recurse once per nesting level, so a
// file of a million '[' would overflow the stack in an error message; and a parsed document
// takes about ten times its text in memory.
#include <cstdint>
#include <string>
#include <string_view>

namespace tp {

/// Deeper than any of our formats or a Hugging Face config needs (a plan embedding a graph: 6).
inline constexpr int kMaxJsonDepth = 64;
/// A graph file of 1,000,000 ops is about 300 MB; nothing real comes near this.
inline constexpr std::uintmax_t kMaxJsonFileBytes = std::uintmax_t{512} << 20;

/// Throws InputError "<origin>: ..." when `text` is larger than kMaxJsonFileBytes or nests
/// arrays and objects deeper than kMaxJsonDepth (brackets inside strings do not count).
void checkJsonLimits(std::string_view text, const std::string& origin);

} // namespace tp
