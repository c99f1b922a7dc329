#pragma once
// The cost model: for one graph on one mesh and hardware, the time and memory of every op
// strategy (node costs) and of every resharding between a producer and a consumer (edge costs).
// The search minimises the sum of these; evaluatePlan (core/search/evaluate.h) turns one plan
// into a Breakdown.
// All costs are per device, per training step (or inference step in infer mode).
#include <array>
#include <limits>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "../graph/graph.h"
#include "../graph/signature.h"
#include "../sharding/strategy.h"
#include "collectives.h"

namespace tp {

/// How a block's activations are kept for the backward pass. None: all of them. Selective
/// (Korthikanti et al.): all but the attention core, whose forward is recomputed. Full: only the
/// block's input, the whole forward recomputed. Op (torchtitan's op-level selective
/// checkpointing, torchtitan/models/llama3/infra/parallelize.py `_save_list`): the block's input,
/// the attention kernel's output and every other weight matmul's output (the first, third, ...
/// in the block) are kept; every other op's forward is recomputed from them.
enum class Recompute : std::uint8_t { None, Selective, Full, Op };
inline constexpr int kRecomputeModes = 4;
std::string_view recomputeName(Recompute r);
/// Whether a block in this mode keeps its input and runs its forward again in the backward pass
/// (so the forward collectives into its ops run again too): Full and Op.
constexpr bool checkpointsBlockInput(Recompute r) { return r == Recompute::Full || r == Recompute::Op; }

struct CostSettings {
    bool training = true;
    /// Model-state bytes per parameter: mixed-precision Adam keeps bf16 params (2), bf16 grads
    /// (2) and fp32 master weights, momentum and variance (4+4+4 = 12): 16 in all (ZeRO paper).
    double paramBytesPerParam = 2;
    double gradBytesPerParam = 2;
    double optimizerBytesPerParam = 12;
    /// Linear layers' matmuls in fp8 (forward, and both backward GEMMs), the rest in bf16, as
    /// Transformer Engine runs them (--dtype fp8): their time at the hardware's fp8 peak.
    bool fp8Matmuls = false;
    /// Gradient accumulation: activations are held for this many samples per data-parallel
    /// replica at a time (0: the whole local batch at once).
    std::int64_t microBatch = 0;
    /// Chunk-based overlap (ATP): matmuls run in this many chunks so each chunk's collective
    /// hides under the next chunk's compute; 1 = no overlap.
    int overlapChunks = 1;
    /// Readers of one tensor add their gradients locally and reduce once: the first reader in
    /// op-id order pays the reduction. With groups (one id per op, e.g. the block instance it
    /// belongs to), the first reader within each group pays, so that identical blocks cost the
    /// same wherever they sit. Empty: one group.
    std::vector<int> readerGroupOfOp;

