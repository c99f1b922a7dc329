#pragma once
// The op table: one row per OpKind. Everything kind-specific lives in the row; the rest of the
// core reads the row and the op's signature, never switches on the kind.
#include <map>
#include <optional>
#include <string_view>
#include <vector>

#include "graph.h"
#include "signature.h"

namespace tp {

/// How a kind assigns non-default roles to its loop dims.
enum class RoleRule : std::uint8_t {
    None,             ///< defaults: in an output -> Parallel, else Contracted
    NormalizedLast,   ///< the loop of input 0's last dim is ReducedNonlinear (softmax, norms)
    GatherContracted, ///< contracted loops are Gather (embedding lookup)
    SpatialHW,        ///< loops of output dims 2 and 3 (NCHW) are Spatial (conv, pool)
    AxisFixed,        ///< the loop(s) of the attr "axis" dim of the joined operand are Spatial
    Routed,           ///< only the loops of output 0's first and last dims (batch, feature) may be
                      ///< split; token, capacity and expert loops are fixed (Spatial) (MoE dispatch)
};

struct OpKindInfo {
    OpKind kind;
    std::string_view name;
    int minInputs;
    int maxInputs; ///< -1: any number
    int minOutputs;
    int maxOutputs; ///< -1: any number
    RoleRule roles;
    double flopsPerPoint;    ///< forward FLOPs per point of the iteration space
    double backwardFactor;   ///< backward FLOPs / forward FLOPs
    unsigned savedInputs;    ///< bit i: input i is kept for the backward pass (weights never count)
    bool savesOutput;        ///< output 0 is kept for the backward pass
    int maskBytesPerElement; ///< a mask kept for backward, bytes per output element (dropout)
    bool elementwise;        ///< the default equation aligns operands numpy-style
};

const OpKindInfo& opKindInfo(OpKind kind);

/// How an op runs where no fused kernel does it: as separate passes over its input 0 (the loss
/// without a fused cross-entropy kernel, CostSettings::fusedCrossEntropy; RMSNorm as eager
/// PyTorch's composite, without fused kernels, CostSettings::fusedKernels). Bytes per element of
/// input 0 streamed in the forward and the backward pass, and kept for backward in place of
/// input 0.
struct UnfusedPasses {
    double forwardBytes, backwardBytes, keptBytes;
};
/// The unfused form of `kind` under these kernel settings, or null when it runs as one kernel.
const UnfusedPasses* unfusedPasses(OpKind kind, bool fusedKernels, bool fusedCrossEntropy);
const std::vector<OpKindInfo>& allOpKinds();
std::optional<OpKind> parseOpKind(std::string_view name);
std::string_view opKindName(OpKind kind);

/// The equation used when an op carries none: derived from the kind, the operand ranks and
/// attrs. Throws InputError when the kind needs an explicit equation for these ranks.
std::string defaultEquation(const Op& op, const Graph& graph);

/// The op's signature with roles applied. Throws InputError naming the op and the field.
Signature opSignature(const Op& op, const Graph& graph);

/// opSignature for every op of a graph, each distinct (kind, equation, attrs, shapes) parsed
/// once: a model's repeated layers share a few dozen signatures over thousands of ops.
class SignatureCache {
public:
    const Signature& of(const Op& op, const Graph& graph);

private:
    std::map<std::string, Signature> byKey_;
};

/// Forward FLOPs of the op (whole, unsharded).
double forwardFlops(const Signature& sig, const OpKindInfo& info);

} // namespace tp
