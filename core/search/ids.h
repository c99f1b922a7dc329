#pragma once
// Named indices of the search (docs/ARCHITECTURE.md, "core/search"): a block class, an instance
// of it, an op's strategy, a spec in a sorted domain. Each is its own type, so one cannot be
// passed for another, and at() indexes a vector without a cast. A plain int inside: as cheap as
// one. Table digits in the hot loops (class tables, min-plus rows) stay plain ints.
#include <compare>
#include <cstddef>

namespace tp::search {

template <class Tag>
struct Index {
    int value = -1;
    constexpr Index() = default;
    constexpr explicit Index(int v) : value(v) {}
    constexpr std::size_t at() const { return static_cast<std::size_t>(value); }
    constexpr bool valid() const { return value >= 0; }
    constexpr auto operator<=>(const Index&) const = default;
};

using ClassId = Index<struct ClassTag>;
using InstanceId = Index<struct InstanceTag>;
using StrategyIndex = Index<struct StrategyTag>;
using SpecIndex = Index<struct SpecTag>;

} // namespace tp::search