    // How the kernels and the framework run the step (docs/FIDELITY.md). The kernel settings
    // come from the model config (flash_attention, fused_kernels, fused_cross_entropy), the
    // rest from the plan.
    /// FlashAttention: the attention core (the ops between the two weightless contractions)
    /// is one kernel that keeps no s x s tensor and recomputes its scores in the backward pass.
    bool flashAttention = false;
    /// Chains of memory-bound ops fuse (Megatron's bias-GeLU, bias-dropout-add, fused
    /// softmax): a tensor passed from one such op to its only reader in the same reader group
    /// (block instance; none without groups) never goes through HBM.
    bool fusedKernels = true;
    /// The loss as one fused kernel that reads the logits once (Liger, Megatron's
    /// --cross-entropy-loss-fusion). Off, as most runs do it: separate fp32 passes over the
    /// logits, the fp32 softmax kept for backward (core/graph/opkinds.h: unfusedPasses).
    bool fusedCrossEntropy = false;
    /// Data-parallel gradients are reduced in buckets of this many bytes (DDP: 25 MiB): each
    /// bucket pays one collective's latency and runs at the bandwidth of its size.
    double gradientBucketBytes = 25.0 * 1024 * 1024;
    /// Gradient reduction runs while the backward pass goes on: an op's reduction hides under
    /// the backward compute of the ops before it (core/cost/kernels.h: overlapped()).
    bool overlapGradientReduction = true;
    /// Megatron's asynchronous tensor-parallel all-reduce: the input-gradient collective of a
    /// column-parallel matmul runs under its weight-gradient matmul.
    bool overlapTensorParallelBackward = false;
    /// A pipeline stage sends its boundary activations as Megatron-LM does by default: each
    /// device of a tensor-parallel group its 1/devices share, gathered on the receiver
    /// (scatter-gather); off, each device sends the tensor as the stage's plan lays it out.
    bool pipelineScatterGather = true;
    /// ZeRO over each weight's data-parallel axes (those its gradient is partial over): 0
    /// replicates the model states; 1 shards the optimizer states (Megatron's distributed
    /// optimizer: reduce-scatter of gradients, all-gather of updated parameters); 2 also the
    /// gradients; 3 also the parameters (FSDP: gathered before forward and backward).
    int zeroStage = 0;
    /// What ZeRO shards over: every data-parallel axis (true), or only the axes inside a node,
    /// the model states replicated across nodes (false: hybrid sharding, HSDP): the gradient is
    /// reduce-scattered inside the node and all-reduced across nodes on its shard, parameters
    /// are gathered inside the node only.
    bool zeroAcrossNodes = true;
    /// FSDP's reshard_after_forward (stage 3 only): each weight's gathered copy is freed after
    /// its forward and gathered again for its backward (true), or held from its forward to its
    /// backward (false: one all-gather per micro-batch fewer, the whole weight held at the turn
    /// of the step, as stages 0-2 hold it).
    bool reshardAfterForward = true;
    /// Pipeline parallelism (core/plan/pipeline.h), for the cost model of one stage: the bubble
    /// a step adds, in micro-batch times of this stage ((p - 1) / V), and how many micro-batches'
    /// activations the stage holds at once. Every per-micro-batch cost (kernels, a batch
    /// tensor's collectives) of n micro-batches is paid (n + bubble) / n times; activations are
    /// held for that many micro-batches (at most the whole local batch). 0 and 1: no pipeline.
    double pipelineBubble = 0;
    double pipelineInFlight = 1;
    /// The pipeline's stages p: interleaving shortens the bubble to (p - 1) / V only when the
    /// micro-batches per step are a multiple of p (Narayanan et al. 2021, §2.2; Megatron-LM
    /// refuses the others); otherwise a step pays 1F1B's p - 1 (pipelinedFactor).
    int pipelineStages = 1;

    bool operator==(const CostSettings&) const = default;
};

/// The graph's batch: dim 0 of its first input of rank >= 2 (tokens, images); 0 when there is
/// none (CostModel::graphBatch).
std::int64_t graphBatchOf(const Graph& graph);
/// The share of a batch tensor's local bytes that is held at once: the micro-batch's samples
/// times the pipeline's in-flight micro-batches, of the local batch (`batchSplits`: how many
/// ways dim 0 is split), at most all of it; 1 without micro-batches.
double heldActivationShare(const CostSettings& settings, std::int64_t graphBatch, double batchSplits);
/// The factor a pipeline stage's per-micro-batch costs take over `microBatches` micro-batches:
/// (n + bubble) / n (1 without a pipeline).
double pipelinedFactor(const CostSettings& settings, double microBatches);

/// Time and memory of one op under one strategy, per device.
struct OpCost {
    double computeSeconds = 0;    ///< forward (+ backward, + recomputed forward) compute, + optimizer step
    double forwardSeconds = 0;    ///< of computeSeconds: the forward pass
    double optimizerSeconds = 0;  ///< of computeSeconds: the optimizer's update of the op's own weights
    double bufferCopySeconds = 0; ///< of computeSeconds: FSDP's copies into and out of its collective buffers
    double commSeconds = 0;       ///< collectives the op owns (weight-gradient reduction)
    double hiddenCommSeconds = 0; ///< of the op's collectives: the part hidden under compute
    double hiddenForwardCommSeconds = 0; ///< of hiddenCommSeconds: under its forward (FSDP's prefetched gathers)
    double paramBytes = 0;        ///< weights' model states, sharded
    double gradBytes = 0;
    double optimizerBytes = 0;
    double activationBytes = 0; ///< tensors this op's outputs keep for backward, sharded
    std::vector<CollectiveCall> collectives;

