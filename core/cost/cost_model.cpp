#include "cost_model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>

#include "../graph/opkinds.h"
#include "../util/error.h"
#include "../util/key_builder.h"
#include "kernels.h"

namespace tp {

std::string_view recomputeName(Recompute r)
{
    static constexpr std::array<std::string_view, kRecomputeModes> names{"none", "selective", "full", "op"};
    return names[static_cast<size_t>(r)];
}

namespace {

constexpr AxisMask bit(int a) { return AxisMask{1} << a; }

bool isFloating(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::F8; }

bool hasContracted(const Signature& sig)
{
    return std::any_of(sig.loops.begin(), sig.loops.end(), [](const LoopDim& l) { return l.role == DimRole::Contracted; });
}

// A one-in one-out op without FLOPs whose loops appear in the same order in both operands is
// a reinterpretation of the same bytes (a view): no kernel runs. A reordering (transpose, the
// head split "bs(nd)->bnsd") copies memory and is charged as a memory-bound kernel.
bool isView(const Signature& sig, const OpKindInfo& info)
{
    if (info.flopsPerPoint != 0 || sig.inputs.size() != 1 || sig.outputs.size() != 1) return false;
    auto order = [&](const OperandIndexing& o) {
        std::vector<int> loops;
        for (const auto& g : o.dims)
            for (int l : g)
                if (sig.loops[static_cast<size_t>(l)].size > 1) loops.push_back(l);
        return loops;
    };
    return order(sig.inputs[0]) == order(sig.outputs[0]);
}

bool inOperand(const OperandIndexing& o, int loop)
{
    for (const auto& g : o.dims)
        if (std::find(g.begin(), g.end(), loop) != g.end()) return true;
    return false;
}

// Everything about an op that its node costs depend on besides the strategy. Ops with equal
// facts (the 96 identical layers of GPT-3) share one table of strategies and costs.
struct OpFacts {
    struct In {
        DType dtype;
        bool weight;
        bool ownsWeight;
        bool gathered;
        bool fused;  ///< read in-kernel from a fused producer (never from HBM)
        bool batch0; ///< dim 0 is the graph's batch
        bool routed; ///< dim 1 is the experts of routed tokens (CostModel::batchSplits)
    };
    struct Out {
        DType dtype;
        bool kept;
        bool droppedSelective;
        bool batch0;
        bool fused; ///< handed in-kernel to its fused reader (never written to HBM)
        bool routed;
    };
    std::vector<In> inputs;
    std::vector<Out> outputs;
    bool recomputedSelective = false;
    bool flash = false;       ///< inside a FlashAttention kernel (CostSettings::flashAttention)
    bool keptUnderOp = false; ///< its output is kept under Recompute::Op (an odd-numbered weight matmul)
};

/// One op's kernel times per device and step under one strategy.
struct PassTimes {
    double forward = 0, backward = 0;
    double weightGradient = 0; ///< of backward: the weight-gradient matmul
    double microBatches = 1;   ///< in this device's share of the step
    bool perMicroBatch = false; ///< runs once per micro-batch (its output leads with the batch)
};

enum class GemmDim : std::uint8_t { K, Batch, N, M };

struct OpClass {
    OpKind kind = OpKind::Opaque;
    Signature sig;
    OpFacts facts;
    std::vector<std::vector<std::int64_t>> inShapes, outShapes;
    bool matmulLike = false;
    bool gemm = false; ///< a product of two floating operands (cuBLAS): its rate follows its shape
    std::vector<OpStrategy> strategies;
    std::vector<std::vector<TensorSpec>> in, out;        // [strategy][operand]
    /// Elements per device of each operand under each strategy (shardNumel of in / out): the
    /// same under every cost setting, so counted once per structure.
    std::vector<std::vector<double>> inNumel, outNumel; // [strategy][operand]
    /// The axes each input's gradient is partial over (inputGradientPartial), [strategy][input].
    std::vector<std::vector<AxisMask>> inGradPartial;
    std::vector<GemmDim> gemmDims; ///< per loop, for a gemm (gemmDimsOf)
    bool view = false;          ///< moves no data (isView)
    std::string key;            ///< classKey: what makes two ops one class, in any graph
    double forwardFlops = 0;    ///< of the whole op, on one device
};

/// One op class's (memory, time) choices that some memory price makes cheapest (defined with
/// CostModel::floor).
std::vector<std::pair<double, double>> priceHull(std::vector<std::pair<double, double>> points);

/// An op class's costs under one cost model's settings (its OpClass is shared by the models
/// derived from one structure).

struct ClassCosts {
    std::vector<std::array<OpCost, kRecomputeModes>> cost; // [strategy][recompute]
    /// priceHull of every strategy and mode: the floor of an op free to choose (a re-plan
    /// after a lock asks the floors of every combination again).
    std::vector<std::pair<double, double>> hull;
    std::vector<double> forwardSeconds, backwardSeconds; // per device, one pass each
    std::vector<double> weightGradientSeconds;           // of backwardSeconds
};

} // namespace

/// Class costs by class key, per (settings but the reader groups, mesh, hardware, graph batch).
struct ClassCostCache {
    struct Variant {
        CostSettings settings; ///< readerGroupOfOp cleared
        Mesh mesh;
        Hardware hardware;
        std::int64_t graphBatch = 0;
        std::map<std::string, std::shared_ptr<const ClassCosts>> byClass;
    };
    std::mutex mutex;
    std::deque<Variant> variants; ///< a deque: a variant stays where it is while others are added

    /// The variant of a model's figures (under `mutex`), added when new. Settings are compared
    /// whole (their defaulted ==), so a setting added later is part of the key by itself.
    Variant& variantOf(const CostSettings& settings, const Mesh& mesh, const Hardware& hardware, std::int64_t graphBatch)
    {
        CostSettings probe = settings;
        probe.readerGroupOfOp.clear();
        for (auto& v : variants)
            if (v.graphBatch == graphBatch && v.settings == probe && v.mesh == mesh && v.hardware == hardware) return v;
        return variants.emplace_back(Variant{std::move(probe), mesh, hardware, graphBatch, {}});
    }
};

std::shared_ptr<ClassCostCache> makeClassCostCache() { return std::make_shared<ClassCostCache>(); }

std::size_t classCostsHeld(ClassCostCache& cache)
{
    std::lock_guard<std::mutex> lock(cache.mutex);
    std::size_t held = 0;
    for (const auto& v : cache.variants) held += v.byClass.size();
    return held;
}

namespace {

// A matmul proper: two floating operands sharing a contracted loop (not a loss or a
// reduction, whose contracted loops are sums over one operand).
bool isGemm(const Signature& sig, const OpFacts& f)
{
    if (sig.inputs.size() < 2 || !isFloating(f.inputs[0].dtype) || !isFloating(f.inputs[1].dtype)) return false;
    for (size_t l = 0; l < sig.loops.size(); ++l)
        if (sig.loops[l].role == DimRole::Contracted && inOperand(sig.inputs[0], static_cast<int>(l)) &&
            inOperand(sig.inputs[1], static_cast<int>(l)))
            return true;
    return false;
}

} // namespace

namespace {

/// How the collectives of an edge into a batch tensor repeat: once per micro-batch, each time
/// its share, so that their latency (and the lower bus bandwidth of a smaller message) is paid
/// per micro-batch as the consumer's kernels are (passTimes); times a pipeline's bubble factor.
struct EdgeRepeat {
    double micro = 1, pipelined = 1;
    bool scales() const { return micro > 1 || pipelined != 1; }
    double secondsOf(const CollectiveCall& call, const Mesh& mesh) const
    {
        return scales() ? pipelined * micro * collectiveSeconds(call.kind, call.bytes / micro, mesh.axes[static_cast<size_t>(call.axis)])
                        : call.seconds;
    }
};

} // namespace

struct CostModel::Impl {
    const Graph& graph;
    Mesh mesh;
    Hardware hw;
    CostSettings settings;
    std::vector<int> classOf; // per op
    /// Shared, read-only, by the cost models derived from one structure: copying every
    /// strategy's specs per derived model cost as much as costing them.
    std::shared_ptr<const std::vector<OpClass>> classes;
    std::vector<std::shared_ptr<const ClassCosts>> costs; // per class
    std::shared_ptr<ClassCostCache> sharedCosts;          ///< null: the model costs its classes itself
    std::vector<OpId> producer;                 // per tensor
    std::vector<int> producerSlot;              // per tensor: output index in its producer
    std::vector<std::pair<OpId, int>> firstUse; // per tensor: first (consumer, input) in id order
    /// (tensor, reader group) -> first (consumer, input) of that group, for tensors with readers
    /// in several groups. Shared, read-only, by derived models (an entry per op input).
    using FirstUseInGroup = std::map<std::pair<TensorId, int>, std::pair<OpId, int>>;
    std::shared_ptr<const FirstUseInGroup> firstUseInGroup = std::make_shared<const FirstUseInGroup>();
    int readerGroup(OpId op) const
    {
        return settings.readerGroupOfOp.empty() ? 0 : settings.readerGroupOfOp.at(static_cast<size_t>(op));
    }
    bool paysGradientReduction(TensorId t, OpId consumer, int input) const
    {
        if (settings.readerGroupOfOp.empty()) return firstUse[static_cast<size_t>(t)] == std::make_pair(consumer, input);
        auto it = firstUseInGroup->find({t, readerGroup(consumer)});
        return it != firstUseInGroup->end() && it->second == std::make_pair(consumer, input);
    }
    std::int64_t graphBatch = 0;
    std::vector<bool> batch0;       // per tensor: dim 0 is the graph's batch
    std::vector<bool> routed;       // per tensor: dim 1 is the experts of routed tokens
    /// How many ways a tensor's tokens are split: dim 0, and for routed tokens the experts too.
    double batchSplits(bool isRouted, const TensorSpec& spec) const
    {
        return static_cast<double>(spec.splitsOf(0, mesh)) * (isRouted ? static_cast<double>(spec.splitsOf(1, mesh)) : 1.0);
    }
    std::vector<int> matmulReaders; // per tensor: how many matmul-like ops read it
    bool overlapChunksOff() const { return settings.overlapChunks <= 1; }

