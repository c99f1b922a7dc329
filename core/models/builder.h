#pragma once
// A small helper for model builders: scoped names, weights, and ops whose output shape the
// builder states (the op's equation is then checked against it by validateGraph).
#include <string>
#include <vector>

#include "../graph/graph.h"

namespace tp {

class GraphBuilder {
public:
    GraphBuilder(std::string graphName, DType dtype);

    /// Enters a name scope for the lifetime of the returned guard: ops become "outer/inner/op".
    class ScopeGuard {
    public:
        ScopeGuard(GraphBuilder& builder, const std::string& name);
        ~ScopeGuard();
        ScopeGuard(const ScopeGuard&) = delete;
        ScopeGuard& operator=(const ScopeGuard&) = delete;

    private:
        GraphBuilder& builder_;
    };
    ScopeGuard scope(const std::string& name) { return ScopeGuard(*this, name); }
    std::string path(const std::string& name) const;

    TensorId input(const std::string& name, std::vector<std::int64_t> shape, DType dtype);
    TensorId weight(const std::string& name, std::vector<std::int64_t> shape);
    /// Adds an op with one output of the given shape (dtype: the builder's unless given).
    TensorId op(OpKind kind, const std::string& name, std::vector<TensorId> inputs, std::vector<std::int64_t> outShape,
                std::string einsum = {}, Attrs attrs = {});
    /// Adds an op with several outputs; output k is named "<op>.<outputNames[k]>".
    std::vector<TensorId> multiOutputOp(OpKind kind, const std::string& name, std::vector<TensorId> inputs,
                                        const std::vector<std::vector<std::int64_t>>& outShapes,
                                        const std::vector<std::string>& outputNames, std::string einsum = {}, Attrs attrs = {});
    /// Marks a tensor as a model output.
    void markOutput(TensorId id);

    const std::vector<std::int64_t>& shape(TensorId id) const { return graph_.tensor(id).shape; }
    DType dtype() const { return dtype_; }
    Graph take() { return std::move(graph_); }

    // Common layers. `x` is [..., in]; equations name the last dim h and the new one f.
    TensorId linear(const std::string& name, TensorId x, std::int64_t in, std::int64_t out, bool bias);
    TensorId layerNorm(const std::string& name, TensorId x, bool bias = true);
    TensorId rmsNorm(const std::string& name, TensorId x);
    TensorId unary(OpKind kind, const std::string& name, TensorId x);
    TensorId binary(OpKind kind, const std::string& name, TensorId a, TensorId b);

    /// Builders stop with InputError beyond this many ops (the largest built-in has a few thousand).
    static constexpr size_t kMaxBuiltOps = 1'000'000;

private:
    void checkOpLimit() const;

    Graph graph_;
    DType dtype_;
    std::vector<std::string> scopes_;
};

} // namespace tp