    double memoryBytes() const { return paramBytes + gradBytes + optimizerBytes + activationBytes; }
    double seconds() const { return computeSeconds + commSeconds - hiddenCommSeconds; }
};

/// Time of a resharding edge, forward and the backward dual.
struct EdgeCost {
    double seconds = 0;
    double exposedSeconds = 0;        ///< after overlap; equals seconds without overlap
    double exposedForwardSeconds = 0; ///< of exposedSeconds: the forward phase
    std::vector<CollectiveCall> collectives;
};

struct CollectiveRecord {
    CollectiveKind kind;
    int axis;
    double bytes;
    Phase phase;
    OpId at; ///< the op after which it happens (the producer for edges, the op for gradients)
    std::int64_t count = 1;
    double seconds = 0;
};

struct OpBreakdown {
    OpId op = -1;
    int strategy = 0;
    double computeSeconds = 0;
    double forwardSeconds = 0;   ///< forward compute plus the exposed forward collectives of the edges into it
    double commSeconds = 0;      ///< the op's own plus the edges into it
    double stepSeconds = 0;      ///< what the op adds to the step (compute and exposed communication)
    double optimizerSeconds = 0; ///< of computeSeconds: the optimizer's update of its weights
    double memoryBytes = 0;      ///< the four below summed
    double paramBytes = 0, gradBytes = 0, optimizerBytes = 0;
    double activationBytes = 0; ///< with the kept inputs of a fully recomputed block charged to its first op
};

struct Breakdown {
    double stepSeconds = 0;
    double computeSeconds = 0;
    double forwardSeconds = 0;   ///< of computeSeconds plus exposed communication: the forward pass
    double optimizerSeconds = 0; ///< of computeSeconds: the optimizer step
    double bufferCopySeconds = 0; ///< of computeSeconds: FSDP's copies into and out of its collective buffers
    double commSeconds = 0;
    double exposedCommSeconds = 0;
    double hiddenCommSeconds = 0;
    std::map<CollectiveKind, double> commByKind;
    double paramBytes = 0, gradBytes = 0, optimizerBytes = 0, activationBytes = 0;
    double perDeviceBytes = 0;
    double capacityBytes = 0;
    bool fits = true;
    std::vector<OpBreakdown> ops;              ///< in op-id order
    std::vector<CollectiveRecord> collectives; ///< in op-id order
};

/// Op classes' costs shared by the cost models of several graphs (a pipeline's stage graphs,
/// which repeat the same layers with ops of their own): a class's costs depend on the class
/// (its key), the settings but the reader groups, the mesh, the hardware and the graph's batch,
/// not on the graph, so models given one cache cost each such class once. Safe to share
/// between threads (makeClassCostCache).
struct ClassCostCache;
std::shared_ptr<ClassCostCache> makeClassCostCache();
/// How many classes' costs the cache holds, over every settings variant.
std::size_t classCostsHeld(ClassCostCache& cache);

/// Built once per (graph, mesh, hardware, settings): every op's strategies and node costs are
/// computed in the constructor (shared between ops with identical facts, e.g. the layers of a
/// transformer), so all methods are const, allocation-light and safe to call from several
/// threads. The graph is referenced, not copied: it must outlive the model.
class CostModel {
public:
    CostModel(const Graph& graph, const Mesh& mesh, const Hardware& hardware, CostSettings settings = {});
    /// The model of `graph` (a copy of structure's graph) on structure's mesh and hardware under
    /// other settings, reusing structure's analysis of the graph: for settings that change only
    /// costs (micro-batch, ZeRO stage, model-state bytes, overlap). Throws std::logic_error when
    /// a setting the op classes depend on (training, kernel fusion, FlashAttention, the fused
    /// loss, reader groups) or the graph's size differs.
    CostModel(const CostModel& structure, const Graph& graph, CostSettings settings);
    /// The same, its class costs found in or added to `shared` (ClassCostCache).
    CostModel(const CostModel& structure, const Graph& graph, CostSettings settings, std::shared_ptr<ClassCostCache> shared);
    ~CostModel();
    CostModel(const CostModel&) = delete;
    CostModel& operator=(const CostModel&) = delete;

    const Graph& graph() const;
    const Mesh& mesh() const;
    const Hardware& hardware() const;
    const CostSettings& settings() const;