    Impl(const Graph& g, const Mesh& m, const Hardware& h, CostSettings s) : graph(g), mesh(m), hw(h), settings(s) {}
    /// `base`'s analysis of the graph (classes, strategies, specs, batch tensors) for `g`, a
    /// copy of base's graph, under other cost settings; the costs are yet to be computed.
    Impl(const Impl& base, const Graph& g, CostSettings s) :
        graph(g),
        mesh(base.mesh),
        hw(base.hw),
        settings(std::move(s)),
        classOf(base.classOf),
        classes(base.classes),
        producer(base.producer),
        producerSlot(base.producerSlot),
        firstUse(base.firstUse),
        firstUseInGroup(base.firstUseInGroup),
        graphBatch(base.graphBatch),
        batch0(base.batch0),
        routed(base.routed),
        matmulReaders(base.matmulReaders)
    {}

    const OpClass& cls(OpId op) const { return classes->at(static_cast<size_t>(classOf.at(static_cast<size_t>(op)))); }
    const ClassCosts& costsOf(OpId op) const { return *costs.at(static_cast<size_t>(classOf.at(static_cast<size_t>(op)))); }
    /// How the collectives of an edge into tensor `tid`, read laid out as `to`, repeat
    /// (EdgeRepeat, defined with CostModel::edgeSeconds).
    EdgeRepeat edgeRepeat(TensorId tid, const TensorSpec& to) const;
    /// Every class's costs under the settings, those in sharedCosts taken from it.
    void costAllClasses()
    {
        costs.assign(classes->size(), nullptr);
        ClassCostCache::Variant* variant = nullptr;
        if (sharedCosts) {
            std::lock_guard<std::mutex> lock(sharedCosts->mutex);
            variant = &sharedCosts->variantOf(settings, mesh, hw, graphBatch);
            for (size_t k = 0; k < classes->size(); ++k)
                if (auto it = variant->byClass.find((*classes)[k].key); it != variant->byClass.end()) costs[k] = it->second;
        }
        std::vector<size_t> made;
        for (size_t k = 0; k < classes->size(); ++k) {
            if (costs[k]) continue;
            costs[k] = costOf((*classes)[k]);
            made.push_back(k);
        }
        if (!variant || made.empty()) return;
        std::lock_guard<std::mutex> lock(sharedCosts->mutex);
        for (size_t k : made)
            variant->byClass.emplace((*classes)[k].key, costs[k]); // another thread's equal costs may be there first
    }
    /// One class's costs and the hull of its (memory, time) points.
    std::shared_ptr<const ClassCosts> costOf(const OpClass& c) const
    {
        auto k = std::make_shared<ClassCosts>();
        costClass(c, *k);
        std::vector<std::pair<double, double>> points;
        for (const auto& modes : k->cost)
            for (const auto& mode : modes) points.emplace_back(mode.memoryBytes(), mode.seconds());
        k->hull = priceHull(std::move(points));
        return k;
    }

