#pragma once
// A cache key built field by field, for the planner's and the search's in-memory caches.

#include <charconv>
#include <string>
#include <string_view>
#include <type_traits>

namespace tp {

/// Appends text as is and numbers in their shortest exact form (std::to_chars: a double
/// round-trips, so two keys are equal exactly when their values are). Keys are made for every
/// combination of every plan and every block table; an ostringstream with its locale was 7% of
/// a re-plan after a lock (docs/PERFORMANCE.md).
struct KeyBuilder {
    std::string text;
    KeyBuilder& operator<<(std::string_view s)
    {
        text += s;
        return *this;
    }
    KeyBuilder& operator<<(char c)
    {
        text += c;
        return *this;
    }
    template <class Number>
        requires std::is_arithmetic_v<Number>
    KeyBuilder& operator<<(Number n)
    {
        if constexpr (std::is_same_v<Number, bool>) {
            text += n ? '1' : '0';
        } else {
            char buffer[32];
            text.append(buffer, std::to_chars(buffer, buffer + sizeof buffer, n).ptr);
        }
        return *this;
    }
};

} // namespace tp
