#include "semantics.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace tp::verify {

namespace {

float gelu(float x) { return 0.5f * x * (1.0f + std::erf(x / std::sqrt(2.0f))); }
float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// Layer norm over the row, then the optional scale (input 1) and shift (input 2).
void layerNormRow(const std::vector<std::vector<float>>& in, std::vector<float>& out, const RowContext&)
{
    const auto& x = in[0];
    const double n = static_cast<double>(x.size());
    double mean = 0, var = 0;
    for (float v : x) mean += v;
    mean /= n;
    for (float v : x) var += (v - mean) * (v - mean);
    var /= n;
    const double inv = 1.0 / std::sqrt(var + 1e-5);
    for (size_t i = 0; i < x.size(); ++i) {
        double y = (x[i] - mean) * inv;
        if (in.size() > 1) y *= in[1].size() == 1 ? in[1][0] : in[1][i];
        if (in.size() > 2) y += in[2].size() == 1 ? in[2][0] : in[2][i];
        out[i] = static_cast<float>(y);
    }
}

void rmsNormRow(const std::vector<std::vector<float>>& in, std::vector<float>& out, const RowContext&)
{
    const auto& x = in[0];
    double ms = 0;
    for (float v : x) ms += static_cast<double>(v) * v;
    const double inv = 1.0 / std::sqrt(ms / static_cast<double>(x.size()) + 1e-6);
    for (size_t i = 0; i < x.size(); ++i) {
        double y = x[i] * inv;
        if (in.size() > 1) y *= in[1].size() == 1 ? in[1][0] : in[1][i];
        out[i] = static_cast<float>(y);
    }
}

// Positions after the query are masked for a causal softmax.
bool masked(const RowContext& c, size_t i) { return c.causal && c.queryIndex >= 0 && static_cast<std::int64_t>(i) > c.queryIndex; }

void softmaxRow(const std::vector<std::vector<float>>& in, std::vector<float>& out, const RowContext& c)
{
    const auto& x = in[0];
    double top = -INFINITY;
    for (size_t i = 0; i < x.size(); ++i)
        if (!masked(c, i)) top = std::max(top, static_cast<double>(x[i]));
    double sum = 0;
    for (size_t i = 0; i < x.size(); ++i) sum += masked(c, i) ? 0.0 : std::exp(x[i] - top);
    for (size_t i = 0; i < x.size(); ++i) out[i] = masked(c, i) ? 0.0f : static_cast<float>(std::exp(x[i] - top) / sum);
}

// Mean cross entropy: this row's share of -log softmax(logits)[label].
void crossEntropyRow(const std::vector<std::vector<float>>& in, std::vector<float>& out, const RowContext& c)
{
    const auto& x = in[0];
    const auto label = static_cast<size_t>(std::lround(in[1][0]));
    double top = -INFINITY;
    for (float v : x) top = std::max(top, static_cast<double>(v));
    double sum = 0;
    for (float v : x) sum += std::exp(v - top);
    const double loss = std::log(sum) + top - x.at(label);
    out[0] = static_cast<float>(loss / c.rowsTotal);
}

float first(std::span<const float> v) { return v[0]; }

std::vector<OpSemantics> table()
{
    using R = EvalRule;
    auto map = [](OpKind k, std::function<float(std::span<const float>)> f) {
        return OpSemantics{k, R::Map, std::move(f), 0, {}, false};
    };
    auto unary = [&](OpKind k, float (*f)(float)) { return map(k, [f](std::span<const float> v) { return f(v[0]); }); };
    auto normalize = [](OpKind k, RowFunction f) { return OpSemantics{k, R::Normalize, {}, 0, std::move(f), false}; };
    return {
        {OpKind::Linear, R::Contract, {}, 2, {}, false},
        {OpKind::BatchMatMul, R::Contract, {}, 2, {}, false},
        {OpKind::Conv2d, R::Window, {}, 2, {}, false},
        {OpKind::Embedding, R::Gather, {}, 0, {}, false},
        normalize(OpKind::LayerNorm, layerNormRow),
        normalize(OpKind::RMSNorm, rmsNormRow),
        // Inference form (running mean 0, variance 1): per-channel scale and shift. Training-mode
        // statistics over a split batch would need a synchronised batch norm.
        map(OpKind::BatchNorm, [](std::span<const float> v) { return v[0] * (v.size() > 1 ? v[1] : 1.0f) + (v.size() > 2 ? v[2] : 0.0f); }),
        normalize(OpKind::Softmax, softmaxRow),
        unary(OpKind::GeLU, gelu),
        unary(OpKind::SiLU, [](float x) { return x * sigmoid(x); }),
        unary(OpKind::ReLU, [](float x) { return std::max(x, 0.0f); }),
        unary(OpKind::Tanh, [](float x) { return std::tanh(x); }),
        unary(OpKind::Sigmoid, sigmoid),
        map(OpKind::Add, [](std::span<const float> v) { return std::accumulate(v.begin(), v.end(), 0.0f); }),
        map(OpKind::Mul, [](std::span<const float> v) { return v[0] * v[1]; }),
        // Dropout is the identity here: a mask drawn per device would differ from the reference.
        map(OpKind::Dropout, first),
        map(OpKind::Reshape, first),
        map(OpKind::Transpose, first),
        {OpKind::Concat, R::Join, {}, 0, {}, false},
        {OpKind::Split, R::Part, {}, 0, {}, false},
        {OpKind::Reduce, R::Contract, {}, 1, {}, false},
        {OpKind::MaxPool, R::Window, {}, 1, {}, true},
        {OpKind::AvgPool, R::Window, {}, 1, {}, false},
        normalize(OpKind::CrossEntropy, crossEntropyRow),
    };
}

} // namespace

std::optional<OpSemantics> opSemantics(OpKind kind)
{
    static const std::vector<OpSemantics> rows = table();
    for (const auto& r : rows)
        if (r.kind == kind) return r;
    return std::nullopt;
}

} // namespace tp::verify
