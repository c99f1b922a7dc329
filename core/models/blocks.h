#pragma once
// Building blocks shared by the model families: attention (multi-head, grouped-query, cross),
// feed-forward variants, a mixture-of-experts layer, the token-level loss, and config helpers.
// Each family file composes these; the einsum of every op is written here once.
#include <cstdint>
#include <optional>
#include <string>

#include "builder.h"
#include "models.h"

namespace tp {

struct AttentionSpec {
    std::string scope = "attn";
    std::int64_t heads = 1;
    std::int64_t kvHeads = 0; ///< 0: as many as `heads` (multi-head); fewer: grouped-query
    std::int64_t headDim = 0; ///< 0: hidden / heads
    bool bias = true;                 ///< on the q, k and v projections
    std::optional<bool> outBias;      ///< on the output projection; unset: as `bias`
    /// RMSNorm of q and k before the scores: per head over its dims (Qwen3, Gemma-3) or over the
    /// whole projection (OLMo-2).
    enum class QkNorm { None, PerHead, Full } qkNorm = QkNorm::None;
    std::int64_t window = 0;          ///< > 0: sliding-window attention over that many keys
    bool causal = false;
    bool scaled = true; ///< scores scaled by 1/sqrt(headDim); T5 folds the scale into its init
    bool dropout = false;
    std::optional<TensorId> memory;       ///< cross-attention: keys and values from this [b, t, hm]
    std::optional<TensorId> positionBias; ///< [heads, s, t], added to the scores before the softmax
    std::optional<TensorId> rotary;       ///< angles [s, headDim]: q and k rotated per head (self-attention)
};

/// Attention over x [b, s, h] built from its parts (projections, per-head reshape, score and
/// context batch matmuls, softmax, output projection) so the heads are visible to the search.
/// Grouped-query attention keeps the kv-head loop k and the group loop g apart: q is
/// "bs(kgd)->bkgsd", k and v "bs(kd)->bksd", so a split of k shards q, k and v alike.
TensorId attention(GraphBuilder& g, TensorId x, const AttentionSpec& spec);

struct FeedForwardSpec {
    std::string scope = "mlp";
    std::int64_t ffn = 0;
    OpKind activation = OpKind::GeLU;
    bool gated = false; ///< act(gate(x)) * up(x): SwiGLU, GEGLU
    bool bias = true;
    bool dropout = false;
    std::string up = "fc1";
    std::string gate = "gate";
    std::string down = "fc2";
};

/// Position-wise feed-forward over x [..., h].
TensorId feedForward(GraphBuilder& g, TensorId x, const FeedForwardSpec& spec);

struct MixtureSpec {
    std::string scope = "moe";
    std::int64_t experts = 1;
    std::int64_t capacity = 1; ///< tokens per expert per sequence
    FeedForwardSpec expert;    ///< its scope is replaced by "experts.<i>"
};

/// Top-1 routed experts over x [b, s, h]: router Linear + Softmax, a Dispatch op that hands each
/// expert a [b, capacity, h] slice, the experts as parallel identical branches, and a Combine op
/// back to [b, s, h]. Token (s) and capacity (c) loops are distinct letters so that the op table's
/// routing rule can keep them whole while the batch and feature loops stay splittable.
TensorId mixtureOfExperts(GraphBuilder& g, TensorId x, const MixtureSpec& spec);

/// The [b, 1, h] -> [b, h] first token of x [b, s, h] (class token, BERT [CLS]) via a Split on
/// the sequence axis; the other tokens are left as an unused second output.
TensorId firstToken(GraphBuilder& g, TensorId x);

/// CrossEntropy of logits [..., v] against integer labels of the leading dims (a new input
/// named "labels" unless `labelsName` says otherwise). The loss is a scalar.
TensorId crossEntropy(GraphBuilder& g, TensorId logits, const std::string& name = "loss",
                      const std::string& labelsName = "labels");

/// Language-model head: logits = x [b, s, h] @ weight [v, h]^T, then the loss, marked as output.
TensorId languageModelLoss(GraphBuilder& g, TensorId x, TensorId headWeight);

/// The activation a config names under `key` ("gelu", "relu", "silu", "tanh").
OpKind configActivation(const ModelConfig& config, const std::string& key, OpKind fallback);
/// A positive number (integer or real) under `key`, or the fallback.
double configNumber(const ModelConfig& config, const std::string& key, double fallback);
/// "vocab" rounded up to a multiple of "vocab_multiple" (default 1), as Megatron pads its
/// vocabulary to 128 x TP so that embeddings and heads split evenly (core/plan/planner.cpp
/// sets the multiple for the mesh).
std::int64_t configVocab(const ModelConfig& config);
/// Throws InputError unless `value` of field `field` divides evenly by `divisor` of `divisorField`.
void requireDivisible(const ModelConfig& config, const std::string& field, std::int64_t value, const std::string& divisorField,
                      std::int64_t divisor);

} // namespace tp