    const Signature& signature(OpId op) const;
    /// Candidate strategies (enumerated once; index 0 is fully replicated).
    const std::vector<OpStrategy>& strategies(OpId op) const;
    int findStrategy(OpId op, const OpStrategy& strategy) const; ///< -1 when not a candidate
    /// Whether dim 0 of the tensor is the graph's batch (graph inputs of rank >= 2 have it; a
    /// loop indexing dim 0 of such a tensor carries it to the other operands it leads).
    bool batchLeading(TensorId tensor) const;
    /// How many ways this layout of the tensor splits its tokens: dim 0 when it leads with the
    /// batch, times dim 1 for routed tokens [b, e, c, ...] whose experts stand in for the batch
    /// (an expert-parallel op serves the tokens of every device on its axis).
    double batchSplits(TensorId tensor, const TensorSpec& spec) const;
    /// Whether the tensor holds routed tokens [b, e, c, ...] (from a Dispatch up to its Combine).
    bool routedTokens(TensorId tensor) const;
    /// Dim 0 of the first graph input of rank >= 2 (0 when there is none).
    std::int64_t graphBatch() const;
    /// Whether the op has contracted loops (runs at matmul rate; overlap applies).
    bool matmulLike(OpId op) const;

    /// Node cost of op under strategy index s with the given recomputation mode of its block.
    /// Activation bytes are those of the op's OUTPUTS kept for backward (at this op's output
    /// spec) plus its dropout mask. Selective: the attention core (ops between two weightless
    /// contractions, and the contraction feeding them) keeps nothing and pays its forward again.
    /// Full: the op keeps nothing and pays its forward again; the caller adds the block input.
    const OpCost& opCost(OpId op, int s, Recompute recompute = Recompute::None) const;
    /// What every plan of this model costs at least, from the node costs alone (edges cost time
    /// and no memory, the fold only adds kept inputs), per op class over its strategies and
    /// recompute modes, so the planner can rule out a combination of settings unsearched:
    /// `bytes`, the least memory per device of any plan; `seconds`, the least step time of any
    /// plan that fits `limitBytes` (a Lagrangian bound over the node costs; infinite when even
    /// `bytes` does not fit). `forced` (op -> strategy index: the locks) restricts those ops to
    /// that strategy, so the bound holds for every plan under those locks and rises with them.
    struct Floor {
        double seconds = 0;
        double bytes = 0;
        bool priced = false; ///< the ops' fastest choices hold more than the limit
        /// The memory price (seconds per byte) at which `seconds` is reached when priced: near
        /// where a search under the limit finds its plan (PlannerSession starts there).
        double price = 0;
        double fastestSeconds = 0, fastestBytes = 0; ///< of every op's fastest choice
        /// The price past which every op's cheapest node choice is one of least memory (the
        /// steepest step of any op's time-memory hull): where a plan of `bytes` is sought.
        double leastBytesPrice = 0;
    };
    Floor floor(double limitBytes = std::numeric_limits<double>::infinity(), const std::map<OpId, int>& forced = {}) const;
    /// Ops that choose alike, as floor and nodeDifferenceFloor group them: per (op class, the
    /// strategy the locks force or -1 for free), how many ops, in that order. The same for
    /// every model derived from one structure, so a caller asking many makes it once.
    struct OpChoices {
        const void* structure = nullptr; ///< the op classes it was made over
        std::vector<std::tuple<int, int, double>> counts;
    };
    OpChoices opChoices(const std::map<OpId, int>& forced = {}) const;
    /// floor and nodeDifferenceFloor with the locks grouped already (opChoices of this model's
    /// structure; another's throws std::logic_error).
    Floor floor(double limitBytes, const OpChoices& choices) const;
    /// How much more every plan costs under this model than under `from` at memory price
    /// `price`, at least: the sum over ops of the least difference of their node costs
    /// (time + price x memory) over the strategies (`forced`: the locks) and recompute modes.
    /// Meaningful only between models whose plans differ in node costs alone (derived from one
    /// structure, settings equal but for the ZeRO stage, its sharding and resharding: their
    /// edges and kept inputs are the same), so that a Lagrangian bound of `from` at that price
    /// plus this bounds this model's (PlannerSession's duals). -infinity where that does not
    /// hold, or where this model may choose what `from` forbids.
    double nodeDifferenceFloor(const CostModel& from, double price, const std::map<OpId, int>& forced = {}) const;
    double nodeDifferenceFloor(const CostModel& from, double price, const OpChoices& choices) const;
    const TensorSpec& inputSpec(OpId op, int s, int input) const;
    const TensorSpec& outputSpec(OpId op, int s, int output) const;

