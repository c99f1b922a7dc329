#pragma once
// Random small graphs for the exhaustive tests (tst_search, tst_planner): transformer-like ops
// over [4, 4, 8] activations, drawn from a seeded generator so every run sees the same graphs.
#include <random>

#include "models/builder.h"

namespace tp {

/// A random small DAG of transformer-like ops over [4, 4, 8] activations.
inline Graph randomGraph(std::mt19937& rng, int opCount)
{
    GraphBuilder b("random", DType::BF16);
    std::vector<TensorId> pool{b.input("x", {4, 4, 8}, DType::BF16)};
    std::uniform_int_distribution<int> kindPick(0, 7);
    auto pickTensor = [&](std::int64_t lastDim) -> TensorId {
        std::vector<TensorId> fits;
        for (TensorId t : pool)
            if (b.shape(t).size() == 3 && b.shape(t)[2] == lastDim) fits.push_back(t);
        if (fits.empty()) return -1;
        return fits[std::uniform_int_distribution<size_t>(0, fits.size() - 1)(rng)];
    };
    for (int i = 0; i < opCount; ++i) {
        const std::string name = "op" + std::to_string(i);
        const int kind = kindPick(rng);
        TensorId x = pool[std::uniform_int_distribution<size_t>(0, pool.size() - 1)(rng)];
        const std::int64_t h = b.shape(x).back();
        TensorId y = -1;
        switch (kind) {
        case 0:
        case 1:
            y = b.linear(name, x, h, h == 8 ? 16 : 8, kind == 0);
            break;
        case 2:
            y = b.unary(OpKind::GeLU, name, x);
            break;
        case 3:
            y = b.layerNorm(name, x);
            break;
        case 4:
            y = b.unary(OpKind::Softmax, name, x);
            break;
        case 5:
            y = b.unary(OpKind::Dropout, name, x);
            break;
        default: {
            TensorId other = pickTensor(h);
            y = b.binary(kind == 6 ? OpKind::Add : OpKind::Mul, name, x, other);
        }
        }
        pool.push_back(y);
    }
    return b.take();
}

} // namespace tp
