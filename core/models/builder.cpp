#include "builder.h"

#include "../util/error.h"

namespace tp {

namespace {
constexpr std::string_view kBatchLetters = "bstuvw";

std::string leading(size_t rank) { return std::string(kBatchLetters.substr(0, rank)); }
} // namespace

GraphBuilder::GraphBuilder(std::string graphName, DType dtype) : dtype_(dtype) { graph_.name = std::move(graphName); }

GraphBuilder::ScopeGuard::ScopeGuard(GraphBuilder& builder, const std::string& name) : builder_(builder)
{
    builder_.scopes_.push_back(name);
}

GraphBuilder::ScopeGuard::~ScopeGuard() { builder_.scopes_.pop_back(); }

std::string GraphBuilder::path(const std::string& name) const
{
    std::string p;
    for (const auto& s : scopes_) p += s + "/";
    return p + name;
}

TensorId GraphBuilder::input(const std::string& name, std::vector<std::int64_t> shape, DType dtype)
{
    return graph_.addTensor(path(name), std::move(shape), dtype, TensorRole::Input);
}

TensorId GraphBuilder::weight(const std::string& name, std::vector<std::int64_t> shape)
{
    return graph_.addTensor(path(name), std::move(shape), dtype_, TensorRole::Weight);
}

void GraphBuilder::checkOpLimit() const
{
    // A config asking for 10^12 layers must be refused, not built until memory runs out.
    if (graph_.ops.size() >= kMaxBuiltOps)
        throw InputError("model config '" + graph_.name + "': the model would have more than " + std::to_string(kMaxBuiltOps) +
                         " ops; use fewer layers (or experts)");
}

TensorId GraphBuilder::op(OpKind kind, const std::string& name, std::vector<TensorId> inputs, std::vector<std::int64_t> outShape,
                          std::string einsum, Attrs attrs)
{
    checkOpLimit();
    const std::string p = path(name);
    TensorId out = graph_.addTensor(p, std::move(outShape), dtype_, TensorRole::Activation);
    graph_.addOp(p, kind, std::move(inputs), {out}, std::move(einsum), std::move(attrs));
    return out;
}

std::vector<TensorId> GraphBuilder::multiOutputOp(OpKind kind, const std::string& name, std::vector<TensorId> inputs,
                                                  const std::vector<std::vector<std::int64_t>>& outShapes,
                                                  const std::vector<std::string>& outputNames, std::string einsum, Attrs attrs)
{
    checkOpLimit();
    const std::string p = path(name);
    std::vector<TensorId> outs;
    for (size_t k = 0; k < outShapes.size(); ++k)
        outs.push_back(graph_.addTensor(p + "." + outputNames.at(k), outShapes[k], dtype_, TensorRole::Activation));
    graph_.addOp(p, kind, std::move(inputs), outs, std::move(einsum), std::move(attrs));
    return outs;
}

void GraphBuilder::markOutput(TensorId id) { graph_.tensors.at(static_cast<size_t>(id)).role = TensorRole::Output; }

TensorId GraphBuilder::linear(const std::string& name, TensorId x, std::int64_t in, std::int64_t out, bool bias)
{
    auto s = shape(x);
    const std::string batch = leading(s.size() - 1);
    std::vector<TensorId> inputs{x, weight(name + ".weight", {in, out})};
    std::string eq = batch + "h,hf";
    if (bias) {
        inputs.push_back(weight(name + ".bias", {out}));
        eq += ",f";
    }
    s.back() = out;
    return op(OpKind::Linear, name, std::move(inputs), s, eq + "->" + batch + "f");
}

TensorId GraphBuilder::layerNorm(const std::string& name, TensorId x, bool bias)
{
    const auto h = shape(x).back();
    std::vector<TensorId> inputs{x, weight(name + ".weight", {h})};
    if (bias) inputs.push_back(weight(name + ".bias", {h}));
    return op(OpKind::LayerNorm, name, std::move(inputs), shape(x));
}

TensorId GraphBuilder::rmsNorm(const std::string& name, TensorId x)
{
    const auto h = shape(x).back();
    return op(OpKind::RMSNorm, name, {x, weight(name + ".weight", {h})}, shape(x));
}

TensorId GraphBuilder::unary(OpKind kind, const std::string& name, TensorId x) { return op(kind, name, {x}, shape(x)); }

TensorId GraphBuilder::binary(OpKind kind, const std::string& name, TensorId a, TensorId b)
{
    return op(kind, name, {a, b}, shape(a).size() >= shape(b).size() ? shape(a) : shape(b));
}

} // namespace tp
