#include "json_limits.h"

#include "error.h"

namespace tp {

void checkJsonLimits(std::string_view text, const std::string& origin)
{
    if (text.size() > kMaxJsonFileBytes)
        throw InputError(origin + ": " + std::to_string(text.size()) + " bytes; JSON files over " +
                         std::to_string(kMaxJsonFileBytes >> 20) + " MiB are not read");
    int depth = 0;
    bool inString = false, escaped = false;
    for (size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (inString) {
            if (escaped)
                escaped = false;
            else if (c == '\\')
                escaped = true;
            else if (c == '"')
                inString = false;
        } else if (c == '"') {
            inString = true;
        } else if (c == '[' || c == '{') {
            if (++depth > kMaxJsonDepth)
                throw InputError(origin + ": arrays and objects nest deeper than " + std::to_string(kMaxJsonDepth) +
                                 " levels (at byte " + std::to_string(i) + ")");
        } else if (c == ']' || c == '}') {
            --depth; // unbalanced brackets are the parser's to report
        }
    }
}

} // namespace tp
