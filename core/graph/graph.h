#pragma once
// Graph IR: tensors and ops. An op's semantics (sharding rules, FLOPs, memory) come from its
// einsum-style signature (see signature.h) and its kind's row in the op table (see opkinds.h).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace tp {

enum class DType : std::uint8_t { F32, F16, BF16, F8, I64, I32, I8, Bool };
int dtypeBytes(DType dtype);
std::string_view dtypeName(DType dtype);
std::optional<DType> parseDType(std::string_view text);

enum class TensorRole : std::uint8_t { Input, Weight, Activation, Output };
std::string_view tensorRoleName(TensorRole role);
std::optional<TensorRole> parseTensorRole(std::string_view text);

using TensorId = std::int32_t;
using OpId = std::int32_t;

struct Tensor {
    TensorId id = -1;
    std::string name;
    std::vector<std::int64_t> shape;
    DType dtype = DType::BF16;
    TensorRole role = TensorRole::Activation;

    std::int64_t numel() const;
    std::int64_t bytes() const { return numel() * dtypeBytes(dtype); }
};

using AttrValue = std::variant<std::int64_t, double, std::string, std::vector<std::int64_t>>;
using Attrs = std::map<std::string, AttrValue>;

/// Kinds of operators. Adding one means adding a row to the table in opkinds.cpp.
enum class OpKind : std::uint8_t {
    Linear,
    BatchMatMul,
    Conv2d,
    Embedding,
    LayerNorm,
    RMSNorm,
    BatchNorm,
    Softmax,
    GeLU,
    SiLU,
    ReLU,
    Tanh,
    Sigmoid,
    Add,
    Mul,
    Dropout,
    Reshape,
    Transpose,
    Concat,
    Split,
    Reduce,
    MaxPool,
    AvgPool,
    CrossEntropy,
    Dispatch,
    Combine,
    Rotary,
    Pointwise,
    Opaque,
};

struct Op {
    OpId id = -1;
    std::string name; ///< scope path, e.g. "layers.3/attn/q"
    OpKind kind = OpKind::Opaque;
    std::vector<TensorId> inputs;
    std::vector<TensorId> outputs;
    std::string einsum; ///< e.g. "bsh,hf->bsf"; empty means the kind's default for the ranks
    Attrs attrs;

    std::optional<std::int64_t> intAttr(const std::string& key) const;
};

/// A computation graph. Ids are indices into `tensors` and `ops`.
class Graph {
public:
    std::string name;
    std::vector<Tensor> tensors;
    std::vector<Op> ops;

    TensorId addTensor(std::string name, std::vector<std::int64_t> shape, DType dtype, TensorRole role);
    OpId addOp(std::string name, OpKind kind, std::vector<TensorId> inputs, std::vector<TensorId> outputs,
               std::string einsum = {}, Attrs attrs = {});

    const Tensor& tensor(TensorId id) const { return tensors.at(static_cast<size_t>(id)); }
    const Op& op(OpId id) const { return ops.at(static_cast<size_t>(id)); }

    /// The op producing each tensor (-1 for inputs and weights); index = tensor id.
    std::vector<OpId> producers() const;
    /// The ops reading each tensor, in op-id order; index = tensor id.
    std::vector<std::vector<OpId>> consumers() const;
    /// Ops in a topological order (stable: among ready ops the smallest id first).
    /// Throws InputError naming an op on the cycle when the graph has one.
    std::vector<OpId> topologicalOrder() const;

    std::int64_t parameterCount() const;
};

} // namespace tp
