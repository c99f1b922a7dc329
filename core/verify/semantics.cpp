#include "semantics.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

namespace tp::verify {

namespace {

float gelu(float x) { return 0.5f * x * (1.0f + std::erf(x / std::sqrt(2.0f))); }
float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// A row's mean and 1/sqrt(variance + eps), as LayerNorm computes them.
std::pair<double, double> normalStats(const std::vector<float>& x)
{
    const double n = static_cast<double>(x.size());
    double mean = 0, var = 0;
    for (float v : x) mean += v;
    mean /= n;
    for (float v : x) var += (v - mean) * (v - mean);
    var /= n;
    return {mean, 1.0 / std::sqrt(var + 1e-5)};
}

// Layer norm over the row, then the optional scale (input 1) and shift (input 2).
void layerNormRow(const std::vector<std::vector<float>>& in, std::vector<float>& out, const RowContext&)
{
    const auto& x = in[0];
    const auto [mean, inv] = normalStats(x);
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

// Rotary embedding of one head row: each pair (2i, 2i+1) of x rotated by its angle, which the
// angle row holds at both places of the pair (Meta's and torchtitan's complex-pair
// convention; Hugging Face's rotate-half pairs (i, i + d/2), a permutation of q and k's weights
// that changes no cost and no sharding). A row of odd length leaves its last value as it is.
void rotaryRow(const std::vector<std::vector<float>>& in, std::vector<float>& out, const RowContext&)
{
    const auto &x = in[0], &angle = in[1];
    out = x;
    for (size_t i = 0; i + 1 < x.size(); i += 2) {
        const double c = std::cos(angle[i]), s = std::sin(angle[i]);
        out[i] = static_cast<float>(x[i] * c - x[i + 1] * s);
        out[i + 1] = static_cast<float>(x[i] * s + x[i + 1] * c);
    }
}

// Backward rotates the gradient back; the angles are no weight, but their gradient is exact.
void rotaryGrad(const std::vector<std::vector<float>>& in, const std::vector<float>& dOut, std::vector<std::vector<float>>& dIn,
                const RowContext&)
{
    const auto &x = in[0], &angle = in[1];
    size_t i = 0;
    for (; i + 1 < x.size(); i += 2) {
        const double c = std::cos(angle[i]), s = std::sin(angle[i]);
        dIn[0][i] += static_cast<float>(dOut[i] * c + dOut[i + 1] * s);
        dIn[0][i + 1] += static_cast<float>(-dOut[i] * s + dOut[i + 1] * c);
        // d out[i] / d angle = -out[i + 1], d out[i + 1] / d angle = out[i]; one angle feeds both.
        dIn[1][i] += static_cast<float>(dOut[i] * -(x[i] * s + x[i + 1] * c) + dOut[i + 1] * (x[i] * c - x[i + 1] * s));
    }
    if (i < x.size()) dIn[0][i] += dOut[i];
}

// Positions after the query are masked for a causal softmax.
bool masked(const RowContext& c, size_t i)
{
    return c.causal && c.queryIndex >= 0 && static_cast<std::int64_t>(i) > c.queryIndex;
}

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

// ---- Derivatives (backward) -------------------------------------------------------------

void layerNormGrad(const std::vector<std::vector<float>>& in, const std::vector<float>& dOut,
                   std::vector<std::vector<float>>& dIn, const RowContext&)
{
    const auto& x = in[0];
    const auto [mean, inv] = normalStats(x);
    std::vector<double> xhat(x.size()), dxhat(x.size());
    double m1 = 0, m2 = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        xhat[i] = (x[i] - mean) * inv;
        const size_t wi = in.size() > 1 && in[1].size() > 1 ? i : 0;
        dxhat[i] = dOut[i] * (in.size() > 1 ? in[1][wi] : 1.0);
        if (in.size() > 1) dIn[1][wi] += static_cast<float>(dOut[i] * xhat[i]);
        if (in.size() > 2) dIn[2][in[2].size() > 1 ? i : 0] += dOut[i];
        m1 += dxhat[i];
        m2 += dxhat[i] * xhat[i];
    }
    m1 /= static_cast<double>(x.size());
    m2 /= static_cast<double>(x.size());
    for (size_t i = 0; i < x.size(); ++i) dIn[0][i] += static_cast<float>(inv * (dxhat[i] - m1 - xhat[i] * m2));
}

void rmsNormGrad(const std::vector<std::vector<float>>& in, const std::vector<float>& dOut, std::vector<std::vector<float>>& dIn,
                 const RowContext&)
{
    const auto& x = in[0];
    const double n = static_cast<double>(x.size());
    double ms = 0;
    for (float v : x) ms += static_cast<double>(v) * v;
    const double inv = 1.0 / std::sqrt(ms / n + 1e-6);
    std::vector<double> g(x.size());
    double dot = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        const size_t wi = in.size() > 1 && in[1].size() > 1 ? i : 0;
        g[i] = dOut[i] * (in.size() > 1 ? in[1][wi] : 1.0);
        if (in.size() > 1) dIn[1][wi] += static_cast<float>(dOut[i] * x[i] * inv);
        dot += g[i] * x[i];
    }
    for (size_t i = 0; i < x.size(); ++i) dIn[0][i] += static_cast<float>(inv * g[i] - x[i] * inv * inv * inv * dot / n);
}

void softmaxGrad(const std::vector<std::vector<float>>& in, const std::vector<float>& dOut, std::vector<std::vector<float>>& dIn,
                 const RowContext& c)
{
    std::vector<float> y(in[0].size());
    softmaxRow(in, y, c);
    double dot = 0;
    for (size_t i = 0; i < y.size(); ++i) dot += static_cast<double>(y[i]) * dOut[i];
    for (size_t i = 0; i < y.size(); ++i) dIn[0][i] += static_cast<float>(y[i] * (dOut[i] - dot));
}

void crossEntropyGrad(const std::vector<std::vector<float>>& in, const std::vector<float>& dOut,
                      std::vector<std::vector<float>>& dIn, const RowContext& c)
{
    const auto& x = in[0];
    const auto label = static_cast<size_t>(std::lround(in[1][0]));
    double top = -INFINITY;
    for (float v : x) top = std::max(top, static_cast<double>(v));
    double sum = 0;
    for (float v : x) sum += std::exp(v - top);
    const double dl = dOut[0] / c.rowsTotal;
    for (size_t i = 0; i < x.size(); ++i)
        dIn[0][i] += static_cast<float>(dl * (std::exp(x[i] - top) / sum - (i == label ? 1.0 : 0.0)));
}

float first(std::span<const float> v) { return v[0]; }
void identityGrad(std::span<const float>, float dy, std::span<float> d) { d[0] = dy; }

float geluGrad(float x)
{
    return 0.5f * (1.0f + std::erf(x / std::sqrt(2.0f))) + x * std::exp(-0.5f * x * x) / std::sqrt(2.0f * 3.14159265358979f);
}

std::vector<OpSemantics> table()
{
    using R = EvalRule;
    // A rule whose backward follows from the einsum alone (no scalar functions).
    auto rule = [](OpKind k, R r, int multiplicands, bool windowMax = false) {
        return OpSemantics{k, r, {}, multiplicands, {}, windowMax, {}, {}};
    };
    auto map = [](OpKind k, std::function<float(std::span<const float>)> f, PointwiseGrad g) {
        return OpSemantics{k, R::Map, std::move(f), 0, {}, false, std::move(g), {}};
    };
    // A unary map and its derivative as a function of the input.
    auto unary = [&](OpKind k, float (*f)(float), float (*df)(float)) {
        return map(
            k, [f](std::span<const float> v) { return f(v[0]); },
            [df](std::span<const float> v, float dy, std::span<float> d) { d[0] = dy * df(v[0]); });
    };
    auto normalize = [](OpKind k, RowFunction f, RowGrad g) {
        return OpSemantics{k, R::Normalize, {}, 0, std::move(f), false, {}, std::move(g)};
    };
    return {
        rule(OpKind::Linear, R::Contract, 2),
        rule(OpKind::BatchMatMul, R::Contract, 2),
        rule(OpKind::Conv2d, R::Window, 2),
        rule(OpKind::Embedding, R::Gather, 0),
        normalize(OpKind::LayerNorm, layerNormRow, layerNormGrad),
        normalize(OpKind::RMSNorm, rmsNormRow, rmsNormGrad),
        normalize(OpKind::Rotary, rotaryRow, rotaryGrad),
        // Inference form (running mean 0, variance 1): per-channel scale and shift, in training
        // mode too. Training-mode statistics over a split batch would need a synchronised batch
        // norm.
        map(
            OpKind::BatchNorm,
            [](std::span<const float> v) { return v[0] * (v.size() > 1 ? v[1] : 1.0f) + (v.size() > 2 ? v[2] : 0.0f); },
            [](std::span<const float> v, float dy, std::span<float> d) {
                d[0] = dy * (v.size() > 1 ? v[1] : 1.0f);
                if (v.size() > 1) d[1] = dy * v[0];
                if (v.size() > 2) d[2] = dy;
            }),
        normalize(OpKind::Softmax, softmaxRow, softmaxGrad),
        unary(OpKind::GeLU, gelu, geluGrad),
        unary(
            OpKind::SiLU, [](float x) { return x * sigmoid(x); },
            [](float x) {
                const float s = sigmoid(x);
                return s + x * s * (1 - s);
            }),
        unary(
            OpKind::ReLU, [](float x) { return std::max(x, 0.0f); }, [](float x) { return x > 0 ? 1.0f : 0.0f; }),
        unary(
            OpKind::Tanh, [](float x) { return std::tanh(x); },
            [](float x) {
                const float t = std::tanh(x);
                return 1 - t * t;
            }),
        unary(OpKind::Sigmoid, sigmoid,
              [](float x) {
                  const float s = sigmoid(x);
                  return s * (1 - s);
              }),
        map(
            OpKind::Add, [](std::span<const float> v) { return std::accumulate(v.begin(), v.end(), 0.0f); },
            [](std::span<const float>, float dy, std::span<float> d) { std::fill(d.begin(), d.end(), dy); }),
        map(
            OpKind::Mul, [](std::span<const float> v) { return v[0] * v[1]; },
            [](std::span<const float> v, float dy, std::span<float> d) {
                d[0] = dy * v[1];
                d[1] = dy * v[0];
            }),
        // Dropout is the identity here: a mask drawn per device would differ from the reference.
        map(OpKind::Dropout, first, identityGrad),
        map(OpKind::Reshape, first, identityGrad),
        map(OpKind::Transpose, first, identityGrad),
        rule(OpKind::Concat, R::Join, 0),
        rule(OpKind::Split, R::Part, 0),
        rule(OpKind::Dispatch, R::Route, 0),
        rule(OpKind::Combine, R::Route, 0),
        rule(OpKind::Reduce, R::Contract, 1),
        rule(OpKind::MaxPool, R::Window, 1, true),
        rule(OpKind::AvgPool, R::Window, 1),
        normalize(OpKind::CrossEntropy, crossEntropyRow, crossEntropyGrad),
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
