#pragma once
// An op strategy assigns mesh axes to the loop dims of the op's signature (each axis at most
// once, sizes must divide). Operand specs follow: a tensor dim is split by the axes of its loop;
// an output is partial over the axes that split loops it is not indexed by.
// Text form: "b=x,f=y" (loop labels of the signature), "f=x*y", "-" for fully replicated.
#include <string>
#include <vector>

#include "../graph/signature.h"
#include "spec.h"

namespace tp {

struct OpStrategy {
    std::vector<std::vector<int>> loopAxes; ///< per loop dim: axes, major first

    static OpStrategy replicated(const Signature& sig);
    AxisMask usedAxes() const;
    auto operator<=>(const OpStrategy&) const = default;
};

std::string strategyToString(const OpStrategy& strategy, const Signature& sig, const Mesh& mesh);
/// Parses "f=y,b=x" for the given signature. Throws InputError saying which part is wrong
/// (unknown dim, unknown axis, axis used twice, dim that may not be split, size not dividing).
OpStrategy parseStrategy(const std::string& text, const Signature& sig, const Mesh& mesh);

/// Why a strategy is invalid for the signature, or empty when it is valid.
std::string strategyProblem(const OpStrategy& strategy, const Signature& sig, const Mesh& mesh);

/// Every valid strategy, in a deterministic order; the first is fully replicated.
/// Each axis goes to at most one loop; axes on one loop are in mesh order (major = outer).
std::vector<OpStrategy> enumerateStrategies(const Signature& sig, const Mesh& mesh);

/// The spec of an input or output operand under a strategy.
TensorSpec inputSpec(const Signature& sig, const OpStrategy& strategy, size_t input);
TensorSpec outputSpec(const Signature& sig, const OpStrategy& strategy, size_t output);
/// Axes over which the gradient of an input is partial in the backward pass: those splitting
/// loops that do not index the input. Exception: an input indexed only by loops that index an
/// output (a bias, "bsh,hf,f->bsf") is added to the result, so only splits of output loops it
/// lacks make its gradient partial, not splits of contracted loops.
AxisMask inputGradientPartial(const Signature& sig, const OpStrategy& strategy, size_t input);

} // namespace tp
