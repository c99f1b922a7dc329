#pragma once
// Exact domain reduction before variable elimination: a value of a variable that another value
// of it can always replace at no greater cost (neighbourhood substitutability, Freuder 1991) is
// dropped, so every elimination step over that variable runs on a smaller domain.
#include <vector>

#include "factor.h"

namespace tp {

/// Drops from each variable not `kept` every value `a` for which another value `b` satisfies
/// sum over the factors F on the variable of max over F's other variables of F(b) - F(a) <= 0:
/// any assignment with `a` costs at least as much with `b` in its place, so the minimum stays
/// (ties may then take another least assignment). The factors are cut to the kept values and
/// `domainSizes` shrunk to match. Only variables whose `work` (per variable, the elimination
/// work its domain multiplies: the sizes of the steps it takes part in) is at least `worth`
/// times the test are examined, and none whose factors hold more than `budget` entries times
/// their domain (the test's worst case).
ValueMap dropSubstitutableValues(std::vector<Factor>& factors, std::vector<int>& domainSizes, const std::vector<bool>& kept,
                                 const std::vector<double>& work, double worth, double budget = 4e7);

} // namespace tp
