#pragma once
// The sharding class of an op strategy: the one answer every front end shows (GUI colours and
// legend, CSV "sharding" column, DOT/SVG/PNG colours, DTensor styles, Megatron and HF plans).
// It is read from the op's einsum signature (loop roles, which loops index which operand),
// which inputs are weights, and the strategy; never from op names or kinds.
//
// Each split loop gets a kind:
//   - a loop that indexes a weight input:
//       Row     when it is contracted or gathered (the output is partial: Megatron's row-parallel
//               linear, a vocab-parallel embedding);
//       Expert  when it is parallel and also indexes an activation input while the weight has a
//               contracted loop too (the batch loop of a batched matmul over stacked expert
//               weights, "ebch,ehf->ebcf": each device holds its own experts);
//       Column  otherwise (a weight's output loop: column-parallel linear, embedding dim, bias);
//   - a loop that indexes no weight ("batch-like": each slice is computed independently, up to
//     a sum for a contracted one) is classified by where it sits in the activation operands
//     (inputs that are not weights, and outputs):
//       Expert   when it indexes dim 1 of routed tokens [b, e, c, ...] (OperandFacts::routedInput/
//                Output: between a Dispatch and its Combine, dim 1 is the experts), the tokens
//                each device's experts serve (an activation or SiLU between expert matmuls);
//       Data     when it indexes dim 0 of an activation whose dim 0 is the graph's batch (which
//                tensors those are is a fact of the whole graph, OperandFacts::batchInput/Output;
//                CostModel::batchLeading derives it from the graph inputs' dim 0);
//       Sequence when it indexes the token axis of an activation: laid out [batch, ..., tokens,
//                features] as every builder and importer does, the dim before the last of a
//                tensor with at least one dim besides the batch and the features ([b, s, h],
//                [b, n, s, d], [s, h] position embeddings; the rows of an [n, c, h, w] image);
//       Feature  otherwise (the feature or head dim of a weightless op: a split carried on from a
//                column-parallel producer, e.g. GeLU "bsf->bsf" with f split, attention's heads).
// Within one tensor dim (a merged "(nd)" group) the outermost loop is the one at that position.
//
// The strategy's class: Replicated when nothing is split; otherwise the kinds other than Data
// among its split loops: none -> Data; exactly one -> that kind; more than one -> Mixed.
// Data parallelism on another axis never changes the class ("b=x,f=y" on fc1 is Column), and a
// strategy that splits only loops indexing no weight is never Column or Row, and Expert only on
// routed tokens.
#include <string_view>
#include <vector>

#include "../graph/graph.h"
#include "strategy.h"

namespace tp {

enum class ShardClass : std::uint8_t { Replicated, Data, Sequence, Feature, Column, Row, Expert, Mixed };
inline constexpr int kShardClassCount = 8;
/// "replicated", "data-parallel", "sequence-parallel", "feature-split", "column-parallel",
/// "row-parallel", "expert-parallel", "mixed".
std::string_view shardClassName(ShardClass c);
/// The fill colour of a class as "#rrggbb", shared by the GUI and the image exports.
std::string_view shardClassColor(ShardClass c);

struct StrategyClass {
    ShardClass kind = ShardClass::Replicated;
    std::vector<ShardClass> loopClass; ///< per loop dim: its kind, Replicated when not split
    std::vector<ShardClass> axisClass; ///< per mesh axis: the kind of the loop it splits, Replicated when unused
    std::vector<int> axisLoop;         ///< per mesh axis: the loop it splits, -1 when unused
    bool hasWeight = false;            ///< the op has a weight input
};

/// What the classifier needs to know about an op's operands besides its signature. A missing
/// entry reads as false.
struct OperandFacts {
    std::vector<bool> weightInput; ///< per input: a weight (TensorRole::Weight)
    std::vector<bool> batchInput;  ///< per input: dim 0 is the graph's batch
    std::vector<bool> batchOutput; ///< per output: dim 0 is the graph's batch
    std::vector<bool> routedInput;  ///< per input: routed tokens, dim 1 the experts (CostModel::routedTokens)
    std::vector<bool> routedOutput; ///< per output: likewise
};

/// Classifies a strategy of an op with this signature; `meshRank` sizes the per-axis vectors.
StrategyClass classifyStrategy(const Signature& sig, const OperandFacts& facts, const OpStrategy& strategy, int meshRank);

} // namespace tp
