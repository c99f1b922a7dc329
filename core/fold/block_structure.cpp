#include "block_structure.h"

#include "../util/error.h"

namespace tp::fold_detail {

GraphIndex::GraphIndex(const Graph& graph)
{
    const auto tensorCount = graph.tensors.size();
    producer.assign(tensorCount, -1);
    producerSlot.assign(tensorCount, 0);
    consumerStart.assign(tensorCount + 1, 0);
    auto checkTensor = [&](const Op& op, TensorId t) {
        if (t < 0 || static_cast<size_t>(t) >= tensorCount)
            throw InputError("op '" + op.name + "': references tensor " + std::to_string(t) + ", which does not exist");
    };
    for (const auto& op : graph.ops) {
        for (size_t slot = 0; slot < op.outputs.size(); ++slot) {
            const TensorId t = op.outputs[slot];
            checkTensor(op, t);
            producer[t] = op.id;
            producerSlot[t] = static_cast<int>(slot);
        }
        for (TensorId t : op.inputs) {
            checkTensor(op, t);
            ++consumerStart[t + 1];
        }
    }
    for (size_t t = 0; t < tensorCount; ++t) consumerStart[t + 1] += consumerStart[t];
    consumerOp.resize(static_cast<size_t>(consumerStart[tensorCount]));
    consumerSlot.resize(consumerOp.size());
    std::vector<int> fill(consumerStart.begin(), consumerStart.end() - 1);
    for (const auto& op : graph.ops)
        for (size_t slot = 0; slot < op.inputs.size(); ++slot) {
            const auto e = static_cast<size_t>(fill[op.inputs[slot]]++);
            consumerOp[e] = op.id;
            consumerSlot[e] = static_cast<int>(slot);
        }
}

BlockDescription describeBlock(const Graph& graph, const GraphIndex& index, std::span<const OpId> ops, Scratch& scratch)
{
    BlockDescription d;
    for (size_t i = 0; i < ops.size(); ++i) scratch.localOfOp[ops[i]] = static_cast<int>(i);
    std::vector<TensorId> touched;
    int weights = 0;
    for (OpId id : ops) {
        const Op& op = graph.ops[id];
        for (TensorId t : op.inputs) {
            const OpId p = index.producer[t];
            if (p >= 0 && scratch.localOfOp[p] >= 0) {
                d.codes.push_back(std::int64_t{scratch.localOfOp[p]} * 256 + index.producerSlot[t]);
                continue;
            }
            int& k = scratch.indexOfTensor[t];
            const bool isWeight = graph.tensors[t].role == TensorRole::Weight;
            if (k < 0) {
                touched.push_back(t);
                if (isWeight) {
                    k = weights++;
                } else {
                    k = static_cast<int>(d.inputs.size());
                    d.inputs.push_back(t);
                }
            }
            d.codes.push_back(isWeight ? -(2 + 2 * std::int64_t{k}) : -(1 + 2 * std::int64_t{k}));
        }
        for (TensorId t : op.outputs) {
            bool leaves = graph.tensors[t].role == TensorRole::Output;
            for (int e = index.consumerStart[t]; !leaves && e < index.consumerStart[t + 1]; ++e)
                leaves = scratch.localOfOp[index.consumerOp[e]] < 0;
            d.codes.push_back(leaves ? 1 : 0);
            if (leaves) d.outputs.push_back(t);
        }
    }
    for (OpId id : ops) scratch.localOfOp[id] = -1;
    for (TensorId t : touched) scratch.indexOfTensor[t] = -1;
    return d;
}

bool sameOp(const Graph& graph, const Op& a, const Op& b)
{
    if (a.kind != b.kind || a.inputs.size() != b.inputs.size() || a.outputs.size() != b.outputs.size() || a.einsum != b.einsum ||
        a.attrs != b.attrs)
        return false;
    auto sameTensor = [&](TensorId x, TensorId y) {
        const Tensor& s = graph.tensors[x];
        const Tensor& t = graph.tensors[y];
        return s.dtype == t.dtype && s.shape == t.shape && (s.role == TensorRole::Weight) == (t.role == TensorRole::Weight);
    };
    for (size_t i = 0; i < a.inputs.size(); ++i)
        if (!sameTensor(a.inputs[i], b.inputs[i])) return false;
    for (size_t i = 0; i < a.outputs.size(); ++i)
        if (!sameTensor(a.outputs[i], b.outputs[i])) return false;
    return true;
}

} // namespace tp::fold_detail