    /// Edge cost of feeding input `input` of `consumer` (under strategy s) from a tensor laid
    /// out as `produced`: the forward resharding plus the backward dual for the gradient.
    /// Graph inputs (no producer) and weights cost nothing: pass std::nullopt-like `nullptr`.
    /// Backward: a tensor read by several ops gets the sum of their gradients; the first
    /// consumer (op-id order) pays the reduction of its partial sums, later consumers only
    /// change layout and leave theirs partial (one all-reduce for q/k/v, as Megatron's fused
    /// QKV). Forward reshardings are charged per consumer.
    EdgeCost edgeCost(const TensorSpec* produced, OpId consumer, int input, int s) const;
    /// edgeCost in two steps, for callers that cost one edge under many settings: the
    /// collectives at whole size (they depend on the specs and the graph alone, so every model
    /// derived from one structure plans them alike), then their time under this model's
    /// settings (a batch tensor's are paid once per micro-batch, and overlap).
    std::vector<CollectiveCall> edgePlan(const TensorSpec& produced, OpId consumer, int input, int s) const;
    /// What an op-to-op edge's plans (edgePlans from the producer's specs into every consumer
    /// strategy) and their costs (edgeSeconds) depend on besides the mesh, hardware and
    /// settings, as text: equal keys in two graphs costed alike give equal plans and costs.
    std::string edgeContentKey(OpId producer, int slot, OpId consumer, int input) const;
    /// edgePlan from each of `produced` into each of the consumer's first `strategies`
    /// strategies, by spec then strategy: planned once per spec and distinct input layout of
    /// the consumer (strategies that read the input alike share a plan).
    std::vector<std::vector<CollectiveCall>> edgePlans(std::span<const TensorSpec> produced, OpId consumer, int input,
                                                       int strategies) const;
    EdgeCost edgeCost(std::vector<CollectiveCall> plan, const TensorSpec& produced, OpId consumer, int input, int s) const;
    /// edgeCost's times alone (its `collectives` left empty): what the search's edge tables
    /// read, without copying the plan.
    EdgeCost edgeSeconds(const std::vector<CollectiveCall>& plan, const TensorSpec& produced, OpId consumer, int input, int s) const;

    /// What one op is charged in a plan: its node cost under strategy s and recompute r, and
    /// the edges into its inputs from their producers' strategies in strategyOfOp (the same
    /// terms evaluate() sums, for explain's "why not" to price one op's alternatives).
    struct Charge {
        const OpCost* node = nullptr;
        /// The edges into the op's inputs, in input order, each with its producer (the op
        /// after which its collectives happen).
        std::vector<std::pair<OpId, EdgeCost>> edges;
        /// Full recomputation: the edges' forward collectives run once more in the backward pass.
        bool recomputesForward = false;
        /// Summed in the order evaluate() sums them, so the figures agree to the last bit.
        double stepSeconds() const;
        double commSeconds() const;
    };
    Charge chargeOf(OpId op, int s, Recompute r, const std::vector<int>& strategyOfOp) const;
    /// Edges costed once per key of `memo` (see evaluate's `canonicalOp`; none given: each edge costed).
    using EdgeMemo = std::map<std::array<int, 6>, EdgeCost>;
    Charge chargeOf(OpId op, int s, Recompute r, const std::vector<int>& strategyOfOp, const std::vector<OpId>& canonicalOp,
                    EdgeMemo& memo) const;

    /// The per-op sum behind evaluatePlan (core/search/evaluate.h), which every caller uses: one
    /// strategy per op (index into strategies()), recompute per op, and the bytes the fold adds
    /// per op (`extraBytesOfOp`: the kept inputs of fully recomputed blocks; required, and
    /// counted as activations, when any op recomputes fully). stepSeconds is one running sum in
    /// op-id order of chargeOf(op).stepSeconds(); perDeviceBytes likewise sums the op's
    /// memoryBytes() plus its extra bytes. Throws InputError naming the op for a bad index.
    /// `canonicalOp` (canonicalOps of the graph's fold; optional): an edge is costed once per
    /// (canonical consumer, input, strategy, canonical producer, slot, strategy), as the search's
    /// edge tables are (core/search/class_table.cpp, edgeFromOp).
    Breakdown evaluate(const std::vector<int>& strategyOfOp, const std::vector<Recompute>& recomputeOfOp = {},
                       const std::vector<double>& extraBytesOfOp = {}, const std::vector<OpId>& canonicalOp = {}) const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

} // namespace tp
