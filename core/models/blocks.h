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
    /// Multi-head latent attention (DeepSeek-V2/V3): q and kv through low-rank projections, the
    /// rotary part of each head kept apart. Set: `kvHeads`, `headDim` and `qkNorm` are unused and
    /// `rotary` holds angles [s, ropeDim].
    struct Latent {
        std::int64_t qRank = 0;  ///< 0: q projected directly from x
        std::int64_t kvRank = 0; ///< the compressed kv width
        std::int64_t nopeDim = 0, ropeDim = 0, valueDim = 0;
    };
    std::optional<Latent> latent;
};

/// Latent attention: q = q_b(norm(q_a(x))) per head [nope | rope]; kv_a(x) = [compressed kv |
/// shared rotary key]; k_nope and v per head from kv_b(norm(compressed)); the scores are the sum
/// of the two contractions q_nope.k_nope + q_rope.k_rope (the rotary key shared by all heads),
/// the same numbers as the concatenated head of DeepSeek's code without materialising it.
TensorId latentAttention(GraphBuilder& g, TensorId x, const AttentionSpec& spec);

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
    std::int64_t topK = 1;     ///< experts each token is routed to
    std::int64_t capacity = 1; ///< token slots per expert per sequence (expertCapacity)
    FeedForwardSpec expert;    ///< one expert's shape; its weights are stacked [experts, in, out]
    OpKind scoring = OpKind::Softmax;      ///< router probabilities: Softmax, or Sigmoid (DeepSeek-V3)
    std::optional<FeedForwardSpec> shared; ///< shared experts: a dense branch every token takes
    bool sharedGate = false;               ///< the shared branch scaled by sigmoid(Linear h->1) (Qwen2-MoE)
    /// A learned bias [e] added to the scores only to pick the top-k (DeepSeek-V3's
    /// auxiliary-loss-free balancing): a third input of the Dispatch.
    bool selectionBias = false;
};

/// Token slots per expert per sequence of `seq` tokens when each token goes to `topK` of
/// `experts` experts: the routed tokens shared out evenly times the capacity factor (Fedus et
/// al. 2021, eq. 3; GShard), rounded up.
std::int64_t expertCapacity(std::int64_t seq, std::int64_t experts, std::int64_t topK, double capacityFactor);

/// Routed experts over x [b, s, h] in GShard's einsum form, so that the experts are one op with
/// an expert loop e: a router (Linear h->e, then Softmax or Sigmoid), a Dispatch
/// "bsh,bse->bech" that places each token's copies in its top-k experts' capacity slots c, the
/// expert FFN as Linears over stacked weights "bech,ehf->becf", and a Combine "bech,bse->bsh"
/// that weights each copy by its router probability. Dispatch and Combine keep the batch b and
/// the features h splittable and the tokens, experts and slots whole (RoleRule::Routed), so a
/// split of e in the experts (expert parallelism) costs the all-to-all that moves the split from
/// b to e and back, of b*e*c*h elements: the tokens times top-k times the capacity factor. The
/// expert Linears may split f (tensor parallelism inside the experts) or b (replicated experts).
/// Shared experts are a dense feed-forward branch added to the routed output.
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
