#include "stats.h"

#include "opkinds.h"

namespace tp {

GraphStats computeStats(const Graph& g)
{
    GraphStats s;
    s.ops = static_cast<std::int64_t>(g.ops.size());
    s.tensors = static_cast<std::int64_t>(g.tensors.size());
    s.params = g.parameterCount();
    SignatureCache signatures;
    for (const auto& op : g.ops) {
        const auto& info = opKindInfo(op.kind);
        const double f = forwardFlops(signatures.of(op, g), info);
        s.forwardFlops += f;
        s.trainStepFlops += f * (1.0 + info.backwardFactor);
        ++s.opsByKind[std::string(info.name)];
    }
    return s;
}

} // namespace tp