    void validateSettings() const;
    void build();
    void markRoutedTokens(const std::vector<const Signature*>& sigs, const std::vector<OpId>& order);
    void layOutClass(OpClass& c) const; ///< candidate strategies and their operand specs
    void costClass(const OpClass& c, ClassCosts& k) const; ///< every candidate's costs under the settings
    PassTimes passTimes(const OpClass& c, size_t s, double flopRate) const;
    void weightTerms(const OpClass& c, size_t s, const PassTimes& t, OpCost& cost) const;
};

namespace {

std::string classKey(const Op& op, const Signature& sig, const OpFacts& f, const Graph& g)
{
    // Built in place (KeyBuilder): every op of every stage graph is keyed, and concatenated
    // temporaries were a tenth of a 1536-layer pipeline search (docs/PERFORMANCE.md).
    KeyBuilder k;
    k.text.reserve(160);
    k << static_cast<int>(op.kind) << '|' << sig.equation << '|';
    for (const auto& l : sig.loops) k << l.size << ':' << static_cast<int>(l.role) << ',';
    auto shape = [&](TensorId t) {
        k << '[';
        for (auto d : g.tensor(t).shape) k << d << ',';
        k << ']';
    };
    auto flag = [&](bool on, char c) { k << (on ? c : '-'); };
    for (size_t i = 0; i < f.inputs.size(); ++i) {
        const auto& in = f.inputs[i];
        k << 'i' << static_cast<int>(in.dtype) << (in.weight ? 'w' : 'a');
        flag(in.ownsWeight, 'o');
        flag(in.gathered, 'g');
        flag(in.fused, 'f');
        flag(in.batch0, 'b');
        flag(in.routed, 'e');
        shape(op.inputs[i]);
    }
    for (size_t o = 0; o < f.outputs.size(); ++o) {
        const auto& out = f.outputs[o];
        k << 'o' << static_cast<int>(out.dtype);
        flag(out.kept, 'k');
        flag(out.droppedSelective, 'd');
        flag(out.batch0, 'b');
        flag(out.fused, 'f');
        flag(out.routed, 'e');
        shape(op.outputs[o]);
    }
    flag(f.recomputedSelective, 'R');
    flag(f.flash, 'F');
    flag(f.keptUnderOp, 'K');
    return std::move(k.text);
}

/// Per tensor, whether it is kept for the backward pass: a consumer saves it as an input, or
/// its producer saves its output (never a graph input or a weight).
std::vector<bool> keptForBackward(const Graph& graph, const std::vector<OpId>& producer, const CostSettings& settings)
{
    std::vector<bool> kept(graph.tensors.size(), false);
    for (const auto& op : graph.ops) {
        const auto& info = opKindInfo(op.kind);
        // An unfused loss keeps its own fp32 softmax, an eager RMSNorm its fp32 input and
        // output, not its input (costClass).
        const bool keepsOwn = unfusedPasses(op.kind, settings.fusedKernels, settings.fusedCrossEntropy) != nullptr;
        for (size_t i = 0; i < op.inputs.size(); ++i)
            if (i < 32 && (info.savedInputs & (1u << i)) && !keepsOwn) kept[static_cast<size_t>(op.inputs[i])] = true;
        if (info.savesOutput && !op.outputs.empty()) kept[static_cast<size_t>(op.outputs[0])] = true;
    }
    for (size_t t = 0; t < kept.size(); ++t)
        if (producer[t] < 0 || graph.tensors[t].role == TensorRole::Weight) kept[t] = false;
    return kept;
}

// Selective recomputation (Korthikanti et al.): the attention core between two weightless
// contractions (batch matmuls of two activations) is not kept but recomputed. Region ops are
// the non-matmul ops on a path from such a contraction's output to such a contraction's input;
// the contraction feeding the region is recomputed too, because the region's recomputation
// needs its output. Returns, per op, whether it is in such a region.
std::vector<bool> selectivelyRecomputed(const Graph& graph, const std::vector<OpId>& order, const std::vector<OpId>& producer,
                                        const std::vector<std::vector<OpId>>& consumers, const std::vector<bool>& matmul)
{
    const size_t nOps = graph.ops.size();
    std::vector<bool> weightless(nOps, false);
    for (size_t i = 0; i < nOps; ++i) {
        if (!matmul[i]) continue;
        weightless[i] = std::none_of(graph.ops[i].inputs.begin(), graph.ops[i].inputs.end(),
                                     [&](TensorId t) { return graph.tensor(t).role == TensorRole::Weight; });
    }
    std::vector<bool> fromW(nOps, false), toW(nOps, false);
    for (const auto id : order) {
        const auto& op = graph.op(id);
        if (matmul[static_cast<size_t>(id)]) continue;
        for (auto t : op.inputs) {
            const OpId p = producer[static_cast<size_t>(t)];
            if (p >= 0 && (weightless[static_cast<size_t>(p)] || fromW[static_cast<size_t>(p)]))
                fromW[static_cast<size_t>(id)] = true;
        }
    }
    {
        for (auto it = order.rbegin(); it != order.rend(); ++it) {
            const auto& op = graph.op(*it);
            if (matmul[static_cast<size_t>(*it)]) continue;
            for (auto t : op.outputs)
                for (OpId c : consumers[static_cast<size_t>(t)])
                    if (weightless[static_cast<size_t>(c)] || toW[static_cast<size_t>(c)]) toW[static_cast<size_t>(*it)] = true;
        }
    }
    std::vector<bool> recomputedSel(nOps, false);
    for (size_t i = 0; i < nOps; ++i) recomputedSel[i] = fromW[i] && toW[i];
    for (size_t i = 0; i < nOps; ++i) {
        if (!weightless[i]) continue;
        for (auto t : graph.ops[i].outputs)
            for (OpId c : consumers[static_cast<size_t>(t)])
                if (!matmul[static_cast<size_t>(c)] && fromW[static_cast<size_t>(c)] && toW[static_cast<size_t>(c)])
                    recomputedSel[i] = true;
    }
    return recomputedSel;
}

// Recompute::Op keeps every other weight matmul's output, counted in op order within each
// reader group (block instance; the whole graph without groups), as torchtitan's policy counts
// its aten.mm calls per checkpointed block, and the attention kernel's output (FlashAttention:
// the contraction that closes the attention core; without it the core's matmuls are recomputed).
std::vector<bool> keptUnderOpRecompute(const Graph& graph, const std::vector<bool>& matmul,
                                       const std::vector<bool>& recomputedSel, bool flashAttention,
                                       const std::vector<int>& readerGroupOfOp)
{
    std::vector<bool> kept(graph.ops.size(), false);
    std::map<int, int> weightMatmulsInGroup;
    for (const auto& op : graph.ops) {
        const auto i = static_cast<size_t>(op.id);
        if (!matmul[i]) continue;
        const bool weighted = std::any_of(op.inputs.begin(), op.inputs.end(),
                                          [&](TensorId t) { return graph.tensor(t).role == TensorRole::Weight; });
        const int group = readerGroupOfOp.empty() ? 0 : readerGroupOfOp.at(i);
        if (weighted)
            kept[i] = weightMatmulsInGroup[group]++ % 2 == 0;
        else
            kept[i] = flashAttention && !recomputedSel[i];
    }
    return kept;
}

} // namespace

void CostModel::Impl::validateSettings() const
{
    if (settings.overlapChunks < 1) throw InputError("cost settings: field 'overlapChunks' must be at least 1");
    if (settings.zeroStage < 0 || settings.zeroStage > 3)
        throw InputError("cost settings: field 'zeroStage' must be 0, 1, 2 or 3");
    if (settings.microBatch < 0) throw InputError("cost settings: field 'microBatch' must not be negative");
    if (!std::isfinite(settings.pipelineBubble) || settings.pipelineBubble < 0)
        throw InputError("cost settings: field 'pipelineBubble' must be a finite number of micro-batches, 0 or more");
    if (settings.pipelineStages < 1 || settings.pipelineStages > 65536)
        throw InputError("cost settings: field 'pipelineStages' must be from 1 to 65536");
    if (!std::isfinite(settings.pipelineInFlight) || settings.pipelineInFlight < 1)
        throw InputError("cost settings: field 'pipelineInFlight' must be a finite number of micro-batches, 1 or more");
}

// Routed tokens [b, e, c, ...] (core/models/blocks.h): from a Dispatch to the Combine, dim 1 is
// the experts. A split of it stands in for the split of the batch: every device of that axis
// sends its tokens to each expert, so an expert-parallel op runs once per micro-batch of the
// data-parallel replicas, on their tokens together, and holds their activations together.
// The loop leading dim 1 of a Dispatch output carries the fact to every operand it leads dim 1
// of, up to the Combine.
void CostModel::Impl::markRoutedTokens(const std::vector<const Signature*>& sigs, const std::vector<OpId>& order)
{
    routed.assign(graph.tensors.size(), false);
    auto second = [](const OperandIndexing& o) { return o.dims.size() < 2 || o.dims[1].empty() ? -1 : o.dims[1][0]; };
    for (const auto id : order) {
        const auto& op = graph.op(id);
        if (op.kind == OpKind::Combine) continue;
        const auto& sig = *sigs[static_cast<size_t>(id)];
        std::vector<bool> expertLoop(sig.loops.size(), false);
        for (size_t o = 0; o < op.outputs.size() && op.kind == OpKind::Dispatch; ++o)
            if (second(sig.outputs[o]) >= 0) expertLoop[static_cast<size_t>(second(sig.outputs[o]))] = true;
        for (size_t i = 0; i < op.inputs.size(); ++i)
            if (routed[static_cast<size_t>(op.inputs[i])] && second(sig.inputs[i]) >= 0)
                expertLoop[static_cast<size_t>(second(sig.inputs[i]))] = true;
        for (size_t o = 0; o < op.outputs.size(); ++o)
            if (second(sig.outputs[o]) >= 0 && expertLoop[static_cast<size_t>(second(sig.outputs[o]))])
                routed[static_cast<size_t>(op.outputs[o])] = true;
    }
}

void CostModel::Impl::build()
{
    validateSettings();
    const size_t nOps = graph.ops.size(), nTensors = graph.tensors.size();
    producer = graph.producers();
    producerSlot.assign(nTensors, -1);
    firstUse.assign(nTensors, {-1, -1});
    auto inGroup = std::make_shared<FirstUseInGroup>();
    for (const auto& op : graph.ops) {
        for (size_t o = 0; o < op.outputs.size(); ++o) producerSlot[static_cast<size_t>(op.outputs[o])] = static_cast<int>(o);
        for (size_t i = 0; i < op.inputs.size(); ++i) {
            if (firstUse[static_cast<size_t>(op.inputs[i])].first < 0)
                firstUse[static_cast<size_t>(op.inputs[i])] = {op.id, static_cast<int>(i)};
            if (!settings.readerGroupOfOp.empty())
                inGroup->try_emplace({op.inputs[i], readerGroup(op.id)}, std::make_pair(op.id, static_cast<int>(i)));
        }
    }
    firstUseInGroup = std::move(inGroup);
    if (!settings.readerGroupOfOp.empty() && settings.readerGroupOfOp.size() != nOps)
        throw InputError("cost settings: field 'readerGroupOfOp' must have one entry per op");
    const auto consumers = graph.consumers();

    // One parsed signature per distinct one, not a copy per op (a 1536-layer stage graph has
    // thousands of ops and a handful of signatures).
    std::vector<const Signature*> sigs;
    sigs.reserve(nOps);
    SignatureCache signatures;
    for (const auto& op : graph.ops) sigs.push_back(&signatures.of(op, graph));
    std::vector<bool> matmul(nOps);
    for (size_t i = 0; i < nOps; ++i) matmul[i] = hasContracted(*sigs[i]);

    const std::vector<bool> kept = keptForBackward(graph, producer, settings);
    const std::vector<OpId> topo = graph.topologicalOrder(); // one order for every pass below
    const std::vector<bool> recomputedSel = selectivelyRecomputed(graph, topo, producer, consumers, matmul);
    const std::vector<bool> keptUnderOp =
        keptUnderOpRecompute(graph, matmul, recomputedSel, settings.flashAttention, settings.readerGroupOfOp);
    matmulReaders.assign(nTensors, 0);
    for (size_t t = 0; t < nTensors; ++t)
        for (OpId c : consumers[t]) matmulReaders[t] += matmul[static_cast<size_t>(c)] ? 1 : 0;

    // Fused chains (CostSettings::fusedKernels): a tensor that one memory-bound op hands to its
    // only reader, another memory-bound op, and that backward does not keep, stays in-kernel.
    std::vector<bool> fused(nTensors, false);
    if (settings.fusedKernels) {
        auto streaming = [&](OpId id) {
            const auto& op = graph.op(id);
            return !matmul[static_cast<size_t>(id)] && !isView(*sigs[static_cast<size_t>(id)], opKindInfo(op.kind));
        };
        for (size_t t = 0; t < nTensors; ++t) {
            const OpId p = producer[t];
            const auto& readers = consumers[t];
            // Only inside one reader group (a block instance, set from the fold): a tensor
            // leaving an instance may have one reader after the last instance and two after the
            // others, and identical instances must cost the same (the search prices one).
            fused[t] = p >= 0 && readers.size() == 1 && !kept[t] && graph.tensors[t].role != TensorRole::Output &&
                       !settings.readerGroupOfOp.empty() && readerGroup(p) == readerGroup(readers[0]) && streaming(p) &&
                       streaming(readers[0]);
        }
    }

    // Which tensors have the batch as dim 0. The batch is dim 0 of the first graph input of
    // rank >= 2 (tokens, images); graph inputs of rank >= 2 with that dim 0 seed it (not, say,
    // T5's [s, t] position buckets); a loop that indexes dim 0 of a batch tensor carries it to
    // every operand whose dim 0 it leads, until nothing changes (labels, a decoder's tokens).
    batch0.assign(nTensors, false);
    graphBatch = graphBatchOf(graph);
    for (const auto& t : graph.tensors)
        if (t.role == TensorRole::Input && t.shape.size() >= 2 && t.shape[0] == graphBatch) batch0[static_cast<size_t>(t.id)] = true;
    for (bool changed = true; changed;) {
        changed = false;
        const auto before = std::count(batch0.begin(), batch0.end(), true);
        for (const auto id : topo) {
            const auto& op = graph.op(id);
            const auto& sig = *sigs[static_cast<size_t>(id)];
            std::vector<bool> batchLoop(sig.loops.size(), false);
            auto lead = [](const OperandIndexing& o) { return o.dims.empty() || o.dims[0].empty() ? -1 : o.dims[0][0]; };
            for (size_t i = 0; i < op.inputs.size(); ++i)
                if (batch0[static_cast<size_t>(op.inputs[i])] && lead(sig.inputs[i]) >= 0)
                    batchLoop[static_cast<size_t>(lead(sig.inputs[i]))] = true;
            for (size_t o = 0; o < op.outputs.size(); ++o)
                if (batch0[static_cast<size_t>(op.outputs[o])] && lead(sig.outputs[o]) >= 0)
                    batchLoop[static_cast<size_t>(lead(sig.outputs[o]))] = true;
            for (size_t i = 0; i < op.inputs.size(); ++i)
                if (lead(sig.inputs[i]) >= 0 && batchLoop[static_cast<size_t>(lead(sig.inputs[i]))] &&
                    graph.tensor(op.inputs[i]).role != TensorRole::Weight)
                    batch0[static_cast<size_t>(op.inputs[i])] = true;
            for (size_t o = 0; o < op.outputs.size(); ++o)
                if (lead(sig.outputs[o]) >= 0 && batchLoop[static_cast<size_t>(lead(sig.outputs[o]))])
                    batch0[static_cast<size_t>(op.outputs[o])] = true;
        }
        changed = std::count(batch0.begin(), batch0.end(), true) != before;
    }
    markRoutedTokens(sigs, topo);

    // Facts per op, then one class per distinct facts.
    std::map<std::string, int> classIndex;
    std::vector<OpClass> built;
    classOf.assign(nOps, -1);
    for (const auto& op : graph.ops) {
        const auto& sig = *sigs[static_cast<size_t>(op.id)];
        OpFacts f;
        for (size_t i = 0; i < op.inputs.size(); ++i) {
            const auto& t = graph.tensor(op.inputs[i]);
            const bool weight = t.role == TensorRole::Weight;
            const auto use = firstUse[static_cast<size_t>(t.id)];
            bool gathered = false;
            for (const auto& g : sig.inputs[i].dims)
                for (int l : g) gathered = gathered || sig.loops[static_cast<size_t>(l)].role == DimRole::Gather;
            f.inputs.push_back({t.dtype, weight, weight && use.first == op.id && use.second == static_cast<int>(i), gathered,
                                fused[static_cast<size_t>(t.id)], batch0[static_cast<size_t>(t.id)],
                                routed[static_cast<size_t>(t.id)]});
        }
        for (auto t : op.outputs) {
            const auto ti = static_cast<size_t>(t);
            f.outputs.push_back(
                {graph.tensors[ti].dtype, kept[ti], recomputedSel[static_cast<size_t>(op.id)], batch0[ti], fused[ti], routed[ti]});
        }
        f.recomputedSelective = recomputedSel[static_cast<size_t>(op.id)];
        f.flash = settings.flashAttention && f.recomputedSelective;
        f.keptUnderOp = keptUnderOp[static_cast<size_t>(op.id)];
        const std::string key = classKey(op, sig, f, graph);
        auto [it, inserted] = classIndex.try_emplace(key, static_cast<int>(built.size()));
        if (inserted) {
            OpClass c;
            c.kind = op.kind;
            c.key = key;
            c.sig = sig;
            c.facts = std::move(f);
            for (auto t : op.inputs) c.inShapes.push_back(graph.tensor(t).shape);
            for (auto t : op.outputs) c.outShapes.push_back(graph.tensor(t).shape);
            c.matmulLike = matmul[static_cast<size_t>(op.id)];
            c.gemm = c.matmulLike && isGemm(sig, c.facts);
            built.push_back(std::move(c));
        }
        classOf[static_cast<size_t>(op.id)] = it->second;
    }
    for (auto& c : built) layOutClass(c);
    classes = std::make_shared<const std::vector<OpClass>>(std::move(built));
    costAllClasses();
}

namespace {

/// Which dimension of a matmul each loop of its signature is: loops in the output and both
/// inputs are the batch, in the output and input 0 (1) only the rows m (columns n), and loops
/// missing from the output the contraction k.
std::vector<GemmDim> gemmDimsOf(const Signature& sig)
{
    std::vector<GemmDim> dims;
    for (size_t l = 0; l < sig.loops.size(); ++l) {
        const int loop = static_cast<int>(l);
        const bool out = inOperand(sig.outputs[0], loop), a = inOperand(sig.inputs[0], loop);
        const bool b = sig.inputs.size() > 1 && inOperand(sig.inputs[1], loop);
        dims.push_back(!out ? GemmDim::K : a && b ? GemmDim::Batch : b ? GemmDim::N : GemmDim::M);
    }
    return dims;
}

// The forward matmul of a contraction as cuBLAS runs it, per device and micro-batch.
GemmShape gemmShapeOf(const OpClass& c, const OpStrategy& st, const Mesh& mesh, int batchLoop, double microBatches)
{
    GemmShape g;
    for (size_t l = 0; l < c.sig.loops.size(); ++l) {
        double size = static_cast<double>(c.sig.loops[l].size);
        for (int a : st.loopAxes[l]) size /= mesh.axes[static_cast<size_t>(a)].size;
        if (static_cast<int>(l) == batchLoop) size = std::max(1.0, size / microBatches);
        switch (c.gemmDims[l]) {
        case GemmDim::K: g.k *= size; break;
        case GemmDim::Batch: g.batch *= size; break;
        case GemmDim::N: g.n *= size; break;
        case GemmDim::M: g.m *= size; break;
        }
    }
    return g;
}

int leadLoopOf(const OperandIndexing& o, const Signature& sig)
{
    if (o.dims.empty()) return -1;
    for (int l : o.dims[0])
        if (sig.loops[static_cast<size_t>(l)].size > 1) return l;
    return -1;
}

} // namespace

// Kernel times of one strategy. Matmuls: forward at the efficiency of their shape, backward
// as the input-gradient (m x k, contracting n) and weight-gradient (k x n, contracting m)
// matmuls; the rest stream the bytes they read and write, less what a fused neighbour hands
// them in-kernel. A local batch of several micro-batches runs each kernel once per micro-batch.
PassTimes CostModel::Impl::passTimes(const OpClass& c, size_t s, double flopRate) const
{
    const auto& info = opKindInfo(c.kind);
    const auto& st = c.strategies[s];
    double shards = 1;
    for (int a = 0; a < mesh.rank(); ++a)
        if (st.usedAxes() & bit(a)) shards *= mesh.axes[static_cast<size_t>(a)].size;
    // Micro-batches in this device's share of the step.
    double micro = 1;
    int batchLoop = -1;
    if (!c.facts.outputs.empty() && c.facts.outputs[0].batch0) {
        batchLoop = leadLoopOf(c.sig.outputs[0], c.sig);
        if (settings.microBatch > 0 && graphBatch > 0) {
            const double local = static_cast<double>(graphBatch) / batchSplits(c.facts.outputs[0].routed, c.out[s][0]);
            micro = std::max(1.0, std::ceil(local / static_cast<double>(settings.microBatch)));
        }
    }
    double outBytes = 0, inBytes = 0, savedBytes = 0;
    for (size_t o = 0; o < c.outShapes.size(); ++o) {
        const double b = c.outNumel[s][o] * dtypeBytes(c.facts.outputs[o].dtype);
        if (!c.facts.outputs[o].fused) outBytes += b;
        if (o == 0 && info.savesOutput) savedBytes += b;
    }
    for (size_t i = 0; i < c.inShapes.size(); ++i) {
        const auto& in = c.facts.inputs[i];
        double b = c.inNumel[s][i] * dtypeBytes(in.dtype);
        // A looked-up table (gather loop) is read only where indexed: at most one row per
        // output element.
        if (in.gathered) b = std::min(b, outBytes);
        if (i < 32 && (info.savedInputs & (1u << i))) savedBytes += b;
        if (!in.fused) inBytes += b;
    }
    PassTimes t;
    t.microBatches = micro;
    t.perMicroBatch = batchLoop >= 0 || (!c.facts.outputs.empty() && c.facts.outputs[0].batch0);
    const bool view = c.view;
    const bool training = settings.training && !view && info.backwardFactor > 0;
    const double flops = c.forwardFlops / shards;
    const double launch = micro * hw.minKernelSeconds;
    if (c.gemm) {
        const GemmShape f = gemmShapeOf(c, st, mesh, batchLoop, micro);
        const double bytes = inBytes + outBytes;
        t.forward = std::max(gemmSeconds(hw, flopRate, flops, bytes, f), launch);
        if (training) {
            const double half = flops * info.backwardFactor / 2;
            const double inputGrad = gemmSeconds(hw, flopRate, half, bytes, {f.batch, f.m, f.k, f.n});
            const double weightGrad = gemmSeconds(hw, flopRate, half, bytes, {f.batch, f.k, f.n, f.m});
            t.backward = std::max(inputGrad + weightGrad, launch);
            const bool weighted =
                std::any_of(c.facts.inputs.begin(), c.facts.inputs.end(), [](const auto& in) { return in.weight; });
            if (weighted) t.weightGradient = weightGrad;
            // FlashAttention's backward recomputes the scores inside its kernel.
            if (c.facts.flash) t.backward += t.forward;
        }
        return t;
    }
    if (view || c.facts.flash) return t; // a view moves nothing; FlashAttention runs it in-kernel
    if (const UnfusedPasses* u = unfusedPasses(c.kind, settings.fusedKernels, settings.fusedCrossEntropy)) {
        const double elems = c.inNumel[s][0];
        t.forward = std::max(streamSeconds(hw, elems * u->forwardBytes), launch);
        if (training) t.backward = std::max(streamSeconds(hw, elems * u->backwardBytes), launch);
        return t;
    }
    const bool fusedIn = std::any_of(c.facts.inputs.begin(), c.facts.inputs.end(), [](const auto& in) { return in.fused; });
    const double floor = fusedIn ? 0 : launch; // shares its producer's launch
    const double stream = std::max(flops / flopRate, streamSeconds(hw, inBytes + outBytes));
    t.forward = std::max(stream, floor);
    // Backward reads the output gradient and what the forward saved, and writes the input
    // gradients of its activations.
    if (training) {
        double gradBytes = 0;
        for (size_t i = 0; i < c.inShapes.size(); ++i)
            if (!c.facts.inputs[i].weight && isFloating(c.facts.inputs[i].dtype))
                gradBytes +=
                    c.inNumel[s][i] * dtypeBytes(c.facts.inputs[i].dtype);
        const double bwdStream =
            std::max(flops * info.backwardFactor / flopRate, streamSeconds(hw, outBytes + savedBytes + gradBytes));
        t.backward = std::max(bwdStream, floor);
    }
    return t;
}

namespace {

/// The bytes a mixed-precision Adam step streams per parameter, pass by pass as Megatron runs
/// it (megatron/core/optimizer/optimizer.py, MixedPrecisionOptimizer.step): half-precision
/// gradients copied into fp32 main gradients (read g, write 4), their norm for clipping (read
/// 4), Adam over the fp32 master weight and its two moments (read the gradient and the states,
/// write the states back), the updated master weight copied into the model's weight (read 4,
/// write p), and the model gradients zeroed for the next step (write g). With fp32 gradients
/// there is nothing to copy. 2 + 4 + 4 + (4 + 24) + (4 + 2) + 2 = 46 bytes for bf16 weights
/// and gradients with 12 bytes of states.
double optimizerStepBytesPerParam(const CostSettings& s)
{
    constexpr double fp32 = 4;
    const double castToFp32 = s.gradBytesPerParam < fp32 ? s.gradBytesPerParam + fp32 : 0;
    const double gradientNorm = fp32;
    const double adam = fp32 + 2 * s.optimizerBytesPerParam;
    const double copyToModel = fp32 + s.paramBytesPerParam;
    const double zeroGradients = s.gradBytesPerParam;
    return castToFp32 + gradientNorm + adam + copyToModel + zeroGradients;
}

} // namespace

// What an op's own weights cost: their model states at the first consumer, the optimizer's
// update of them, and the data-parallel collectives of a weight replicated over axes that split
// its readers' batch-like loops (the axes its gradient is partial over): under ZeRO stage 0 an
// all-reduce of the gradient; stages 1-2 (Megatron's distributed optimizer, ZeRO-2) a
// reduce-scatter of the gradient and an all-gather of the updated parameters, the states (and
// at 2 the gradient) kept as 1/Nd shards and the optimizer stepping its shard only; stage 3
// (FSDP) also the parameters sharded, all-gathered before the forward and again before the
// backward of every micro-batch (or, not resharded after forward, held gathered from the
// forward to the backward: one gather per micro-batch and the whole weight held as well). Collectives over several axes run axis by axis on the
// shrinking (or growing) shard, in buckets; hidden under the op's own compute where the
// framework overlaps them: gradient reductions and backward gathers under its backward,
// forward gathers (prefetch) under its forward; the gather of updated parameters after the
// step stays exposed.
void CostModel::Impl::weightTerms(const OpClass& c, size_t s, const PassTimes& t, OpCost& cost) const
{
    const int zero = settings.training ? settings.zeroStage : 0;
    auto bucketed = [&](CollectiveKind kind, double bytes, const MeshAxis& axis) {
        // A message smaller than a bucket shares one bucket's collective with its neighbours
        // and pays its share of it.
        const double bucket = settings.gradientBucketBytes;
        return bucket > 0 && bytes < bucket ? bytes / bucket * collectiveSeconds(kind, bucket, axis)
                                            : collectiveSeconds(kind, bytes, axis);
    };
    double underBackward = 0, underForward = 0;
    int weightInput = -1; // the input whose calls are being recorded
    auto record = [&](CollectiveKind kind, int a, double bytes, double times, Phase phase, double* overlapped) {
        const double seconds = times * bucketed(kind, bytes, mesh.axes[static_cast<size_t>(a)]);
        cost.collectives.push_back({kind, a, bytes * times, seconds, phase, weightInput});
        cost.commSeconds += seconds;
        if (overlapped) *overlapped += seconds;
    };
    for (size_t i = 0; i < c.facts.inputs.size(); ++i) {
        if (!c.facts.inputs[i].ownsWeight) continue;
        weightInput = static_cast<int>(i);
        const double elems = c.inNumel[s][i];
        // The data-parallel axes ZeRO shards over (all, or under HSDP those inside a node) and
        // those the model states stay replicated across.
        std::vector<int> dpAxes, replicaAxes;
        double dp = 1;
        const AxisMask partial = settings.training ? c.inGradPartial[s][i] : AxisMask{0};
        for (int a = 0; a < mesh.rank(); ++a) {
            const MeshAxis& axis = mesh.axes[static_cast<size_t>(a)];
            if (!(partial & bit(a)) || axis.size <= 1) continue;
            if (zero > 0 && !settings.zeroAcrossNodes && axis.crossesNodes) {
                replicaAxes.push_back(a);
                continue;
            }
            dpAxes.push_back(a);
            dp *= axis.size;
        }
        const double params = zero >= 3 ? dp : 1, grads = zero >= 2 ? dp : 1, states = zero >= 1 ? dp : 1;
        const bool heldGathered = zero >= 3 && !settings.reshardAfterForward && settings.training && dp > 1;
        cost.paramBytes += elems * settings.paramBytesPerParam / params;
        // FSDP's gathered copy is storage of its own next to the shard.
        if (heldGathered) cost.paramBytes += elems * settings.paramBytesPerParam;
        if (!settings.training) continue;
        cost.gradBytes += elems * settings.gradBytesPerParam / grads;
        cost.optimizerBytes += elems * settings.optimizerBytesPerParam / states;
        const double step = streamSeconds(hw, elems / states * optimizerStepBytesPerParam(settings));
        cost.optimizerSeconds += step;
        cost.computeSeconds += step;
        if (dpAxes.empty() && replicaAxes.empty()) continue;
        const double gradBytes = elems * settings.gradBytesPerParam, paramBytes = elems * settings.paramBytesPerParam;
        if (zero == 0) {
            for (int a : dpAxes) record(CollectiveKind::AllReduce, a, gradBytes, 1, Phase::Gradient, &underBackward);
            continue;
        }
        // Stage 2 and up keep only the gradient's shard, so every micro-batch reduce-scatters
        // (HSDP with nothing to shard inside a node keeps the whole gradient: once a step).
        const double reductions = zero >= 2 && !dpAxes.empty() ? t.microBatches : 1;
        double shard = gradBytes;
        for (int a : dpAxes) {
            record(CollectiveKind::ReduceScatter, a, shard, reductions, Phase::Gradient, &underBackward);
            shard /= mesh.axes[static_cast<size_t>(a)].size;
        }
        // FSDP2 (fully_shard, the plan's PyTorch export) shards parameter by parameter, so its
        // collectives run on flat buffers it copies into and out of (torch/distributed/fsdp/
        // _fully_shard/_fsdp_collectives.py): every gather copies the shard in (read and write
        // it) and the gathered weight out (read and write it whole); every reduce-scatter copies
        // the whole gradient in, read in the parameter's dtype and written in the reduction's.
        if (zero >= 3 && !dpAxes.empty()) {
            const double gathers = t.microBatches * (heldGathered ? 1 : 2);
            const double copies = gathers * 2 * (paramBytes / dp + paramBytes) + reductions * (paramBytes + gradBytes);
            const double seconds = streamSeconds(hw, copies);
            cost.bufferCopySeconds += seconds;
            cost.computeSeconds += seconds;
        }
        for (int a : replicaAxes) record(CollectiveKind::AllReduce, a, shard, reductions, Phase::Gradient, &underBackward);
        double gathered = paramBytes / dp;
        for (auto it = dpAxes.rbegin(); it != dpAxes.rend(); ++it) {
            gathered *= mesh.axes[static_cast<size_t>(*it)].size;
            if (zero >= 3) {
                record(CollectiveKind::AllGather, *it, gathered, t.microBatches, Phase::Forward, &underForward);
                if (!heldGathered) record(CollectiveKind::AllGather, *it, gathered, t.microBatches, Phase::Backward, &underBackward);
            } else {
                record(CollectiveKind::AllGather, *it, gathered, 1, Phase::Gradient, nullptr);
            }
        }
    }
    if (settings.overlapGradientReduction) {
        const double exposedForward = exposedAfterOverlap(underForward, t.forward);
        cost.hiddenForwardCommSeconds = underForward - exposedForward;
        cost.hiddenCommSeconds = underBackward - exposedAfterOverlap(underBackward, t.backward) + underForward - exposedForward;
    }
}

// Node costs of every strategy of one class, for the three recomputation modes.
void CostModel::Impl::layOutClass(OpClass& c) const
{
    c.strategies = enumerateStrategies(c.sig, mesh);
    c.view = isView(c.sig, opKindInfo(c.kind));
    if (c.gemm) c.gemmDims = gemmDimsOf(c.sig);
    c.forwardFlops = forwardFlops(c.sig, opKindInfo(c.kind));
    const size_t n = c.strategies.size();
    c.in.assign(n, {});
    c.out.assign(n, {});
    c.inNumel.assign(n, {});
    c.outNumel.assign(n, {});
    c.inGradPartial.assign(n, {});
    for (size_t s = 0; s < n; ++s) {
        const auto& st = c.strategies[s];
        for (size_t i = 0; i < c.sig.inputs.size(); ++i) {
            c.in[s].push_back(tp::inputSpec(c.sig, st, i));
            c.inNumel[s].push_back(static_cast<double>(c.in[s][i].shardNumel(c.inShapes[i], mesh)));
            c.inGradPartial[s].push_back(inputGradientPartial(c.sig, st, i));
        }
        for (size_t o = 0; o < c.sig.outputs.size(); ++o) {
            c.out[s].push_back(tp::outputSpec(c.sig, st, o));
            c.outNumel[s].push_back(static_cast<double>(c.out[s][o].shardNumel(c.outShapes[o], mesh)));
        }
    }
}

void CostModel::Impl::costClass(const OpClass& c, ClassCosts& k) const
{
    const auto& info = opKindInfo(c.kind);
    const size_t n = c.strategies.size();
    k.cost.resize(n);
    k.forwardSeconds.resize(n);
    k.backwardSeconds.resize(n);
    k.weightGradientSeconds.resize(n);
    DType computeType = c.facts.outputs.empty() ? DType::BF16 : c.facts.outputs[0].dtype;
    for (const auto& in : c.facts.inputs)
        if (isFloating(in.dtype)) {
            computeType = in.dtype;
            break;
        }
    // Transformer Engine's fp8 covers the Linear layers (their weights); attention's batch
    // matmuls stay in bf16 (core/plan/planner.cpp refuses --dtype fp8 without an fp8 peak).
    if (settings.fp8Matmuls && c.kind == OpKind::Linear && isFloating(computeType)) computeType = DType::F8;
    const double peak = hw.peak(computeType);

    for (size_t s = 0; s < n; ++s) {
        PassTimes t = passTimes(c, s, c.gemm ? peak : peak * hw.matmulEfficiency);
        // A pipeline stage idles through its share of the bubble: each kernel's time per
        // micro-batch is paid (n + bubble) / n times (a kernel without the batch runs once per
        // step, outside the pipeline's rhythm).
        const double pipelined = t.perMicroBatch ? pipelinedFactor(settings, t.microBatches) : 1;
        t.forward *= pipelined;
        t.backward *= pipelined;
        t.weightGradient *= pipelined;
        k.forwardSeconds[s] = t.forward;
        k.backwardSeconds[s] = t.backward;
        k.weightGradientSeconds[s] = t.weightGradient;

        OpCost base;
        base.computeSeconds = t.forward + t.backward;
        base.forwardSeconds = t.forward;
        weightTerms(c, s, t, base);
        // Activations kept for backward, at this op's output specs (so a sequence-parallel
        // producer keeps the sharded copy), scaled down when micro-batches hold fewer samples.
        auto scaled = [&](const TensorSpec& spec, size_t o, double b) {
            if (!c.facts.outputs[o].batch0) return b;
            return b * heldActivationShare(settings, graphBatch, batchSplits(c.facts.outputs[o].routed, spec));
        };
        double keptAll = 0, keptSelective = 0;
        if (settings.training) {
            for (size_t o = 0; o < c.facts.outputs.size(); ++o) {
                const auto& out = c.facts.outputs[o];
                const double elems = c.outNumel[s][o];
                double b = 0;
                if (out.kept) b += elems * dtypeBytes(out.dtype);
                if (o == 0) b += elems * info.maskBytesPerElement;
                b = scaled(c.out[s][o], o, b);
                keptAll += b;
                if (!out.droppedSelective) keptSelective += b;
            }
            if (const UnfusedPasses* u = unfusedPasses(c.kind, settings.fusedKernels, settings.fusedCrossEntropy)) {
                double b = c.inNumel[s][0] * u->keptBytes;
                if (c.facts.inputs[0].batch0)
                    b *= heldActivationShare(settings, graphBatch, batchSplits(c.facts.inputs[0].routed, c.in[s][0]));
                keptAll += b;
                keptSelective += b;
            }
        }
        // None: keep everything; Selective: drop the attention core and recompute its
        // forward; Full: keep nothing and recompute the forward (the search adds the block
        // input, which the block's first op cannot know it must keep). FlashAttention keeps
        // nothing of the core in any mode and recomputes it in its own backward.
        k.cost[s][0] = base;
        k.cost[s][0].activationBytes = c.facts.flash ? keptSelective : keptAll;
        k.cost[s][1] = base;
        k.cost[s][1].activationBytes = keptSelective;
        if (settings.training && c.facts.recomputedSelective && !c.facts.flash) {
            k.cost[s][1].computeSeconds += t.forward;
        }
        k.cost[s][2] = base;
        k.cost[s][2].activationBytes = 0;
        if (settings.training) k.cost[s][2].computeSeconds += t.forward;
        // Op: a FlashAttention kernel keeps what it keeps in any mode and recomputes inside its
        // own backward; a kept matmul its output only; every other op nothing, its forward again.
        OpCost& op = k.cost[s][static_cast<size_t>(Recompute::Op)];
        op = std::move(base); // its last use: the other modes copied it
        if (c.facts.flash) {
            op.activationBytes = keptSelective;
        } else if (c.facts.keptUnderOp && settings.training && !c.facts.outputs.empty()) {
            const double elems = c.outNumel[s][0];
            op.activationBytes = scaled(c.out[s][0], 0, elems * dtypeBytes(c.facts.outputs[0].dtype));
        } else {
            op.activationBytes = 0;
            if (settings.training) op.computeSeconds += t.forward;
        }
    }
}

std::int64_t graphBatchOf(const Graph& graph)
{
    for (const auto& t : graph.tensors)
        if (t.role == TensorRole::Input && t.shape.size() >= 2) return t.shape[0];
    return 0;
}

double heldActivationShare(const CostSettings& settings, std::int64_t graphBatch, double batchSplits)
{
    if (settings.microBatch <= 0 || graphBatch <= 0) return 1;
    return std::min(1.0, static_cast<double>(settings.microBatch) * settings.pipelineInFlight * batchSplits /
                             static_cast<double>(graphBatch));
}

double pipelinedFactor(const CostSettings& settings, double microBatches)
{
    if (settings.pipelineBubble <= 0) return 1;
    double bubble = settings.pipelineBubble;
    const double stages = settings.pipelineStages;
    if (stages > 1 && std::abs(std::remainder(microBatches, stages)) > 1e-9) bubble = std::max(bubble, stages - 1);
    return (microBatches + bubble) / microBatches;
}

CostModel::CostModel(const Graph& graph, const Mesh& mesh, const Hardware& hardware, CostSettings settings) :
    impl_(std::make_unique<Impl>(graph, mesh, hardware, settings))
{
    impl_->build();
}

CostModel::CostModel(const CostModel& structure, const Graph& graph, CostSettings settings) :
    CostModel(structure, graph, std::move(settings), nullptr)
{}

CostModel::CostModel(const CostModel& structure, const Graph& graph, CostSettings settings,
                     std::shared_ptr<ClassCostCache> shared)
{
    const CostSettings& was = structure.settings();
    // What an op's class, strategies and specs depend on must be the same.
    if (settings.training != was.training || settings.flashAttention != was.flashAttention ||
        settings.fusedKernels != was.fusedKernels || settings.fusedCrossEntropy != was.fusedCrossEntropy ||
        settings.readerGroupOfOp != was.readerGroupOfOp || graph.ops.size() != structure.graph().ops.size() ||
        graph.tensors.size() != structure.graph().tensors.size())
        throw std::logic_error("CostModel: a structural setting or the graph differs from the model it is derived from");
    impl_ = std::make_unique<Impl>(*structure.impl_, graph, std::move(settings));
    impl_->sharedCosts = std::move(shared);
    impl_->validateSettings();
    impl_->costAllClasses();
}

CostModel::~CostModel() = default;

const Graph& CostModel::graph() const { return impl_->graph; }
const Mesh& CostModel::mesh() const { return impl_->mesh; }
const Hardware& CostModel::hardware() const { return impl_->hw; }
const CostSettings& CostModel::settings() const { return impl_->settings; }
const Signature& CostModel::signature(OpId op) const { return impl_->cls(op).sig; }
const std::vector<OpStrategy>& CostModel::strategies(OpId op) const { return impl_->cls(op).strategies; }
bool CostModel::batchLeading(TensorId tensor) const { return impl_->batch0.at(static_cast<size_t>(tensor)); }
bool CostModel::routedTokens(TensorId tensor) const { return impl_->routed.at(static_cast<size_t>(tensor)); }
double CostModel::batchSplits(TensorId tensor, const TensorSpec& spec) const
{
    return impl_->batchSplits(impl_->routed.at(static_cast<size_t>(tensor)), spec);
}
std::int64_t CostModel::graphBatch() const { return impl_->graphBatch; }
bool CostModel::matmulLike(OpId op) const { return impl_->cls(op).matmulLike; }

int CostModel::findStrategy(OpId op, const OpStrategy& strategy) const
{
    const auto& list = strategies(op);
    for (size_t i = 0; i < list.size(); ++i)
        if (list[i] == strategy) return static_cast<int>(i);
    return -1;
}

const OpCost& CostModel::opCost(OpId op, int s, Recompute recompute) const
{
    return impl_->costsOf(op).cost.at(static_cast<size_t>(s))[static_cast<size_t>(recompute)];
}

namespace {

/// One op class's (memory, time) choices that some memory price makes cheapest: the lower
/// convex hull from the fastest choice (price 0) to the leanest (price without bound), memory
/// falling and time rising along it.
std::vector<std::pair<double, double>> priceHull(std::vector<std::pair<double, double>> points)
{
    std::sort(points.begin(), points.end());
    std::vector<std::pair<double, double>> hull; // memory ascending, time descending
    for (const auto& p : points) {
        if (!hull.empty() && p.second >= hull.back().second) continue; // no faster for its memory
        // Drop the last point while it lies on or above the chord from its predecessor to p.
        while (hull.size() >= 2) {
            const auto &a = hull[hull.size() - 2], &b = hull.back();
            if ((b.second - a.second) * (p.first - a.first) < (p.second - a.second) * (b.first - a.first)) break;
            hull.pop_back();
        }
        hull.push_back(p);
    }
    std::reverse(hull.begin(), hull.end()); // fastest first
    return hull;
}

} // namespace

namespace {

/// Ops that choose alike: per (op class, forced strategy or -1 for free), how many ops.
std::map<std::pair<int, int>, double> opsByChoice(const std::vector<int>& classOf, size_t classes,
                                                  const std::map<OpId, int>& forced)
{
    std::vector<double> free(classes, 0);
    for (int k : classOf) free[static_cast<size_t>(k)] += 1;
    std::map<std::pair<int, int>, double> count;
    for (const auto& [op, s] : forced) {
        const int k = classOf.at(static_cast<size_t>(op));
        free[static_cast<size_t>(k)] -= 1;
        count[{k, s}] += 1;
    }
    for (size_t k = 0; k < free.size(); ++k)
        if (free[k] > 0) count[{static_cast<int>(k), -1}] = free[k];
    return count;
}

/// Whether two models' settings differ at most in what ZeRO changes: the weights' model states
/// and their collectives, which are node costs (CostModel::Impl::weightTerms).
bool differOnlyInZero(CostSettings a, const CostSettings& b)
{
    a.zeroStage = b.zeroStage;
    a.zeroAcrossNodes = b.zeroAcrossNodes;
    a.reshardAfterForward = b.reshardAfterForward;
    return a == b;
}

} // namespace

CostModel::OpChoices CostModel::opChoices(const std::map<OpId, int>& forced) const
{
    const auto& im = *impl_;
    OpChoices out;
    out.structure = im.classes.get();
    for (const auto& [key, n] : opsByChoice(im.classOf, im.classes->size(), forced)) out.counts.emplace_back(key.first, key.second, n);
    return out;
}

double CostModel::nodeDifferenceFloor(const CostModel& from, double price, const std::map<OpId, int>& forced) const
{
    return nodeDifferenceFloor(from, price, opChoices(forced));
}

double CostModel::nodeDifferenceFloor(const CostModel& from, double price, const OpChoices& choices) const
{
    const auto& im = *impl_;
    const auto& other = *from.impl_;
    constexpr double kNone = -std::numeric_limits<double>::infinity();
    if (im.classes != other.classes || !differOnlyInZero(im.settings, other.settings)) return kNone;
    if (choices.structure != im.classes.get()) throw std::logic_error("nodeDifferenceFloor: op choices of another structure");
    auto priced = [price](const OpCost& c) { return c.seconds() + (price > 0 ? price * c.memoryBytes() : 0.0); };
    double total = 0;
    for (const auto& [k, only, n] : choices.counts) {
        const auto &mine = im.costs[static_cast<size_t>(k)]->cost, &theirs = other.costs[static_cast<size_t>(k)]->cost;
        double least = std::numeric_limits<double>::infinity();
        for (size_t s = 0; s < mine.size(); ++s) {
            if (only >= 0 && static_cast<size_t>(only) != s) continue;
            for (size_t r = 0; r < mine[s].size(); ++r) {
                const double here = priced(mine[s][r]), there = priced(theirs[s][r]);
                if (!(here < std::numeric_limits<double>::infinity())) continue; // never chosen here
                if (!(there < std::numeric_limits<double>::infinity())) return kNone; // `from` says nothing of it
                least = std::min(least, here - there);
            }
        }
        if (least < std::numeric_limits<double>::infinity()) total += n * least;
    }
    return total;
}

CostModel::Floor CostModel::floor(double limitBytes, const std::map<OpId, int>& forced) const
{
    return floor(limitBytes, opChoices(forced));
}

CostModel::Floor CostModel::floor(double limitBytes, const OpChoices& choices) const
{
    const auto& im = *impl_;
    if (choices.structure != im.classes.get()) throw std::logic_error("floor: op choices of another structure");
    // Ops that choose alike share one hull: each op class's free ops, and its ops forced to one
    // strategy (by strategy; made here, the free ones' kept by the class).
    std::vector<const std::vector<std::pair<double, double>>*> hulls;
    std::vector<std::vector<std::pair<double, double>>> forcedHulls;
    forcedHulls.reserve(choices.counts.size());
    std::vector<double> counts;
    Floor out;
    double seconds = 0, bytes = 0; // of the choices at the current price
    for (const auto& [k, only, n] : choices.counts) {
        const auto& costs = *im.costs[static_cast<size_t>(k)];
        if (only < 0) {
            hulls.push_back(&costs.hull);
        } else {
            std::vector<std::pair<double, double>> points;
            for (const auto& mode : costs.cost[static_cast<size_t>(only)]) points.emplace_back(mode.memoryBytes(), mode.seconds());
            forcedHulls.push_back(priceHull(std::move(points)));
            hulls.push_back(&forcedHulls.back());
        }
        counts.push_back(n);
        // A hull's steps grow steeper towards its least memory: its last is its steepest.
        if (const auto& hull = *hulls.back(); hull.size() > 1) {
            const auto &before = hull[hull.size() - 2], &last = hull.back();
            out.leastBytesPrice = std::max(out.leastBytesPrice, (last.second - before.second) / (before.first - last.first));
        }
        out.bytes += n * hulls.back()->back().first;
        seconds += n * hulls.back()->front().second;
        bytes += n * hulls.back()->front().first;
    }
    out.fastestSeconds = seconds;
    out.fastestBytes = bytes;
    // Weak duality over the node costs alone (edges cost time and no memory): at any price p,
    // the sum of each op's cheapest time + p * memory, less p * limit, is at most the step time
    // of every plan that fits. Concave in p; its maximum is where the chosen memory crosses the
    // limit, found by sweeping the prices at which a class moves along its hull.
    if (!(bytes > limitBytes)) {
        out.seconds = seconds;
        return out;
    }
    out.priced = true;
    if (out.bytes > limitBytes) {
        out.seconds = std::numeric_limits<double>::infinity();
        return out;
    }
    struct Move {
        double price;
        size_t cls, to;
    };
    std::vector<Move> moves;
    for (size_t k = 0; k < hulls.size(); ++k) {
        const auto& hull = *hulls[k];
        for (size_t j = 1; j < hull.size(); ++j)
            moves.push_back({(hull[j].second - hull[j - 1].second) / (hull[j - 1].first - hull[j].first), k, j});
    }
    std::sort(moves.begin(), moves.end(), [](const Move& a, const Move& b) { return a.price < b.price; });
    double best = seconds;
    for (const Move& m : moves) {
        if (const double bound = seconds + m.price * (bytes - limitBytes); bound > best) {
            best = bound;
            out.price = m.price;
        }
        const auto &from = (*hulls[m.cls])[m.to - 1], &to = (*hulls[m.cls])[m.to];
        seconds += counts[m.cls] * (to.second - from.second);
        bytes += counts[m.cls] * (to.first - from.first);
        if (!(bytes > limitBytes)) break;
    }
    out.seconds = best;
    return out;
}

const TensorSpec& CostModel::inputSpec(OpId op, int s, int input) const
{
    return impl_->cls(op).in.at(static_cast<size_t>(s)).at(static_cast<size_t>(input));
}

const TensorSpec& CostModel::outputSpec(OpId op, int s, int output) const
{
    return impl_->cls(op).out.at(static_cast<size_t>(s)).at(static_cast<size_t>(output));
}

EdgeCost CostModel::edgeCost(const TensorSpec* produced, OpId consumer, int input, int s) const
{
    if (!produced) return {};
    return edgeCost(edgePlan(*produced, consumer, input, s), *produced, consumer, input, s);
}

namespace {

/// The backward half of an edge's plan (CostModel::edgePlan): the gradient arrives laid out like
/// the consumer's input `to`, partial over `gradPartial` (the axes that split loops the input
/// lacks), and must reach the producer's layout summed. Several consumers of one tensor add
/// their gradients locally and reduce once: the first consumer (op-id order) pays the reduction;
/// later ones (`paysReduction` false) only change layout and leave their partial sums for it
/// (exact when the consumers share their partial axes, as q/k/v of one attention do).
std::vector<CollectiveCall> gradientPlan(const TensorSpec& produced, const TensorSpec& to, AxisMask gradPartial,
                                         bool paysReduction, const Tensor& t, const Mesh& mesh)
{
    TensorSpec grad = to;
    grad.partial = gradPartial;
    TensorSpec target = produced;
    target.partial = 0;
    if (!paysReduction) target.partial = grad.partial & ~target.splitAxes();
    return planReshard(grad, target, t.shape, dtypeBytes(t.dtype), mesh, Phase::Backward);
}

} // namespace

std::vector<CollectiveCall> CostModel::edgePlan(const TensorSpec& produced, OpId consumer, int input, int s) const
{
    const auto& im = *impl_;
    const auto& c = im.cls(consumer);
    const TensorId tid = im.graph.op(consumer).inputs.at(static_cast<size_t>(input));
    const auto& t = im.graph.tensor(tid);
    const auto& to = c.in.at(static_cast<size_t>(s)).at(static_cast<size_t>(input));
    std::vector<CollectiveCall> calls = planReshard(produced, to, t.shape, dtypeBytes(t.dtype), im.mesh, Phase::Forward);
    if (im.settings.training && isFloating(t.dtype)) {
        auto back = gradientPlan(produced, to, c.inGradPartial.at(static_cast<size_t>(s)).at(static_cast<size_t>(input)),
                                 im.paysGradientReduction(tid, consumer, input), t, im.mesh);
        calls.insert(calls.end(), back.begin(), back.end());
    }
    return calls;
}

std::string CostModel::edgeContentKey(OpId producer, int slot, OpId consumer, int input) const
{
    const auto& im = *impl_;
    const TensorId tid = im.graph.op(consumer).inputs.at(static_cast<size_t>(input));
    // The classes hold the shapes, dtypes, the flags edgeRepeat reads (batch, routed) and every
    // strategy's specs; the rest is the graph's: who pays the gradient's reduction, the matmuls
    // reading the tensor (--tp-overlap) and the graph's batch.
    KeyBuilder k;
    k << im.cls(producer).key << '#' << slot << '#' << im.cls(consumer).key << '#' << input << '#'
      << (im.paysGradientReduction(tid, consumer, input) ? 'p' : '-') << (im.settings.training ? 't' : '-')
      << im.matmulReaders[static_cast<size_t>(tid)] << '#' << im.graphBatch;
    return std::move(k.text);
}

std::vector<std::vector<CollectiveCall>> CostModel::edgePlans(std::span<const TensorSpec> produced, OpId consumer, int input,
                                                              int strategies) const
{
    const auto& im = *impl_;
    const auto& c = im.cls(consumer);
    const auto in = static_cast<size_t>(input);
    const TensorId tid = im.graph.op(consumer).inputs.at(in);
    const auto& t = im.graph.tensor(tid);
    const bool backward = im.settings.training && isFloating(t.dtype);
    const bool pays = backward && im.paysGradientReduction(tid, consumer, input);
    // edgePlan reads a strategy only through its layout of the input (the forward half) and
    // the partial sums of the input's gradient (the backward half): each half is planned once
    // per spec and distinct layout, or layout and partial sums, and shared by the strategies.
    std::map<TensorSpec, int> layoutIndex;
    std::map<std::pair<int, AxisMask>, int> gradientIndex;
    std::vector<int> layoutOf(static_cast<size_t>(strategies)), gradientOf(static_cast<size_t>(strategies));
    std::vector<const TensorSpec*> layouts;
    std::vector<std::pair<const TensorSpec*, AxisMask>> gradients;
    for (int s = 0; s < strategies; ++s) {
        const TensorSpec& to = c.in.at(static_cast<size_t>(s)).at(in);
        const auto [l, newLayout] = layoutIndex.try_emplace(to, static_cast<int>(layouts.size()));
        if (newLayout) layouts.push_back(&to);
        layoutOf[static_cast<size_t>(s)] = l->second;
        const AxisMask partial = backward ? c.inGradPartial.at(static_cast<size_t>(s)).at(in) : AxisMask{0};
        const auto [g, newGradient] = gradientIndex.try_emplace({l->second, partial}, static_cast<int>(gradients.size()));
        if (newGradient) gradients.push_back({&to, partial});
        gradientOf[static_cast<size_t>(s)] = g->second;
    }
    std::vector<std::vector<CollectiveCall>> plans;
    plans.reserve(produced.size() * static_cast<size_t>(strategies));
    std::vector<std::vector<CollectiveCall>> forward(layouts.size()), back(gradients.size());
    for (const TensorSpec& spec : produced) {
        for (size_t l = 0; l < layouts.size(); ++l)
            forward[l] = planReshard(spec, *layouts[l], t.shape, dtypeBytes(t.dtype), im.mesh, Phase::Forward);
        if (backward)
            for (size_t g = 0; g < gradients.size(); ++g)
                back[g] = gradientPlan(spec, *gradients[g].first, gradients[g].second, pays, t, im.mesh);
        for (int s = 0; s < strategies; ++s) {
            std::vector<CollectiveCall> calls = forward[static_cast<size_t>(layoutOf[static_cast<size_t>(s)])];
            if (backward) {
                const auto& b = back[static_cast<size_t>(gradientOf[static_cast<size_t>(s)])];
                calls.insert(calls.end(), b.begin(), b.end());
            }
            plans.push_back(std::move(calls));
        }
    }
    return plans;
}

EdgeRepeat CostModel::Impl::edgeRepeat(TensorId tid, const TensorSpec& to) const
{
    EdgeRepeat repeat;
    if (graphBatch > 0 && batch0[static_cast<size_t>(tid)]) {
        if (settings.microBatch > 0) {
            const double local = static_cast<double>(graphBatch) / batchSplits(routed[static_cast<size_t>(tid)], to);
            repeat.micro = std::max(1.0, std::ceil(local / static_cast<double>(settings.microBatch)));
        }
        repeat.pipelined = pipelinedFactor(settings, repeat.micro);
    }
    return repeat;
}

EdgeCost CostModel::edgeCost(std::vector<CollectiveCall> plan, const TensorSpec& produced, OpId consumer, int input, int s) const
{
    EdgeCost e = edgeSeconds(plan, produced, consumer, input, s);
    const auto& im = *impl_;
    const TensorId tid = im.graph.op(consumer).inputs.at(static_cast<size_t>(input));
    const EdgeRepeat repeat = im.edgeRepeat(tid, im.cls(consumer).in.at(static_cast<size_t>(s)).at(static_cast<size_t>(input)));
    if (repeat.scales())
        for (auto& call : plan) call.seconds = repeat.secondsOf(call, im.mesh);
    e.collectives = std::move(plan);
    return e;
}

EdgeCost CostModel::edgeSeconds(const std::vector<CollectiveCall>& plan, const TensorSpec& produced, OpId consumer, int input,
                                int s) const
{
    EdgeCost e;
    const auto& im = *impl_;
    const auto& c = im.cls(consumer);
    const TensorId tid = im.graph.op(consumer).inputs.at(static_cast<size_t>(input));
    const auto& to = c.in.at(static_cast<size_t>(s)).at(static_cast<size_t>(input));
    const EdgeRepeat repeat = im.edgeRepeat(tid, to);
    double fwd = 0, bwd = 0;
    for (const auto& call : plan) (call.phase == Phase::Forward ? fwd : bwd) += repeat.secondsOf(call, im.mesh);
    e.seconds = fwd + bwd;
    e.exposedSeconds = e.seconds;
    e.exposedForwardSeconds = fwd;
    // Megatron's asynchronous tensor-parallel backward: the input gradient of a matmul is
    // reduced while the weight gradients of the readers sharing it are computed (one fused
    // QKV matmul in Megatron: its readers here).
    if (im.settings.overlapTensorParallelBackward && bwd > 0 && c.matmulLike && im.overlapChunksOff()) {
        const double wgrad = im.costsOf(consumer).weightGradientSeconds[static_cast<size_t>(s)] * im.matmulReaders[static_cast<size_t>(tid)];
        e.exposedSeconds = fwd + exposedAfterOverlap(bwd, wgrad);
    }
    const int k = im.settings.overlapChunks;
    if (k > 1 && e.seconds > 0) {
        // Chunked overlap (ATP): the matmul next to the collective runs in k chunks and chunk
        // i's communication hides under chunk i+1's compute, so only the first (or last)
        // chunk's share and whatever exceeds the compute stay exposed:
        //   exposed = comm/k + max(0, (comm - compute)(k-1)/k).
        // The matmul is the consumer if it is one, else the producer under the strategy that
        // yields `produced`.
        double pf = -1, pb = -1;
        if (c.matmulLike) {
            pf = im.costsOf(consumer).forwardSeconds[static_cast<size_t>(s)];
            pb = im.costsOf(consumer).backwardSeconds[static_cast<size_t>(s)];
        } else if (const OpId p = im.producer[static_cast<size_t>(tid)]; p >= 0 && im.cls(p).matmulLike) {
            const auto& pc = im.cls(p);
            const auto slot = static_cast<size_t>(im.producerSlot[static_cast<size_t>(tid)]);
            for (size_t ps = 0; ps < pc.strategies.size(); ++ps)
                if (pc.out[ps][slot] == produced) {
                    pf = im.costsOf(p).forwardSeconds[ps];
                    pb = im.costsOf(p).backwardSeconds[ps];
                    break;
                }
        }
        if (pf >= 0) {
            auto exposed = [&](double comm, double compute) { return comm / k + std::max(0.0, (comm - compute) * (k - 1) / k); };
            e.exposedForwardSeconds = exposed(fwd, pf);
            e.exposedSeconds = e.exposedForwardSeconds + exposed(bwd, pb);
        }
    }
    return e;
}

CostModel::Charge CostModel::chargeOf(OpId op, int s, Recompute r, const std::vector<int>& strategyOfOp) const
{
    EdgeMemo unused;
    return chargeOf(op, s, r, strategyOfOp, {}, unused);
}

CostModel::Charge CostModel::chargeOf(OpId op, int s, Recompute r, const std::vector<int>& strategyOfOp,
                                      const std::vector<OpId>& canonicalOp, EdgeMemo& memo) const
{
    const Op& o = impl_->graph.op(op);
    Charge c;
    c.node = &opCost(op, s, r);
    c.recomputesForward = checkpointsBlockInput(r) && impl_->settings.training;
    for (size_t i = 0; i < o.inputs.size(); ++i) {
        const TensorId t = o.inputs[i];
        const OpId p = impl_->producer[static_cast<size_t>(t)];
        if (p < 0) continue;
        const int slot = impl_->producerSlot[static_cast<size_t>(t)], sp = strategyOfOp[static_cast<size_t>(p)];
        auto cost = [&] { return edgeCost(&outputSpec(p, sp, slot), op, static_cast<int>(i), s); };
        if (canonicalOp.empty()) {
            c.edges.emplace_back(p, cost());
            continue;
        }
        const std::array<int, 6> key{canonicalOp[static_cast<size_t>(op)], static_cast<int>(i), s, canonicalOp[static_cast<size_t>(p)], slot, sp};
        auto known = memo.find(key);
        if (known == memo.end()) known = memo.emplace(key, cost()).first;
        c.edges.emplace_back(p, known->second);
    }
    return c;
}

double CostModel::Charge::stepSeconds() const
{
    double sum = node->seconds();
    for (const auto& [p, e] : edges) {
        sum += e.exposedSeconds;
        if (recomputesForward) sum += e.exposedForwardSeconds;
    }
    return sum;
}

double CostModel::Charge::commSeconds() const
{
    double sum = node->commSeconds;
    for (const auto& [p, e] : edges) sum += e.seconds + (recomputesForward ? e.exposedForwardSeconds : 0.0);
    return sum;
}

Breakdown CostModel::evaluate(const std::vector<int>& strategyOfOp, const std::vector<Recompute>& recomputeOfOp,
                              const std::vector<double>& extraBytesOfOp, const std::vector<OpId>& canonicalOp) const
{
    const auto& g = impl_->graph;
    if (strategyOfOp.size() != g.ops.size())
        throw InputError("plan: " + std::to_string(strategyOfOp.size()) + " strategies for " + std::to_string(g.ops.size()) +
                         " ops");
    if (!recomputeOfOp.empty() && recomputeOfOp.size() != g.ops.size())
        throw InputError("plan: recompute modes must be given for every op or none");
    if (!extraBytesOfOp.empty() && extraBytesOfOp.size() != g.ops.size())
        throw InputError("plan: per-op extra bytes must be given for every op or none");
    if (!canonicalOp.empty() && canonicalOp.size() != g.ops.size())
        throw InputError("plan: canonical ops must be given for every op or none");
    if (extraBytesOfOp.empty() && std::any_of(recomputeOfOp.begin(), recomputeOfOp.end(), checkpointsBlockInput))
        throw InputError("plan: full and op-level recomputation keep each block's inputs; cost it with evaluatePlan");
    for (const auto& op : g.ops) {
        const int s = strategyOfOp[static_cast<size_t>(op.id)];
        if (s < 0 || s >= static_cast<int>(strategies(op.id).size()))
            throw InputError("plan: op '" + op.name + "' has no strategy " + std::to_string(s));
    }
    Breakdown b;
    b.capacityBytes = impl_->hw.hbmBytes;
    EdgeMemo edges;
    // One running sum per figure, in op-id order: the op's node cost, then the edges into its
    // inputs in input order.
    for (const auto& op : g.ops) {
        const int s = strategyOfOp[static_cast<size_t>(op.id)];
        const Recompute r = recomputeOfOp.empty() ? Recompute::None : recomputeOfOp[static_cast<size_t>(op.id)];
        const Charge c = chargeOf(op.id, s, r, strategyOfOp, canonicalOp, edges);
        const OpCost& oc = *c.node;
        const double extra = extraBytesOfOp.empty() ? 0.0 : extraBytesOfOp[static_cast<size_t>(op.id)];
        double forward = oc.forwardSeconds;
        for (const auto& [p, e] : c.edges) forward += e.exposedForwardSeconds;
        b.ops.push_back({op.id, s, oc.computeSeconds, forward, c.commSeconds(), c.stepSeconds(), oc.optimizerSeconds,
                         oc.memoryBytes() + extra, oc.paramBytes, oc.gradBytes, oc.optimizerBytes, oc.activationBytes + extra});
        b.stepSeconds += oc.seconds();
        b.computeSeconds += oc.computeSeconds;
        b.forwardSeconds += forward;
        b.optimizerSeconds += oc.optimizerSeconds;
        b.bufferCopySeconds += oc.bufferCopySeconds;
        b.commSeconds += oc.commSeconds;
        b.exposedCommSeconds += oc.commSeconds - oc.hiddenCommSeconds;
        b.hiddenCommSeconds += oc.hiddenCommSeconds;
        b.paramBytes += oc.paramBytes;
        b.gradBytes += oc.gradBytes;
        b.optimizerBytes += oc.optimizerBytes;
        b.activationBytes += oc.activationBytes + extra;
        b.perDeviceBytes += oc.memoryBytes() + extra;
        for (const auto& call : oc.collectives) {
            b.collectives.push_back({call.kind, call.axis, call.bytes, call.phase, op.id, 1, call.seconds});
            b.commByKind[call.kind] += call.seconds;
        }
        for (const auto& [p, e] : c.edges) {
            const double again = c.recomputesForward ? e.exposedForwardSeconds : 0.0;
            b.stepSeconds += e.exposedSeconds;
            if (again > 0) b.stepSeconds += again;
            b.commSeconds += e.seconds + again;
            b.exposedCommSeconds += e.exposedSeconds + again;
            b.hiddenCommSeconds += e.seconds - e.exposedSeconds;
            for (const auto& call : e.collectives) {
                b.collectives.push_back({call.kind, call.axis, call.bytes, call.phase, p, 1, call.seconds});
                b.commByKind[call.kind] += call.seconds;
            }
        }
    }
    std::stable_sort(b.collectives.begin(), b.collectives.end(),
                     [](const CollectiveRecord& x, const CollectiveRecord& y) { return x.at < y.at; });
    b.fits = b.perDeviceBytes <= b.capacityBytes;
    return b;
}

} // namespace tp
