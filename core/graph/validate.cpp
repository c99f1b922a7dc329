#include "validate.h"

#include <limits>

#include "../util/error.h"
#include "opkinds.h"

namespace tp {

void validateGraph(const Graph& g)
{
    constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
    for (size_t i = 0; i < g.tensors.size(); ++i) {
        const Tensor& t = g.tensors[i];
        const std::string where = "tensor '" + t.name + "'";
        if (t.id != static_cast<TensorId>(i))
            throw InputError(where + ": field 'id' is " + std::to_string(t.id) + " but must equal its index " +
                             std::to_string(i));
        std::int64_t product = 1;
        for (size_t d = 0; d < t.shape.size(); ++d) {
            if (t.shape[d] <= 0)
                throw InputError(where + ": field 'shape' dim " + std::to_string(d) + " is " + std::to_string(t.shape[d]) +
                                 "; dims must be positive");
            if (product > kMax / t.shape[d]) throw InputError(where + ": field 'shape' has more elements than fit in 64 bits");
            product *= t.shape[d];
        }
    }
    std::vector<OpId> producer(g.tensors.size(), -1);
    for (size_t i = 0; i < g.ops.size(); ++i) {
        const Op& op = g.ops[i];
        const std::string where = "op '" + op.name + "'";
        if (op.id != static_cast<OpId>(i))
            throw InputError(where + ": field 'id' is " + std::to_string(op.id) + " but must equal its index " +
                             std::to_string(i));
        const auto& info = opKindInfo(op.kind);
        auto arity = [&](const char* field, size_t n, int lo, int hi) {
            if (static_cast<int>(n) < lo || (hi >= 0 && static_cast<int>(n) > hi))
                throw InputError(where + ": field '" + field + "' has " + std::to_string(n) +
                                 (n == 1 ? " entry; " : " entries; ") + std::string(info.name) + " takes " + std::to_string(lo) +
                                 (hi < 0     ? " or more"
                                  : hi == lo ? ""
                                             : " to " + std::to_string(hi)));
        };
        arity("inputs", op.inputs.size(), info.minInputs, info.maxInputs);
        arity("outputs", op.outputs.size(), info.minOutputs, info.maxOutputs);
        for (auto t : op.inputs)
            if (t < 0 || static_cast<size_t>(t) >= g.tensors.size())
                throw InputError(where + ": field 'inputs' names tensor " + std::to_string(t) + ", which does not exist");
        for (auto t : op.outputs) {
            if (t < 0 || static_cast<size_t>(t) >= g.tensors.size())
                throw InputError(where + ": field 'outputs' names tensor " + std::to_string(t) + ", which does not exist");
            const Tensor& out = g.tensors[static_cast<size_t>(t)];
            if (out.role == TensorRole::Weight || out.role == TensorRole::Input)
                throw InputError(where + ": field 'outputs' names " + std::string(tensorRoleName(out.role)) + " tensor '" +
                                 out.name + "'; only activations and outputs are produced by ops");
            if (producer[static_cast<size_t>(t)] >= 0)
                throw InputError(where + ": field 'outputs' names tensor '" + out.name + "', already produced by op '" +
                                 g.ops[static_cast<size_t>(producer[static_cast<size_t>(t)])].name + "'");
            producer[static_cast<size_t>(t)] = op.id;
        }
    }
    for (const Tensor& t : g.tensors)
        if ((t.role == TensorRole::Activation || t.role == TensorRole::Output) && producer[static_cast<size_t>(t.id)] < 0)
            throw InputError("tensor '" + t.name + "': role '" + std::string(tensorRoleName(t.role)) +
                             "' but no op produces it (dangling tensor)");
    SignatureCache signatures;
    for (const Op& op : g.ops) {
        try {
            signatures.of(op, g);
        } catch (const InputError& e) {
            // The signature names operands by position; add their names and shapes so the
            // reader can tell which tensor disagrees with the equation.
            auto list = [&](const std::vector<TensorId>& ids) {
                std::string s;
                for (auto t : ids) {
                    const Tensor& tensor = g.tensor(t);
                    s += (s.empty() ? "'" : ", '") + tensor.name + "' [";
                    for (size_t d = 0; d < tensor.shape.size(); ++d) s += (d ? "," : "") + std::to_string(tensor.shape[d]);
                    s += "]";
                }
                return s;
            };
            throw InputError(std::string(e.what()) + " (inputs " + list(op.inputs) + "; outputs " + list(op.outputs) + ")");
        }
    }
    g.topologicalOrder();
}

} // namespace tp
