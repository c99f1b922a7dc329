#include "graph.h"

#include <array>
#include <queue>

#include "../util/error.h"

namespace tp {

namespace {
struct DTypeRow {
    DType dtype;
    std::string_view name;
    int bytes;
};
constexpr std::array<DTypeRow, 8> kDTypes{{
    {DType::F32, "f32", 4},
    {DType::F16, "f16", 2},
    {DType::BF16, "bf16", 2},
    {DType::F8, "f8", 1},
    {DType::I64, "i64", 8},
    {DType::I32, "i32", 4},
    {DType::I8, "i8", 1},
    {DType::Bool, "bool", 1},
}};
constexpr std::array<std::string_view, 4> kRoles{"input", "weight", "activation", "output"};
} // namespace

int dtypeBytes(DType dtype) { return kDTypes[static_cast<size_t>(dtype)].bytes; }
std::string_view dtypeName(DType dtype) { return kDTypes[static_cast<size_t>(dtype)].name; }
std::optional<DType> parseDType(std::string_view text)
{
    for (const auto& row : kDTypes)
        if (row.name == text) return row.dtype;
    return std::nullopt;
}

std::string_view tensorRoleName(TensorRole role) { return kRoles[static_cast<size_t>(role)]; }
std::optional<TensorRole> parseTensorRole(std::string_view text)
{
    for (size_t i = 0; i < kRoles.size(); ++i)
        if (kRoles[i] == text) return static_cast<TensorRole>(i);
    return std::nullopt;
}

std::int64_t Tensor::numel() const
{
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
}

std::optional<std::int64_t> Op::intAttr(const std::string& key) const
{
    auto it = attrs.find(key);
    if (it == attrs.end()) return std::nullopt;
    if (auto v = std::get_if<std::int64_t>(&it->second)) return *v;
    return std::nullopt;
}

TensorId Graph::addTensor(std::string tensorName, std::vector<std::int64_t> shape, DType dtype, TensorRole role)
{
    Tensor t;
    t.id = static_cast<TensorId>(tensors.size());
    t.name = std::move(tensorName);
    t.shape = std::move(shape);
    t.dtype = dtype;
    t.role = role;
    tensors.push_back(std::move(t));
    return tensors.back().id;
}

OpId Graph::addOp(std::string opName, OpKind kind, std::vector<TensorId> inputs, std::vector<TensorId> outputs,
                  std::string einsum, Attrs attrs)
{
    Op o;
    o.id = static_cast<OpId>(ops.size());
    o.name = std::move(opName);
    o.kind = kind;
    o.inputs = std::move(inputs);
    o.outputs = std::move(outputs);
    o.einsum = std::move(einsum);
    o.attrs = std::move(attrs);
    ops.push_back(std::move(o));
    return ops.back().id;
}

std::vector<OpId> Graph::producers() const
{
    std::vector<OpId> result(tensors.size(), -1);
    for (const auto& o : ops)
        for (auto t : o.outputs)
            if (t >= 0 && static_cast<size_t>(t) < result.size()) result[static_cast<size_t>(t)] = o.id;
    return result;
}

std::vector<std::vector<OpId>> Graph::consumers() const
{
    std::vector<std::vector<OpId>> result(tensors.size());
    for (const auto& o : ops)
        for (auto t : o.inputs)
            if (t >= 0 && static_cast<size_t>(t) < result.size()) {
                auto& list = result[static_cast<size_t>(t)];
                if (list.empty() || list.back() != o.id) list.push_back(o.id);
            }
    return result;
}

std::vector<OpId> Graph::topologicalOrder() const
{
    const auto prod = producers();
    const auto cons = consumers();
    std::vector<int> pending(ops.size(), 0);
    for (const auto& o : ops)
        for (auto t : o.inputs)
            if (t >= 0 && static_cast<size_t>(t) < prod.size() && prod[static_cast<size_t>(t)] >= 0)
                ++pending[static_cast<size_t>(o.id)];
    std::priority_queue<OpId, std::vector<OpId>, std::greater<>> ready;
    for (const auto& o : ops)
        if (pending[static_cast<size_t>(o.id)] == 0) ready.push(o.id);
    std::vector<OpId> order;
    order.reserve(ops.size());
    while (!ready.empty()) {
        OpId id = ready.top();
        ready.pop();
        order.push_back(id);
        for (auto t : ops[static_cast<size_t>(id)].outputs)
            for (auto c : cons[static_cast<size_t>(t)]) {
                // An op reading the same tensor twice was counted twice above.
                for (auto in : ops[static_cast<size_t>(c)].inputs)
                    if (in == t && --pending[static_cast<size_t>(c)] == 0) ready.push(c);
            }
    }
    if (order.size() != ops.size()) {
        for (const auto& o : ops)
            if (pending[static_cast<size_t>(o.id)] > 0)
                throw InputError("op '" + o.name + "': the graph has a cycle through this op");
    }
    return order;
}

std::int64_t Graph::parameterCount() const
{
    std::int64_t n = 0;
    for (const auto& t : tensors)
        if (t.role == TensorRole::Weight) n += t.numel();
    return n;
}

} // namespace tp
