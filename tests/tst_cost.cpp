// The cost model against hand arithmetic and published figures: ring collective formulas,
// resharding plans, Korthikanti et al. (2022) activation memory, ZeRO's 16 bytes per
// parameter, Megatron-LM's 4 all-reduces per layer, and the baselines on every built-in model.
#include <QtTest>

#include <functional>
#include <set>

#include "cost/baselines.h"
#include "cost/collectives.h"
#include "cost/cost_model.h"
#include "cost/kernels.h"
#include "fold/fold.h"
#include "import/catalog.h"
#include "models/models.h"
#include "search/search.h"
#include "sharding/strategy.h"
#include "util/error.h"

using namespace tp;

Q_DECLARE_METATYPE(CollectiveKind)

namespace {

// A mesh with round numbers: x = 2 devices at 10 GB/s, y = 4 devices at 100 GB/s, no latency.
/// A mesh axis of `size` devices over a link of this bandwidth and latency (no curves).
MeshAxis axisOf(const std::string& name, int size, double bandwidth, double latency, bool crossesNodes)
{
    MeshAxis axis;
    axis.name = name;
    axis.size = size;
    axis.link.bandwidth = bandwidth;
    axis.link.latency = latency;
    axis.crossesNodes = crossesNodes;
    return axis;
}

Mesh handMesh()
{
    Mesh m;
    m.axes.push_back(axisOf("x", 2, 10e9, 0, true));
    m.axes.push_back(axisOf("y", 4, 100e9, 0, false));
    return m;
}

std::string planText(const std::vector<CollectiveCall>& calls, const Mesh& m)
{
    static const char* kAbbrev[] = {"AR", "AG", "RS", "A2A"};
    std::string s;
    for (const auto& c : calls)
        s += (s.empty() ? "" : "; ") + std::string(kAbbrev[static_cast<int>(c.kind)]) + " " +
             m.axes[static_cast<size_t>(c.axis)].name + " " + std::to_string(static_cast<long long>(c.bytes));
    return s;
}

bool near(double a, double b, double rel) { return std::abs(a - b) <= rel * std::abs(b); }

// The A100 preset without its shape model: every matmul at the flat 86.9% of peak and HBM at
// its full 2039 GB/s, for the tests whose hand arithmetic is about something else.
Hardware flatA100()
{
    Hardware hw = loadHardware("a100-80g-dgx");
    hw.gemm = {};
    hw.hbmEfficiency = 1;
    return hw;
}

/// One layer of GPT-2 small at this batch: the smallest transformer with every op kind's edges.
LoadedModel oneLayerGpt2(std::int64_t batch)
{
    ModelOptions o;
    o.batch = batch;
    o.overrides = {"layers=1"};
    return loadModel("gpt2", o);
}

/// One edge of a graph: the producer's output slot read as the consumer's input.
struct GraphEdge {
    OpId producer = -1;
    int slot = 0;
    OpId consumer = -1;
    int input = 0;
};

std::vector<GraphEdge> graphEdges(const Graph& g)
{
    std::vector<OpId> producerOf(g.tensors.size(), -1);
    for (const auto& op : g.ops)
        for (TensorId t : op.outputs) producerOf[static_cast<size_t>(t)] = op.id;
    std::vector<GraphEdge> edges;
    for (const auto& op : g.ops)
        for (size_t i = 0; i < op.inputs.size(); ++i) {
            const OpId p = producerOf[static_cast<size_t>(op.inputs[i])];
            if (p < 0) continue;
            const auto& outs = g.op(p).outputs;
            const int slot = static_cast<int>(std::find(outs.begin(), outs.end(), op.inputs[i]) - outs.begin());
            edges.push_back({p, slot, op.id, static_cast<int>(i)});
        }
    return edges;
}

/// Two plans of an edge's collectives agree call for call (and, where asked, to the second).
void compareCollectivePlans(const std::vector<CollectiveCall>& got, const std::vector<CollectiveCall>& want, bool seconds)
{
    QCOMPARE(got.size(), want.size());
    for (size_t k = 0; k < got.size(); ++k) {
        QCOMPARE(got[k].kind, want[k].kind);
        QCOMPARE(got[k].axis, want[k].axis);
        QCOMPARE(got[k].bytes, want[k].bytes);
        QCOMPARE(got[k].phase, want[k].phase);
        if (seconds) QCOMPARE(got[k].seconds, want[k].seconds);
    }
}

LoadedModel gpt3(int layers, std::int64_t batch)
{
    ModelOptions o;
    if (layers > 0) o.overrides = {"layers=" + std::to_string(layers)};
    o.batch = batch;
    return loadModel("gpt3-175b", o);
}

Graph gpt22b(std::int64_t layers)
{
    // Korthikanti et al. Table 3's 22B model: h = 6144, a = 64, s = 2048 (48 layers; fewer
    // here since only one layer is measured), micro-batch 4.
    ModelConfig c = {{"family", "gpt"}, {"name", "gpt-22b"}, {"layers", layers}, {"hidden", 6144},
                     {"heads", 64},     {"vocab", 51200},    {"seq", 2048},      {"batch", 4}};
    return buildModel(c);
}

// Activation bytes kept by the ops of one transformer layer (layers.1/: a middle layer; the
// residual stream it keeps for the next layer's norm stands for the one the previous layer
// keeps for it).
double layerActivation(const CostModel& m, const std::vector<int>& plan, Recompute r)
{
    double sum = 0;
    for (const auto& op : m.graph().ops)
        if (op.name.rfind("layers.1/", 0) == 0) sum += m.opCost(op.id, plan[static_cast<size_t>(op.id)], r).activationBytes;
    return sum;
}

/// One layer of LLaMA-2 7B, batch 8, on one A100, costed with fused kernels (the default) and
/// without (eager PyTorch).
struct EagerAndFused {
    LoadedModel lm = load();
    Hardware hw = loadHardware("a100-80g-dgx");
    CostModel fused{lm.graph, parseMesh("1", hw), hw};
    CostModel unfused{lm.graph, parseMesh("1", hw), hw, eagerSettings()};

    static LoadedModel load()
    {
        ModelOptions o;
        o.batch = 8;
        o.overrides = {"layers=1"};
        return loadModel("llama2-7b", o);
    }
    static CostSettings eagerSettings()
    {
        CostSettings eager;
        eager.fusedKernels = false;
        return eager;
    }
    OpId op(const std::string& name) const
    {
        for (const auto& o : lm.graph.ops)
            if (o.name == name) return o.id;
        return -1;
    }
};

} // namespace

class TestCost : public QObject {
    Q_OBJECT
private slots:
    // A cost model derived from another's analysis of the graph (the planner's combinations of
    // micro-batch and ZeRO stage) costs every op and candidate exactly as one built afresh.
    void derivedModelEqualsFreshOne_data()
    {
        QTest::addColumn<int>("zero");
        QTest::addColumn<qint64>("microBatch");
        QTest::addColumn<double>("gradBytes");
        QTest::newRow("micro-batch 2") << 0 << qint64(2) << 2.0;
        QTest::newRow("ZeRO 3") << 3 << qint64(0) << 2.0;
        QTest::newRow("ZeRO 1, micro-batch 1, fp32 grads") << 1 << qint64(1) << 4.0;
    }

    void derivedModelEqualsFreshOne()
    {
        QFETCH(int, zero);
        QFETCH(qint64, microBatch);
        QFETCH(double, gradBytes);
        ModelOptions o;
        o.batch = 8;
        o.overrides = {"layers=2"};
        const LoadedModel lm = loadModel("llama2-7b", o);
        const Hardware hw = loadHardware("a100-80g-dgx");
        const Mesh mesh = parseMesh("2x4", hw);
        const CostModel base(lm.graph, mesh, hw);
        CostSettings settings;
        settings.zeroStage = zero;
        settings.microBatch = microBatch;
        settings.gradBytesPerParam = gradBytes;
        const Graph copy = lm.graph;
        const CostModel derived(base, copy, settings), fresh(lm.graph, mesh, hw, settings);
        bool anyDiffers = false; // from the base: the settings change something
        for (const auto& op : lm.graph.ops) {
            QCOMPARE(derived.strategies(op.id).size(), fresh.strategies(op.id).size());
            for (int st = 0; st < static_cast<int>(fresh.strategies(op.id).size()); ++st)
                for (Recompute r : {Recompute::None, Recompute::Selective, Recompute::Full, Recompute::Op}) {
                    const OpCost& a = derived.opCost(op.id, st, r);
                    const OpCost& b = fresh.opCost(op.id, st, r);
                    QCOMPARE(a.seconds(), b.seconds());
                    QCOMPARE(a.memoryBytes(), b.memoryBytes());
                    QCOMPARE(a.collectives.size(), b.collectives.size());
                    anyDiffers = anyDiffers || a.seconds() != base.opCost(op.id, st, r).seconds() ||
                                 a.memoryBytes() != base.opCost(op.id, st, r).memoryBytes();
                }
        }
        QVERIFY(anyDiffers);
        CostSettings structural = settings;
        structural.fusedKernels = !settings.fusedKernels;
        QVERIFY_THROWS_EXCEPTION(std::logic_error, CostModel(base, copy, structural));
    }

    // Models of two graphs given one ClassCostCache (a pipeline's stage graphs) cost every op as
    // a model without it does, and take the first graph's class costs only where nothing they
    // depend on differs: the settings (but the reader groups), the mesh, the hardware, the
    // graph's batch (whose classes' shapes differ as well, so that row checks the costs more
    // than the key). LLaMA-2 7B with 2 layers (20 classes), then each row's second graph and
    // figures: none of its 20 classes found (40 held), or all (20).
    void classCostsSharedAcrossGraphs_data()
    {
        QTest::addColumn<int>("layers");
        QTest::addColumn<qint64>("batch");
        QTest::addColumn<QString>("mesh");
        QTest::addColumn<qint64>("microBatch");
        QTest::addColumn<int>("zero");
        QTest::addColumn<double>("bubble");
        QTest::addColumn<bool>("shares"); ///< every class of the second graph found in the cache, or none
        QTest::newRow("another graph of the same layers") << 2 << qint64(8) << "2x4" << qint64(0) << 0 << 0.0 << true;
        QTest::newRow("a micro-batch") << 2 << qint64(8) << "2x4" << qint64(2) << 0 << 0.0 << false;
        QTest::newRow("ZeRO 3") << 2 << qint64(8) << "2x4" << qint64(0) << 3 << 0.0 << false;
        QTest::newRow("a pipeline's bubble") << 2 << qint64(8) << "2x4" << qint64(0) << 0 << 0.5 << false;
        QTest::newRow("another mesh") << 2 << qint64(8) << "4x2" << qint64(0) << 0 << 0.0 << false;
        QTest::newRow("another batch") << 2 << qint64(16) << "2x4" << qint64(0) << 0 << 0.0 << false;
    }

    void classCostsSharedAcrossGraphs()
    {
        QFETCH(int, layers);
        QFETCH(qint64, batch);
        QFETCH(QString, mesh);
        QFETCH(qint64, microBatch);
        QFETCH(int, zero);
        QFETCH(double, bubble);
        QFETCH(bool, shares);
        auto llama = [](int n, std::int64_t b) {
            ModelOptions o;
            o.batch = b;
            o.overrides = {"layers=" + std::to_string(n)};
            return loadModel("llama2-7b", o);
        };
        const LoadedModel first = llama(2, 8), second = llama(layers, batch);
        const Hardware hw = loadHardware("a100-80g-dgx");
        const CostModel firstBase(first.graph, parseMesh("2x4", hw), hw);
        const CostModel secondBase(second.graph, parseMesh(mesh.toStdString(), hw), hw);
        const auto cache = makeClassCostCache();
        const CostModel firstShared(firstBase, first.graph, CostSettings{}, cache);
        const std::size_t afterFirst = classCostsHeld(*cache);
        QVERIFY(afterFirst > 0);
        CostSettings settings;
        settings.microBatch = microBatch;
        settings.zeroStage = zero;
        settings.pipelineBubble = bubble;
        settings.pipelineStages = bubble > 0 ? 2 : 1;
        const CostModel shared(secondBase, second.graph, settings, cache), alone(secondBase, second.graph, settings);
        for (const auto& op : second.graph.ops)
            for (int st = 0; st < static_cast<int>(alone.strategies(op.id).size()); ++st)
                for (Recompute r : {Recompute::None, Recompute::Selective, Recompute::Full, Recompute::Op}) {
                    const OpCost& a = shared.opCost(op.id, st, r);
                    const OpCost& b = alone.opCost(op.id, st, r);
                    QCOMPARE(a.seconds(), b.seconds());
                    QCOMPARE(a.memoryBytes(), b.memoryBytes());
                    QCOMPARE(a.collectives.size(), b.collectives.size());
                }
        QCOMPARE(classCostsHeld(*cache), shares ? afterFirst : 2 * afterFirst);
    }

    // Op-level recomputation (torchtitan's policy): of a LLaMA layer's seven weight matmuls in
    // order (q, k, v, out, gate, up, down) the first, third, fifth and seventh keep their outputs
    // and so does the FlashAttention kernel (its closing contraction, context: 8 * 32 * 4096 * 128
    // * 2 B); the other ops keep nothing and pay their forward again; the rest of the
    // FlashAttention core keeps what it keeps in any mode. llama2-7b, batch 8, seq 4096 on one device: q, v and
    // down keep 8 * 4096 * 4096 * 2 B = 268435456 B each, gate 8 * 4096 * 11008 * 2 B = 721420288 B.
    void opLevelRecomputeKeepsEveryOtherMatmul()
    {
        ModelOptions o;
        o.batch = 8;
        o.overrides = {"layers=2"};
        const LoadedModel lm = loadModel("llama2-7b", o);
        const Hardware hw = loadHardware("a100-80g-dgx");
        CostSettings settings;
        settings.flashAttention = true;
        settings.readerGroupOfOp = readerGroupsOf(foldGraph(lm.graph)); // as the planner costs it: per block
        const CostModel m(lm.graph, parseMesh("1", hw), hw, settings);
        const std::map<std::string, double> keptBytes{{"layers.1/attn/q", 268435456.0},
                                                      {"layers.1/attn/v", 268435456.0},
                                                      {"layers.1/mlp/gate", 721420288.0},
                                                      {"layers.1/mlp/down", 268435456.0},
                                                      {"layers.1/attn/context", 268435456.0}};
        int kept = 0, recomputed = 0;
        for (const auto& op : lm.graph.ops) {
            if (op.name.rfind("layers.1/", 0) != 0) continue;
            const OpCost &none = m.opCost(op.id, 0, Recompute::None), &sel = m.opCost(op.id, 0, Recompute::Selective),
                         &opl = m.opCost(op.id, 0, Recompute::Op);
            const auto it = keptBytes.find(op.name);
            const bool flashCore = op.name == "layers.1/attn/scores" || op.name == "layers.1/attn/softmax";
            if (it != keptBytes.end()) {
                ++kept;
                QCOMPARE(opl.activationBytes, it->second);
                QCOMPARE(opl.computeSeconds, none.computeSeconds);
            } else if (flashCore) {
                QCOMPARE(opl.activationBytes, sel.activationBytes);
                QCOMPARE(opl.computeSeconds, none.computeSeconds);
            } else {
                ++recomputed;
                QCOMPARE(opl.activationBytes, 0.0);
                QCOMPARE(opl.computeSeconds, none.computeSeconds + none.forwardSeconds);
            }
        }
        QCOMPARE(kept, 5);
        QVERIFY(recomputed >= 3 + 2 + 2 + 2); // k, out, up; two norms, two residual adds; silu, mul
    }

    // Eager RMSNorm (no fused kernels): the composite's passes, 36 bytes per element forward and
    // 60 backward at the streaming rate, 6 bytes kept (core/graph/opkinds.cpp); fused it is one
    // kernel each way. llama2-7b, batch 8: 8 * 4096 * 4096 = 134217728 elements.
    void eagerRmsNormStreamsItsPasses()
    {
        const EagerAndFused m;
        const CostModel &fused = m.fused, &unfused = m.unfused;
        const Hardware& hw = m.hw;
        const OpId norm = m.op("layers.0/mlp_norm");
        QVERIFY(norm >= 0);
        const double elems = 134217728.0, rate = hw.hbmBandwidth * hw.hbmEfficiency;
        const OpCost& e = unfused.opCost(norm, 0, Recompute::None);
        QVERIFY(std::abs(e.forwardSeconds - elems * 36 / rate) <= 1e-9 * e.forwardSeconds);
        // (computeSeconds also holds the optimizer's step over the norm's own 4096 weights.)
        QVERIFY(std::abs(e.computeSeconds - e.optimizerSeconds - elems * (36 + 60) / rate) <= 1e-9 * e.computeSeconds);
        // Its own 6 bytes, and its bf16 output (2) that the MLP's first matmuls keep; fused, the
        // output alone (its bf16 input, which it keeps then, is counted at the input's producer).
        QCOMPARE(e.activationBytes, elems * (6 + 2));
        QCOMPARE(fused.opCost(norm, 0, Recompute::None).activationBytes, elems * 2);
        QVERIFY(fused.opCost(norm, 0, Recompute::None).computeSeconds < e.computeSeconds / 5);
    }

    // Rotary embeddings of LLaMA-2 7B's q (batch 8, 32 heads, seq 4096, head dim 128: 134217728
    // elements): eager, 20 bytes per element each way (core/graph/opkinds.cpp); fused, one
    // kernel that reads q (2 bytes) and the fp32 angle table (4096 x 128 x 4 = 2097152 B) and
    // writes q (2), and a backward that reads the gradient (2), writes q's (2) and the table's.
    // Neither keeps anything of its own; its bf16 output (2 bytes) is what the score matmul keeps
    // for backward (without FlashAttention), charged here at its producer. Without rotary the op
    // is gone.
    void rotaryStreamsQAndK()
    {
        const EagerAndFused m;
        const CostModel &fused = m.fused, &unfused = m.unfused;
        const Hardware& hw = m.hw;
        const OpId q = m.op("layers.0/attn/q_rotary"), k = m.op("layers.0/attn/k_rotary");
        QVERIFY(q >= 0 && k >= 0);
        QCOMPARE(m.lm.graph.op(q).einsum, std::string("bnsd,sd->bnsd"));
        const double elems = 134217728.0, table = 2097152.0, rate = hw.hbmBandwidth * hw.hbmEfficiency;
        const OpCost& e = unfused.opCost(q, 0, Recompute::None);
        QVERIFY(std::abs(e.forwardSeconds - elems * 20 / rate) <= 1e-9 * e.forwardSeconds);
        QVERIFY(std::abs(e.computeSeconds - elems * 40 / rate) <= 1e-9 * e.computeSeconds);
        const OpCost& f = fused.opCost(q, 0, Recompute::None);
        QVERIFY(std::abs(f.forwardSeconds - (elems * 4 + table) / rate) <= 1e-9 * f.forwardSeconds);
        QVERIFY(std::abs(f.computeSeconds - 2 * (elems * 4 + table) / rate) <= 1e-9 * f.computeSeconds);
        QCOMPARE(e.activationBytes, elems * 2);
        QCOMPARE(f.activationBytes, elems * 2);
        QCOMPARE(unfused.opCost(q, 0, Recompute::Full).activationBytes, 0.0);
        QCOMPARE(unfused.opCost(k, 0, Recompute::None).computeSeconds, e.computeSeconds); // 32 kv heads: k as q
        ModelOptions o;
        o.overrides = {"layers=1", "rotary=false"};
        for (const auto& op : loadModel("llama2-7b", o).graph.ops) QVERIFY(op.kind != OpKind::Rotary);
    }

    // An activation's collectives are paid once per micro-batch: gpt2 (1 layer, batch 8) on a
    // 4-device axis of 100 GB/s and 10 us latency, the MLP's down projection split along its
    // contraction (output partial) feeding its replicated reader (the dropout before the residual
    // add). As one micro-batch it
    // all-reduces the whole output once; as 4 micro-batches of 2, 4 times a quarter: the same
    // bytes, three latencies more (collectiveSeconds' ring: 2(g-1) steps of 10 us each).
    void activationCollectivesRunPerMicroBatch()
    {
        const LoadedModel lm = oneLayerGpt2(8);
        const Hardware hw = flatA100();
        Mesh mesh;
        mesh.axes.push_back(axisOf("x", 4, 100e9, 10e-6, false));
        CostSettings micro2;
        micro2.microBatch = 2;
        const CostModel whole(lm.graph, mesh, hw), split(lm.graph, mesh, hw, micro2);
        OpId down = -1, add = -1;
        for (const auto& op : lm.graph.ops)
            if (op.name == "layers.0/mlp/fc2") down = op.id;
        QVERIFY(down >= 0);
        for (const auto& op : lm.graph.ops)
            if (std::find(op.inputs.begin(), op.inputs.end(), lm.graph.op(down).outputs[0]) != op.inputs.end()) add = op.id;
        QVERIFY(add >= 0);
        int partial = -1;
        for (size_t s = 0; s < whole.strategies(down).size(); ++s)
            if (whole.outputSpec(down, static_cast<int>(s), 0).partial != 0) partial = static_cast<int>(s);
        QVERIFY(partial >= 0);
        const TensorSpec produced = whole.outputSpec(down, partial, 0);
        int input = -1;
        for (size_t i = 0; i < lm.graph.op(add).inputs.size(); ++i)
            if (lm.graph.op(add).inputs[i] == lm.graph.op(down).outputs[0]) input = static_cast<int>(i);
        QVERIFY(input >= 0);
        const EdgeCost one = whole.edgeCost(&produced, add, input, 0), four = split.edgeCost(&produced, add, input, 0);
        QCOMPARE(one.collectives.size(), size_t{1});
        QCOMPARE(four.collectives.size(), size_t{1});
        const CollectiveCall& c = one.collectives[0];
        QCOMPARE(c.kind, CollectiveKind::AllReduce);
        QCOMPARE(four.collectives[0].bytes, c.bytes);
        QVERIFY(std::abs(four.seconds - 4 * collectiveSeconds(c.kind, c.bytes / 4, mesh.axes[0])) <= 1e-12 * four.seconds);
        QVERIFY(std::abs(four.seconds - one.seconds - 3 * 2 * 3 * 10e-6) <= 1e-9 * four.seconds);
    }

    // The planner plans each edge's collectives once for all its combinations
    // (SharedSearchCaches::edgePlans): that holds only if a model derived from the same structure
    // under other settings (micro-batch, ZeRO stage, overlap) plans every edge alike and, timing
    // that plan, costs the edge exactly as it would on its own; its edge tables read
    // edgeSeconds, which must give edgeCost's times to the bit without the collectives.
    void edgePlansAreSharedAcrossSettings()
    {
        const LoadedModel lm = oneLayerGpt2(16);
        const Hardware hw = loadHardware("a100-80g-dgx");
        const Mesh mesh = parseMesh("2x8", hw);
        const CostModel base(lm.graph, mesh, hw);
        CostSettings micro2, micro16;
        micro2.microBatch = 2;
        micro2.zeroStage = 3;
        micro16.microBatch = 16;
        micro16.zeroStage = 1;
        CostSettings overlapped = micro2;
        overlapped.overlapChunks = 2;
        CostSettings tensorOverlap = micro2;
        tensorOverlap.overlapTensorParallelBackward = true;
        const CostModel twoAtStage3(base, lm.graph, micro2), sixteen(base, lm.graph, micro16),
            chunked(base, lm.graph, overlapped), asyncBackward(base, lm.graph, tensorOverlap);
        int compared = 0, timedDifferently = 0, overlapsSeen = 0;
        for (const GraphEdge& e : graphEdges(lm.graph)) {
            const OpId p = e.producer;
            const int slot = e.slot, i = e.input;
            const auto& op = lm.graph.op(e.consumer);
            const int np = static_cast<int>(base.strategies(p).size()), nc = static_cast<int>(base.strategies(op.id).size());
            for (int ps = 0; ps < np; ps += 5)
                for (int c = 0; c < nc; c += 3) {
                    const TensorSpec& produced = base.outputSpec(p, ps, slot);
                    const auto plan = base.edgePlan(produced, op.id, i, c);
                    for (const CostModel* m : {&twoAtStage3, &sixteen, &chunked, &asyncBackward}) {
                        compareCollectivePlans(m->edgePlan(produced, op.id, i, c), plan, false);
                        if (QTest::currentTestFailed()) return;
                        const EdgeCost shared = m->edgeCost(plan, produced, op.id, i, c);
                        const EdgeCost alone = m->edgeCost(&produced, op.id, i, c);
                        QCOMPARE(shared.exposedSeconds, alone.exposedSeconds);
                        QCOMPARE(shared.exposedForwardSeconds, alone.exposedForwardSeconds);
                        const EdgeCost times = m->edgeSeconds(plan, produced, op.id, i, c);
                        QCOMPARE(times.seconds, alone.seconds);
                        QCOMPARE(times.exposedSeconds, alone.exposedSeconds);
                        QCOMPARE(times.exposedForwardSeconds, alone.exposedForwardSeconds);
                        QVERIFY(times.collectives.empty());
                        if (m != &twoAtStage3 && m != &sixteen && times.exposedSeconds != times.seconds) ++overlapsSeen;
                        if (m == &twoAtStage3 && !plan.empty() && shared.seconds != base.edgeCost(&produced, op.id, i, c).seconds)
                            ++timedDifferently;
                        ++compared;
                    }
                }
        }
        QVERIFY(compared > 1000);
        // The micro-batch does change the timing (a consumer that splits the batch of 16 fewer
        // than 8 ways holds more than 2 samples per device, so its edges run in several
        // micro-batches): what is shared is the plan, not the seconds.
        QVERIFY(timedDifferently > 0);
        QVERIFY(overlapsSeen > 0); // the overlap paths were taken
    }

    // CostModel::edgePlans plans each distinct input layout (and, in training, gradient partial
    // sums) once and shares it among the consumer strategies that read the input alike: every
    // plan must equal edgePlan's for that one strategy, collective for collective, on a mesh of
    // three axes (many strategies per layout), training and inference, over every edge of a
    // GPT-2 layer (the first consumer of a tensor pays its gradient reduction, later ones not).
    void edgePlansEqualEdgePlan_data()
    {
        QTest::addColumn<bool>("training");
        QTest::newRow("training") << true;
        QTest::newRow("inference") << false;
    }
    void edgePlansEqualEdgePlan()
    {
        QFETCH(bool, training);
        const LoadedModel lm = oneLayerGpt2(8);
        const Hardware hw = loadHardware("a100-80g-dgx");
        CostSettings settings;
        settings.training = training;
        const CostModel model(lm.graph, parseMesh("2x2x2", hw), hw, settings);
        size_t compared = 0, shared = 0;
        for (const GraphEdge& e : graphEdges(lm.graph)) {
            const OpId p = e.producer;
            const int slot = e.slot, i = e.input;
            const auto& op = lm.graph.op(e.consumer);
            std::vector<TensorSpec> specs;
            for (int ps = 0; ps < static_cast<int>(model.strategies(p).size()); ps += 7)
                specs.push_back(model.outputSpec(p, ps, slot));
            const int nc = static_cast<int>(model.strategies(op.id).size());
            const auto plans = model.edgePlans(specs, op.id, i, nc);
            QCOMPARE(plans.size(), specs.size() * static_cast<size_t>(nc));
            for (size_t v = 0; v < specs.size(); ++v)
                for (int c = 0; c < nc; ++c) {
                    const auto& plan = plans[v * static_cast<size_t>(nc) + static_cast<size_t>(c)];
                    compareCollectivePlans(plan, model.edgePlan(specs[v], op.id, i, c), true);
                    if (QTest::currentTestFailed()) return;
                    ++compared;
                }
            std::set<TensorSpec> layouts;
            for (int c = 0; c < nc; ++c) layouts.insert(model.inputSpec(op.id, c, i));
            shared += static_cast<size_t>(nc) - layouts.size();
        }
        qInfo("compared %zu, strategies sharing a layout %zu", compared, shared);
        QVERIFY(compared > 10000);
        QVERIFY(shared > 100); // strategies reading an input alike, whose forward half was shared
    }

    // Hybrid sharding (HSDP) on 2x8 A100 nodes, data parallel over both axes, ZeRO 3: the model
    // states are sharded over y (inside a node, 8) instead of x*y (16); the gradient is
    // reduce-scattered over y and all-reduced over x on its 1/8 shard; the parameters are
    // gathered over y only, before forward and backward. gpt2's fc1 weight and bias: 768 x 3072
    // + 3072 = 2362368 elements; bf16 parameters 4724736 B, so 590592 B per device under HSDP
    // and 295296 B fully sharded.
    void hybridShardingShardsInsideANode()
    {
        const LoadedModel lm = oneLayerGpt2(16);
        const Hardware hw = loadHardware("a100-80g-dgx");
        const Mesh mesh = parseMesh("2x8", hw);
        QVERIFY(mesh.axes[0].crossesNodes && !mesh.axes[1].crossesNodes);
        CostSettings full, hybrid;
        full.zeroStage = hybrid.zeroStage = 3;
        hybrid.zeroAcrossNodes = false;
        const CostModel a(lm.graph, mesh, hw, full), b(lm.graph, mesh, hw, hybrid);
        OpId fc1 = -1;
        for (const auto& op : lm.graph.ops)
            if (op.name == "layers.0/mlp/fc1") fc1 = op.id;
        QVERIFY(fc1 >= 0);
        const int s = dataParallelAssignment(a)[static_cast<size_t>(fc1)];
        const OpCost &sharded = a.opCost(fc1, s, Recompute::None), &hsdp = b.opCost(fc1, s, Recompute::None);
        QCOMPARE(sharded.paramBytes, 295296.0);
        QCOMPARE(hsdp.paramBytes, 590592.0);
        QCOMPARE(hsdp.optimizerBytes, 2362368.0 * 12 / 8);
        std::map<std::string, double> bytesOf; // "kind axis phase" -> bytes
        for (const auto& c : hsdp.collectives)
            bytesOf[std::string(collectiveName(c.kind)) + " " + std::to_string(c.axis) + " " + std::string(phaseName(c.phase))] += c.bytes;
        const double grads = 2362368.0 * 2, params = 2362368.0 * 2;
        QCOMPARE(bytesOf.size(), size_t{4});
        QCOMPARE(bytesOf["reduce-scatter 1 gradient"], grads);
        QCOMPARE(bytesOf["all-reduce 0 gradient"], grads / 8);
        QCOMPARE(bytesOf["all-gather 1 forward"], params);
        QCOMPARE(bytesOf["all-gather 1 backward"], params);
    }

    // FSDP without reshard after forward, same fc1 on 2x8, ZeRO 3 over all 16 devices: the
    // gathered weight (4724736 B) is held from forward to backward next to its 1/16 shard
    // (295296 B), so 5020032 B of parameters; the backward all-gathers are gone, the forward
    // ones and the reduce-scatters stay as they were; gradients and optimizer states stay
    // sharded (1/16).
    void keptGatheredWeightsSkipTheBackwardGather()
    {
        const LoadedModel lm = oneLayerGpt2(16);
        const Hardware hw = loadHardware("a100-80g-dgx");
        const Mesh mesh = parseMesh("2x8", hw);
        CostSettings resharded, kept;
        resharded.zeroStage = kept.zeroStage = 3;
        kept.reshardAfterForward = false;
        const CostModel a(lm.graph, mesh, hw, resharded), b(lm.graph, mesh, hw, kept);
        OpId fc1 = -1;
        for (const auto& op : lm.graph.ops)
            if (op.name == "layers.0/mlp/fc1") fc1 = op.id;
        QVERIFY(fc1 >= 0);
        const int s = dataParallelAssignment(a)[static_cast<size_t>(fc1)];
        const OpCost &on = a.opCost(fc1, s, Recompute::None), &off = b.opCost(fc1, s, Recompute::None);
        QCOMPARE(on.paramBytes, 295296.0);
        QCOMPARE(off.paramBytes, 295296.0 + 4724736.0);
        QCOMPARE(off.gradBytes, on.gradBytes);
        QCOMPARE(off.optimizerBytes, 2362368.0 * 12 / 16);
        auto phases = [](const OpCost& c) {
            std::map<std::string, double> bytes;
            for (const auto& call : c.collectives) bytes[std::string(collectiveName(call.kind)) + " " + std::string(phaseName(call.phase))] += call.bytes;
            return bytes;
        };
        auto was = phases(on), now = phases(off);
        QVERIFY(was["all-gather backward"] > 0);
        QCOMPARE(now.count("all-gather backward"), size_t{0});
        QCOMPARE(now["all-gather forward"], was["all-gather forward"]);
        QCOMPARE(now["reduce-scatter gradient"], was["reduce-scatter gradient"]);
        QVERIFY(off.commSeconds < on.commSeconds);
        // FSDP2's buffer copies, one micro-batch: each gather copies the 1/16 shard in and the
        // whole weight out, each read and written (2 x (295296 + 4724736) = 10040064 B), two
        // gathers resharded and one kept; the reduce-scatter copies the bf16 gradient in
        // (4724736 + 4724736 = 9449472 B).
        const double rate = hw.hbmBandwidth * hw.hbmEfficiency;
        QVERIFY(std::abs(on.bufferCopySeconds - (2 * 10040064.0 + 9449472.0) / rate) <= 1e-9 * on.bufferCopySeconds);
        QVERIFY(std::abs(off.bufferCopySeconds - (10040064.0 + 9449472.0) / rate) <= 1e-9 * off.bufferCopySeconds);
        // Below stage 3 the setting changes nothing.
        resharded.zeroStage = kept.zeroStage = 2;
        const CostModel c(lm.graph, mesh, hw, resharded), d(lm.graph, mesh, hw, kept);
        QCOMPARE(d.opCost(fc1, s, Recompute::None).paramBytes, c.opCost(fc1, s, Recompute::None).paramBytes);
        QCOMPARE(d.opCost(fc1, s, Recompute::None).commSeconds, c.opCost(fc1, s, Recompute::None).commSeconds);
        QCOMPARE(d.opCost(fc1, s, Recompute::None).bufferCopySeconds, 0.0);
    }

    // Ring alpha-beta times; n = bytes a device holds with the axis not splitting the tensor.
    void collectiveFormula_data()
    {
        QTest::addColumn<CollectiveKind>("kind");
        QTest::addColumn<int>("g");
        QTest::addColumn<double>("bandwidth");
        QTest::addColumn<double>("latency");
        QTest::addColumn<double>("bytes");
        QTest::addColumn<double>("expected");
        // 2(g-1)/g n/B = 2*7/8 * 1e9 / 1e11 = 0.0175 s
        QTest::newRow("all-reduce") << CollectiveKind::AllReduce << 8 << 100e9 << 0.0 << 1e9 << 0.0175;
        // + 2(g-1) a = 14 * 5 us = 70 us -> 0.01757
        QTest::newRow("all-reduce+latency") << CollectiveKind::AllReduce << 8 << 100e9 << 5e-6 << 1e9 << 0.01757;
        // (g-1)/g n/B + (g-1) a = 3/4 * 2e9 / 5e10 + 3 * 10 us = 0.03 + 0.00003
        QTest::newRow("all-gather") << CollectiveKind::AllGather << 4 << 50e9 << 10e-6 << 2e9 << 0.03003;
        QTest::newRow("reduce-scatter") << CollectiveKind::ReduceScatter << 4 << 50e9 << 10e-6 << 2e9 << 0.03003;
        // (g-1)/g^2 n/B = 3/16 * 2e9 / 5e10 = 0.0075; + 3 * 10 us
        QTest::newRow("all-to-all") << CollectiveKind::AllToAll << 4 << 50e9 << 10e-6 << 2e9 << 0.00753;
        // DGX A100 NVLink, 8 GPUs: all-reduce of a GPT-3 layer activation b*s*h*2 bytes with b=1:
        // 2*7/8 * 2048*12288*2 / 235e9 + 14 * 5 us = 3.7478e-4 + 7e-5 = 4.4478e-4
        QTest::newRow("gpt3 activation on NVLink") << CollectiveKind::AllReduce << 8 << 235e9 << 5e-6 << 2048.0 * 12288 * 2
                                                   << (1.75 * 2048.0 * 12288 * 2 / 235e9 + 7e-5);
        QTest::newRow("one device") << CollectiveKind::AllReduce << 1 << 100e9 << 5e-6 << 1e9 << 0.0;
    }
    void collectiveFormula()
    {
        QFETCH(CollectiveKind, kind);
        QFETCH(int, g);
        QFETCH(double, bandwidth);
        QFETCH(double, latency);
        QFETCH(double, bytes);
        QFETCH(double, expected);
        const MeshAxis axis = axisOf("x", g, bandwidth, latency, false);
        const double got = collectiveSeconds(kind, bytes, axis);
        QVERIFY2(expected == 0 ? got == 0 : near(got, expected, 1e-9), qPrintable(QString::number(got, 'g', 10)));
    }

    // Resharding a bf16 [8,16,32] tensor (8192 bytes whole) on handMesh (x: 2 @ 10 GB/s,
    // y: 4 @ 100 GB/s). Sizes n per the collectives.cpp convention.
    void reshard_data()
    {
        QTest::addColumn<QString>("from");
        QTest::addColumn<QString>("to");
        QTest::addColumn<QString>("plan");
        QTest::addColumn<double>("seconds");
        QTest::newRow("same") << "[-,y,-]"
                              << "[-,y,-]"
                              << "" << 0.0;
        // partial -> replicated: all-reduce 2*3/4 * 8192/1e11 = 1.2288e-7
        QTest::newRow("all-reduce") << "[-,-,-]+y"
                                    << "[-,-,-]"
                                    << "AR y 8192" << 1.2288e-7;
        // partial -> split: reduce-scatter 3/4 * 8192/1e11 = 6.144e-8
        QTest::newRow("reduce-scatter") << "[-,-,-]+y"
                                        << "[-,-,y]"
                                        << "RS y 8192" << 6.144e-8;
        // split -> replicated: all-gather, n = gathered 8192: 6.144e-8
        QTest::newRow("all-gather") << "[-,-,y]"
                                    << "[-,-,-]"
                                    << "AG y 8192" << 6.144e-8;
        // split dim 2 -> dim 0: all-to-all, n = 4 * 2048: 3/16 * 8192/1e11 = 1.536e-8
        QTest::newRow("all-to-all") << "[-,-,y]"
                                    << "[y,-,-]"
                                    << "A2A y 8192" << 1.536e-8;
        // replicated -> split: a local slice
        QTest::newRow("slice") << "[-,-,-]"
                               << "[-,x,-]"
                               << "" << 0.0;
        // [-,-,x*y] -> [x,-,y]: y is minor inside x, so gather y (n = 8192/2 = 4096:
        // 3/4*4096/1e11 = 3.072e-8), move x to dim 0 (n = 2 * 4096: 1/4*8192/1e10 = 2.048e-7),
        // slice y: 2.3552e-7.
        QTest::newRow("two axes") << "[-,-,x*y]"
                                  << "[x,-,y]"
                                  << "AG y 4096; A2A x 8192" << 2.3552e-7;
        // partial over both, to split on y: reduce-scatter y first (8192: 6.144e-8), then the
        // slow x all-reduce on the quarter (2048: 2*1/2*2048/1e10 = 2.048e-7): 2.6624e-7.
        QTest::newRow("partial x+y") << "[-,-,-]+x+y"
                                     << "[-,-,y]"
                                     << "RS y 8192; AR x 2048" << 2.6624e-7;
        // [y,-,-]+x -> [-,-,x]: reduce-scatter x onto dim 2 (n = 8192/4 = 2048: 1/2*2048/1e10
        // = 1.024e-7), then gather y (shard 1024 * 4 = 4096: 3/4*4096/1e11 = 3.072e-8).
        QTest::newRow("partial and move") << "[y,-,-]+x"
                                          << "[-,-,x]"
                                          << "RS x 2048; AG y 4096" << 1.3312e-7;
        // Order of axes in one dim differs: gather both (y: 1024*4 = 4096 -> 3.072e-8;
        // x: 4096*2 = 8192 -> 1/2*8192/1e10 = 4.096e-7), then slice: 4.4032e-7.
        QTest::newRow("axis order") << "[x*y,-,-]"
                                    << "[y*x,-,-]"
                                    << "AG y 4096; AG x 8192" << 4.4032e-7;
        // Becoming partial is free, but the x split must go first: all-gather 4.096e-7.
        QTest::newRow("to partial") << "[x,-,-]"
                                    << "[-,-,-]+y"
                                    << "AG x 8192" << 4.096e-7;
        // Partial on both sides stays; the y split moves dim 0 -> 1 (all-to-all 1.536e-8).
        QTest::newRow("keep partial") << "[y,-,-]+x"
                                      << "[-,y,-]+x"
                                      << "A2A y 8192" << 1.536e-8;
    }
    void reshard()
    {
        QFETCH(QString, from);
        QFETCH(QString, to);
        QFETCH(QString, plan);
        QFETCH(double, seconds);
        const Mesh m = handMesh();
        const std::vector<std::int64_t> shape{8, 16, 32};
        const auto calls = planReshard(parseSpec(from.toStdString(), shape, m), parseSpec(to.toStdString(), shape, m), shape, 2,
                                       m, Phase::Forward);
        QCOMPARE(QString::fromStdString(planText(calls, m)), plan);
        double total = 0;
        for (const auto& c : calls) total += c.seconds;
        QVERIFY2(seconds == 0 ? total == 0 : near(total, seconds, 1e-9), qPrintable(QString::number(total, 'g', 10)));
    }

    // The two greedy orders of planReshard (core/cost/collectives.cpp): [x,-,-]+y -> [y,-,-] on
    // a mesh with latencies (x: 2 devices, 10 GB/s, 1e-5 s a step; y: 4, 100 GB/s, 1e-6 s).
    // Resolving the partial sum first all-reduces y on the half shard (4096 bytes: 1.5 * 4096 /
    // 1e11 + 6 ring steps = 6.06144e-6) and then gathers x (8192: 0.5 * 8192 / 1e10 + 1e-5 =
    // 1.04096e-5): 1.647104e-5. Gathering first lets a reduce-scatter replace the all-reduce
    // (8192: 0.75 * 8192 / 1e11 + 3 steps = 3.06144e-6): 1.347104e-5, the plan to find.
    void reshardGathersFirstWhereThatIsCheaper()
    {
        Mesh m;
        m.axes.push_back(axisOf("x", 2, 10e9, 1e-5, true));
        m.axes.push_back(axisOf("y", 4, 100e9, 1e-6, false));
        const std::vector<std::int64_t> shape{8, 16, 32};
        const auto calls = planReshard(parseSpec("[x,-,-]+y", shape, m), parseSpec("[y,-,-]", shape, m), shape, 2, m, Phase::Forward);
        QCOMPARE(QString::fromStdString(planText(calls, m)), QString("AG x 8192; RS y 8192"));
        double total = 0;
        for (const auto& c : calls) total += c.seconds;
        QVERIFY2(near(total, 1.347104e-5, 1e-9), qPrintable(QString::number(total, 'g', 10)));
    }

    // Every pair of specs of a [4,4] tensor on mesh 2x2 has a plan that ends at the target.
    void reshardAnyToAny()
    {
        const Mesh m = parseMesh("2x2", loadHardware("a100-80g-dgx"));
        const std::vector<std::int64_t> shape{4, 4};
        std::vector<std::string> specs;
        const char* dimChoices[] = {"-", "x", "y", "x*y", "y*x"};
        const char* partials[] = {"", "+x", "+y", "+x+y"};
        for (auto a : dimChoices)
            for (auto b : dimChoices)
                for (auto p : partials) {
                    const std::string t = std::string("[") + a + "," + b + "]" + p;
                    try {
                        parseSpec(t, shape, m);
                        specs.push_back(t);
                    } catch (const InputError&) {}
                }
        // Per dim pair with distinct axes: (-,-) (-,x) (-,y) (-,x*y) (-,y*x) (x,-) (x,y) (y,-)
        // (y,x) (x*y,-) (y*x,-), each with the unused axes optionally partial:
        // 4+2+2+1+1+2+1+2+1+1+1 = 18 specs, 324 pairs.
        QCOMPARE(specs.size(), size_t(18));
        for (const auto& f : specs)
            for (const auto& t : specs) {
                const auto calls = planReshard(parseSpec(f, shape, m), parseSpec(t, shape, m), shape, 2, m, Phase::Forward);
                QVERIFY2(f != t || calls.empty(), f.c_str());
                QVERIFY(calls.size() <= 6);
            }
    }

    // ZeRO (Rajbhandari et al.): mixed-precision Adam keeps 2 + 2 + 12 = 16 bytes per
    // parameter; their 7.5B-parameter example needs 120 GB. One linear with a 75000 x 100000
    // weight (7.5e9 parameters): 120e9 bytes replicated, 120e9 / 8 = 15e9 with f split 8 ways.
    void modelStates()
    {
        Graph g;
        const TensorId x = g.addTensor("x", {8, 75000}, DType::BF16, TensorRole::Input);
        const TensorId w = g.addTensor("w", {75000, 100000}, DType::BF16, TensorRole::Weight);
        const TensorId y = g.addTensor("y", {8, 100000}, DType::BF16, TensorRole::Output);
        g.addOp("fc", OpKind::Linear, {x, w}, {y}, "bk,kf->bf");
        const Hardware hw = loadHardware("a100-80g-dgx");
        const CostModel model(g, parseMesh("8", hw), hw);
        const OpCost& rep = model.opCost(0, 0);
        QCOMPARE(rep.paramBytes + rep.gradBytes + rep.optimizerBytes, 120e9);
        QCOMPARE(rep.paramBytes, 15e9);
        const int col = model.findStrategy(0, parseStrategy("f=x", model.signature(0), model.mesh()));
        QVERIFY(col > 0);
        const OpCost& sharded = model.opCost(0, col);
        QCOMPARE(sharded.paramBytes + sharded.gradBytes + sharded.optimizerBytes, 15e9);
        // Data parallel (b=x): the weight stays whole and its gradient (2 bytes x 7.5e9) is
        // all-reduced over x: 2*7/8 * 15e9 / 235e9 + 14 * 5 us.
        const int dp = model.findStrategy(0, parseStrategy("b=x", model.signature(0), model.mesh()));
        const OpCost& d = model.opCost(0, dp);
        QCOMPARE(int(d.collectives.size()), 1);
        QCOMPARE(d.collectives[0].phase, Phase::Gradient);
        QVERIFY(near(d.commSeconds, 1.75 * 15e9 / 235e9 + 70e-6, 1e-12));
        // Inference keeps only the bf16 parameters.
        CostSettings infer;
        infer.training = false;
        const CostModel inf(g, parseMesh("8", hw), hw, infer);
        QCOMPARE(inf.opCost(0, 0).memoryBytes(), 15e9);
    }

    // Korthikanti et al. 2022, activation bytes per transformer layer (fp16, 1-byte masks):
    //   no parallelism:            s*b*h*(34 + 5*a*s/h)
    //   tensor parallel t:         s*b*h*(10 + 24/t + 5*a*s/(h*t))
    //   + sequence parallel:       s*b*h/t*(34 + 5*a*s/h)
    //   selective recompute, TP:   s*b*h*(10 + 24/t);   with SP too: s*b*h*34/t
    void korthikanti_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<QString>("mode");
        QTest::addColumn<double>("expected");
        const double t = 8;
        auto add = [&](const char* model, double s, double b, double h, double a) {
            const double sbh = s * b * h;
            const QString m(model);
            QTest::newRow(qPrintable(m + " none")) << m << "none" << sbh * (34 + 5 * a * s / h);
            QTest::newRow(qPrintable(m + " tp")) << m << "tp" << sbh * (10 + 24 / t + 5 * a * s / (h * t));
            QTest::newRow(qPrintable(m + " tp+sp")) << m << "sp" << sbh / t * (34 + 5 * a * s / h);
            QTest::newRow(qPrintable(m + " tp selective")) << m << "tp-sel" << sbh * (10 + 24 / t);
            QTest::newRow(qPrintable(m + " tp+sp selective")) << m << "sp-sel" << sbh * 34 / t;
            QTest::newRow(qPrintable(m + " tp full")) << m << "tp-full" << 0.0;
        };
        add("gpt3-175b", 2048, 1, 12288, 96); // none: 2048*12288*(34 + 80) = 2.869e9 bytes
        add("gpt-22b", 2048, 4, 6144, 64);
        // Micro-batch 1 of the 22B model's batch 4: the same formula with b = 1.
        QTest::newRow("gpt-22b tp micro-batch 1") << "gpt-22b"
                                                  << "tp-micro1" << 2048.0 * 6144 * (10 + 24 / t + 5 * 64 * 2048 / (6144 * t));
    }
    void korthikanti()
    {
        QFETCH(QString, model);
        QFETCH(QString, mode);
        QFETCH(double, expected);
        const Graph g = model == "gpt3-175b" ? gpt3(3, 1).graph : gpt22b(3);
        const Hardware hw = loadHardware("a100-80g-dgx");
        CostSettings settings;
        if (mode == "tp-micro1") settings.microBatch = 1;
        const CostModel m(g, parseMesh(mode == "none" ? "1" : "8", hw), hw, settings);
        std::vector<int> plan(g.ops.size(), 0);
        if (mode != "none") plan = megatronAssignment(m, {mode.startsWith("sp")});
        const Recompute r = mode.endsWith("sel")    ? Recompute::Selective
                            : mode.endsWith("full") ? Recompute::Full
                                                    : Recompute::None;
        const double got = layerActivation(m, plan, r);
        QVERIFY2(expected == 0 ? got == 0 : near(got, expected, 0.01),
                 qPrintable(QStringLiteral("%1 vs %2 (%3)").arg(got, 0, 'e', 5).arg(expected, 0, 'e', 5).arg(got / expected)));
    }

    // Megatron-LM: per layer per step, 2 forward all-reduces (after the attention output
    // projection and after fc2) and 2 backward ones (the input gradients of the column-parallel
    // q/k/v and fc1), each of b*s*h elements; nothing else in the layer on mesh 8 (no data
    // parallelism, so no gradient all-reduce). GPT-3 175B, b = 1536: 1536*2048*12288*2 bytes.
    void megatronFourAllReduces()
    {
        const auto lm = gpt3(0, 1536);
        const Hardware hw = loadHardware("a100-80g-dgx");
        const CostModel m(lm.graph, parseMesh("8", hw), hw);
        const auto plan = megatronAssignment(m);
        const Breakdown b = m.evaluate(plan);
        const double bsh2 = 1536.0 * 2048 * 12288 * 2;
        for (int layer : {0, 1, 50, 95}) {
            const std::string prefix = "layers." + std::to_string(layer) + "/";
            int forward = 0, backward = 0, other = 0;
            for (const auto& c : b.collectives) {
                if (lm.graph.op(c.at).name.rfind(prefix, 0) != 0) continue;
                if (c.kind == CollectiveKind::AllReduce && c.bytes == bsh2)
                    (c.phase == Phase::Forward ? forward : c.phase == Phase::Backward ? backward : other) += 1;
                else
                    ++other;
            }
            QCOMPARE(forward, 2);
            QCOMPARE(backward, 2);
            QCOMPARE(other, 0);
        }
        const auto name = [&](const char* n) {
            for (const auto& op : lm.graph.ops)
                if (op.name == n)
                    return QString::fromStdString(
                        strategyToString(m.strategies(op.id)[static_cast<size_t>(plan[static_cast<size_t>(op.id)])],
                                         m.signature(op.id), m.mesh()));
            return QString();
        };
        QCOMPARE(name("layers.3/attn/q"), QString("f=x"));
        QCOMPARE(name("layers.3/attn/scores"), QString("n=x"));
        QCOMPARE(name("layers.3/attn/softmax"), QString("s=x")); // its default equation names dim 1 's'
        QCOMPARE(name("layers.3/attn/q_heads"), QString("n=x"));
        QCOMPARE(name("layers.3/attn/merge_heads"), QString("n=x"));
        QCOMPARE(name("layers.3/attn/out"), QString("h=x"));
        QCOMPARE(name("layers.3/mlp/fc1"), QString("f=x"));
        QCOMPARE(name("layers.3/mlp/fc2"), QString("h=x"));
        QCOMPARE(name("layers.3/ln1"), QString("-"));
        qInfo("Megatron GPT-3 175B, b=1536, mesh 8, a100-80g-dgx: step %.3f s, compute %.3f s, comm %.3f s, "
              "memory %.1f GiB/device (params+grads+opt %.1f, activations %.1f)",
              b.stepSeconds, b.computeSeconds, b.commSeconds, b.perDeviceBytes / 1073741824.0,
              (b.paramBytes + b.gradBytes + b.optimizerBytes) / 1073741824.0, b.activationBytes / 1073741824.0);
    }

    // Tensor parallelism across nodes: on mesh 16 the one axis spans two nodes, so each
    // all-reduce of n runs hierarchically (NCCL): a reduce-scatter and an all-gather over NVLink
    // (2 * 7/8 n / 235 GB/s = n / 134 GB/s) plus an all-reduce of n/8 over InfiniBand (2 * 1/2 *
    // n/8 / 20 GB/s = n / 160 GB/s), against n / 134 GB/s on mesh 8: 1 + 134/160 = 1.84 times,
    // not the 12x a flat ring over InfiniBand would cost.
    void megatronAcrossNodesCostsMore()
    {
        const auto lm = gpt3(0, 64);
        const Hardware hw = loadHardware("a100-80g-dgx");
        const CostModel m8(lm.graph, parseMesh("8", hw), hw);
        const CostModel m16(lm.graph, parseMesh("16", hw), hw);
        const Breakdown b8 = m8.evaluate(megatronAssignment(m8));
        const Breakdown b16 = m16.evaluate(megatronAssignment(m16));
        qInfo("Megatron GPT-3 175B b=64 comm: mesh 8 %.3f s, mesh 16 %.3f s", b8.commSeconds, b16.commSeconds);
        QVERIFY2(near(b16.commSeconds / b8.commSeconds, 1 + (235.0 / 1.75) / 160, 0.03),
                 qPrintable(QString::number(b16.commSeconds / b8.commSeconds)));
    }

    // The same plan on one NVLink domain of 72 GPUs (GB200 NVL72) and on 9 DGX B200 nodes: the
    // same NVLink 5 bus bandwidth inside a node (846 GB/s), but what crosses the B200 nodes runs
    // at 40 GB/s per GPU, so every collective over 72 GPUs (data parallelism, the mesh "72") and
    // the 9-way one of Megatron's layout on 9x8 cost less on the rack.
    void nvl72AxisBeatsNineNodes_data()
    {
        QTest::addColumn<QString>("mesh");
        QTest::addColumn<bool>("megatron");
        QTest::newRow("data parallel over 72") << "72" << false;
        QTest::newRow("megatron 9x8") << "9x8" << true;
    }
    void nvl72AxisBeatsNineNodes()
    {
        QFETCH(QString, mesh);
        QFETCH(bool, megatron);
        ModelOptions o;
        o.batch = 72;
        o.seq = 1024;
        o.overrides = {"layers=2"};
        const auto lm = loadModel("llama3-70b", o);
        double comm[2] = {0, 0};
        int i = 0;
        for (const char* name : {"gb200-nvl72", "b200-dgx"}) {
            const Hardware hw = loadHardware(name);
            const Mesh m = parseMesh(mesh.toStdString(), hw);
            QCOMPARE(m.axes[0].crossesNodes, std::string(name) == "b200-dgx");
            const CostModel model(lm.graph, m, hw);
            comm[i++] = model.evaluate(megatron ? megatronAssignment(model) : dataParallelAssignment(model)).commSeconds;
        }
        qInfo("LLaMA-3 70B (2 layers) on %s: communication %.3f s on NVL72, %.3f s on 9 B200 nodes", qPrintable(mesh), comm[0],
              comm[1]);
        QVERIFY(comm[0] < comm[1]);
    }

    // One Mixtral layer (8 experts, top-2) on 8 devices of one flat 100 GB/s link, seq 256,
    // batch 8: capacity c = 256 * 2 / 8 = 64, so the dispatched tokens [b, e, c, h] are
    // n = 8 * 8 * 64 * 4096 * 2 bytes = 32 MiB.
    //   Expert parallelism (tokens split by batch, the experts' loop e split in the expert FFN):
    //   an all-to-all moves the split from b to e after the dispatch and back before the combine,
    //   forward and backward: 4 all-to-alls of (g-1)/g^2 n / B = 7/64 * 32 MiB / 100 GB/s = 36.7 us,
    //   146.8 us in all.
    //   Tensor parallelism inside the experts (the fused gate-up split by f, down by its contraction):
    //   the down projection's partial output is all-reduced forward and the dispatched tokens'
    //   partial gradient backward: 2 all-reduces of 2 (g-1)/g n / B = 587.2 us, 1174.4 us in all,
    //   g = 8 times the all-to-alls'. Both split the experts' FLOPs 8 ways alike.
    //   With a latency of 10 us a step and micro-batches of one sequence (one per device), every
    //   all-to-all adds (g-1) = 7 steps, once: the experts' split of e stands in for the batch
    //   split, so the expert FFN runs on the 8 devices' micro-batches together, once per
    //   micro-batch, not once per sequence of the whole batch (CostModel::batchSplits).
    void expertParallelMovesLessThanTensorParallel_data()
    {
        QTest::addColumn<double>("latency");
        QTest::addColumn<qint64>("microBatch");
        QTest::newRow("bandwidth only") << 0.0 << qint64(0);
        QTest::newRow("latency, micro-batch 1") << 10e-6 << qint64(1);
    }

    void expertParallelMovesLessThanTensorParallel()
    {
        QFETCH(double, latency);
        QFETCH(qint64, microBatch);
        ModelOptions o;
        o.batch = 8;
        o.seq = 256;
        o.overrides = {"layers=1"};
        const auto lm = loadModel("mixtral-8x7b", o);
        Mesh mesh;
        mesh.axes.push_back(axisOf("x", 8, 100e9, latency, false));
        const Hardware hw = flatA100();
        CostSettings settings;
        settings.microBatch = microBatch;
        const CostModel model(lm.graph, mesh, hw, settings);
        auto planWith = [&](const std::function<std::string(const Op&)>& strategyOf) {
            std::vector<int> plan(lm.graph.ops.size(), 0);
            for (const auto& op : lm.graph.ops) {
                const std::string text = strategyOf(op);
                const int s = model.findStrategy(op.id, parseStrategy(text, model.signature(op.id), mesh));
                if (s < 0) throw std::runtime_error(op.name + ": no candidate " + text);
                plan[static_cast<size_t>(op.id)] = s;
            }
            return plan;
        };
        const auto inExperts = [](const Op& op) { return op.name.find("/moe/experts/") != std::string::npos; };
        const auto linear = [](const Op& op) { return op.kind == OpKind::Linear; };
        // EP: batch-split everywhere, the expert loop split in the expert FFN.
        const auto ep = planWith([&](const Op& op) -> std::string {
            if (inExperts(op)) return "e=x";
            return model.signature(op.id).loops.empty() || lm.graph.tensor(op.outputs[0]).shape.size() < 2 ||
                           op.kind == OpKind::CrossEntropy
                       ? "-"
                       : "b=x";
        });
        // TP: replicated everywhere but the experts, split by their FFN dim f (contracted in down).
        const auto tp = planWith([&](const Op& op) -> std::string { return inExperts(op) ? "f=x" : "-"; });
        const double n = 8.0 * 8 * 64 * 4096 * 2;
        const double allToAll = 7.0 / 64 * n / 100e9 + 7 * latency;
        // The all-reduces of the replicated TP layout (the whole batch on every device) run once
        // per sequence with micro-batches of one: 8 times 2 (g-1) = 14 latency steps, or a
        // binary tree's 2 log2 8 = 6 where the ring's are longer (flat link: ring only).
        const double tpMicro = microBatch > 0 ? 8 : 1;
        const double allReduce = 2 * 7.0 / 8 * n / 100e9 + tpMicro * 14 * latency;
        auto moeActivationComm = [&](const std::vector<int>& plan, std::map<CollectiveKind, int>& count) {
            double seconds = 0;
            for (const auto& c : model.evaluate(plan).collectives) {
                if (c.phase == Phase::Gradient || lm.graph.op(c.at).name.find("/moe/") == std::string::npos) continue;
                ++count[c.kind];
                seconds += c.seconds;
            }
            return seconds;
        };
        std::map<CollectiveKind, int> epCount, tpCount;
        const double epSeconds = moeActivationComm(ep, epCount), tpSeconds = moeActivationComm(tp, tpCount);
        qInfo("Mixtral layer, mesh 8 at 100 GB/s, %.0f us latency: expert parallel %.1f us, tensor parallel %.1f us", latency * 1e6,
              epSeconds * 1e6,
              tpSeconds * 1e6);
        QCOMPARE(epCount, (std::map<CollectiveKind, int>{{CollectiveKind::AllToAll, 4}}));
        QCOMPARE(tpCount, (std::map<CollectiveKind, int>{{CollectiveKind::AllReduce, 2}}));
        QVERIFY(near(epSeconds, 4 * allToAll, 1e-9));
        QVERIFY(near(tpSeconds, 2 * allReduce, 1e-9));
        // The experts' compute is split alike: the same expert-FFN kernel time under both.
        const Breakdown epB = model.evaluate(ep), tpB = model.evaluate(tp);
        double epExperts = 0, tpExperts = 0;
        for (const auto& op : lm.graph.ops)
            if (inExperts(op) && linear(op)) {
                epExperts += epB.ops[static_cast<size_t>(op.id)].computeSeconds;
                tpExperts += tpB.ops[static_cast<size_t>(op.id)].computeSeconds;
            }
        QVERIFY2(near(epExperts, tpExperts, 0.05), qPrintable(QString("%1 vs %2").arg(epExperts).arg(tpExperts)));
    }

    // --dtype fp8: a Linear's matmuls at the fp8 peak, attention's batch matmuls still bf16.
    // With the flat shape model, time = FLOPs / (peak x 80.3%): the q projection of LLaMA-2 7B at
    // batch 8 x seq 4096 (2 * 32768 * 4096 * 4096 = 1.1 TFLOP forward, compute-bound) takes
    // 989 / 1979 of its bf16 time; the scores take the same.
    void fp8MatmulsRunAtTheFp8Peak()
    {
        ModelOptions o;
        o.batch = 8;
        o.seq = 4096;
        o.overrides = {"layers=1"};
        const auto lm = loadModel("llama2-7b", o);
        Hardware hw = loadHardware("h100-dgx");
        hw.gemm = {};
        CostSettings fp8;
        fp8.fp8Matmuls = true;
        const Mesh one = parseMesh("1", hw);
        const CostModel bf16Model(lm.graph, one, hw), fp8Model(lm.graph, one, hw, fp8);
        auto forward = [&](const CostModel& m, const char* name) {
            for (const auto& op : lm.graph.ops)
                if (op.name == name) return m.opCost(op.id, 0, Recompute::None).forwardSeconds;
            return -1.0;
        };
        QVERIFY(near(forward(fp8Model, "layers.0/attn/q") / forward(bf16Model, "layers.0/attn/q"), 989.0 / 1979.0, 1e-9));
        QCOMPARE(forward(fp8Model, "layers.0/attn/scores"), forward(bf16Model, "layers.0/attn/scores"));
    }

    // The search's contract: evaluate() is the sum of the node and edge costs it exposes.
    // With the fold's canonical ops, each edge is costed once per (canonical consumer, input,
    // strategy, canonical producer, slot, strategy): the same sums, also when instances of one
    // block run different strategies.
    void evaluateIsTheSumOfItsParts_data()
    {
        QTest::addColumn<int>("overlap");
        QTest::addColumn<bool>("canonical");
        QTest::newRow("no overlap") << 1 << false;
        QTest::newRow("overlap 4") << 4 << false;
        QTest::newRow("no overlap, edges by canonical op") << 1 << true;
        QTest::newRow("overlap 4, edges by canonical op") << 4 << true;
    }
    void evaluateIsTheSumOfItsParts()
    {
        QFETCH(int, overlap);
        QFETCH(bool, canonical);
        const auto lm = gpt3(2, 16);
        const Hardware hw = loadHardware("a100-80g-dgx");
        CostSettings s;
        s.overlapChunks = overlap;
        const CostModel m(lm.graph, parseMesh("2x8", hw), hw, s);
        const FoldedGraph folded = foldGraph(lm.graph);
        auto plan = megatronAssignment(m, {true});
        if (canonical) // in odd instances, every other op on its last strategy; the rest as Megatron
            for (const auto& bc : folded.classes)
                for (size_t i = 1; i < bc.instances.size(); i += 2)
                    for (size_t k = 0; k < bc.instances[i].ops.size(); k += 2) {
                        const OpId op = bc.instances[i].ops[k];
                        plan[static_cast<size_t>(op)] = static_cast<int>(m.strategies(op).size()) - 1;
                    }
        std::vector<Recompute> rec(lm.graph.ops.size(), Recompute::None);
        for (size_t i = 0; i < rec.size(); i += 3) rec[i] = Recompute::Selective;
        const std::vector<OpId> canonicalOp = canonical ? canonicalOps(folded) : std::vector<OpId>{};
        int shared = 0; // ops of a later instance, costed by their first instance's counterpart
        for (size_t op = 0; op < canonicalOp.size(); ++op) shared += canonicalOp[op] != OpId(op);
        QCOMPARE(shared > 0, canonical);
        const Breakdown b = m.evaluate(plan, rec, {}, canonicalOp);
        const auto prod = lm.graph.producers();
        double step = 0, mem = 0, hidden = 0;
        for (const auto& op : lm.graph.ops) {
            const int st = plan[static_cast<size_t>(op.id)];
            const OpCost& c = m.opCost(op.id, st, rec[static_cast<size_t>(op.id)]);
            step += c.seconds();
            mem += c.memoryBytes();
            for (size_t i = 0; i < op.inputs.size(); ++i) {
                const OpId p = prod[static_cast<size_t>(op.inputs[i])];
                if (p < 0) continue;
                int slot = 0;
                while (lm.graph.op(p).outputs[static_cast<size_t>(slot)] != op.inputs[i]) ++slot;
                const auto e = m.edgeCost(&m.outputSpec(p, plan[static_cast<size_t>(p)], slot), op.id, int(i), st);
                step += e.exposedSeconds;
                hidden += e.seconds - e.exposedSeconds;
            }
        }
        QCOMPARE(b.stepSeconds, step);
        QCOMPARE(b.perDeviceBytes, mem);
        QVERIFY(near(b.stepSeconds, b.computeSeconds + b.exposedCommSeconds, 1e-12));
        QVERIFY(near(b.commSeconds, b.exposedCommSeconds + b.hiddenCommSeconds, 1e-12));
        if (overlap == 1)
            QCOMPARE(hidden, 0.0);
        else
            QVERIFY(hidden > 0);
        QCOMPARE(b.capacityBytes, hw.hbmBytes);
        QCOMPARE(int(b.ops.size()), int(lm.graph.ops.size()));
    }

    // Overlap with k chunks: exposed = comm/k + max(0, (comm - compute)(k-1)/k). Inference (one
    // phase): fc (column-parallel on mesh 4) feeds a replicated ReLU, so its output is
    // all-gathered; the matmul next to it is fc, the producer.
    void overlapFormula()
    {
        Graph g;
        const TensorId x = g.addTensor("x", {4096, 1024}, DType::BF16, TensorRole::Input);
        const TensorId w = g.addTensor("w", {1024, 4096}, DType::BF16, TensorRole::Weight);
        const TensorId y = g.addTensor("y", {4096, 4096}, DType::BF16, TensorRole::Activation);
        const TensorId z = g.addTensor("z", {4096, 4096}, DType::BF16, TensorRole::Output);
        g.addOp("fc", OpKind::Linear, {x, w}, {y}, "bk,kf->bf");
        g.addOp("act", OpKind::ReLU, {y}, {z});
        const Hardware hw = flatA100();
        CostSettings s;
        s.training = false;
        const CostModel one(g, parseMesh("4", hw), hw, s);
        s.overlapChunks = 4;
        const CostModel four(g, parseMesh("4", hw), hw, s);
        const int col = one.findStrategy(0, parseStrategy("f=x", one.signature(0), one.mesh()));
        const TensorSpec& produced = one.outputSpec(0, col, 0);
        const EdgeCost e1 = one.edgeCost(&produced, 1, 0, 0), e4 = four.edgeCost(&produced, 1, 0, 0);
        // comm: all-gather of 4096*4096*2 bytes on NVLink: 3/4 * 33554432 / 235e9 + 3 * 5 us
        const double comm = 0.75 * 33554432 / 235e9 + 15e-6;
        // compute: 2*4096*1024*4096 / 4 / (312e12 * 0.869)
        const double compute = 2.0 * 4096 * 1024 * 4096 / 4 / (312e12 * 0.869);
        QVERIFY(near(e1.seconds, comm, 1e-12));
        QCOMPARE(e1.exposedSeconds, e1.seconds);
        QVERIFY(near(one.opCost(0, col).computeSeconds, compute, 1e-12));
        QVERIFY(near(e4.exposedSeconds, comm / 4 + std::max(0.0, (comm - compute) * 3 / 4), 1e-12));
        QVERIFY(e4.exposedSeconds < e4.seconds);
    }

    // Both baselines give a valid strategy for every op of every built-in model, and evaluate.
    void baselinesOnEveryModel()
    {
        const Hardware hw = loadHardware("a100-80g-dgx");
        for (const auto& name : builtinModelNames()) {
            ModelOptions o;
            o.batch = 8;
            const auto lm = loadModel(name, o);
            for (const char* mesh : {"8", "2x4"}) {
                const CostModel m(lm.graph, parseMesh(mesh, hw), hw);
                for (const auto& plan : {megatronAssignment(m), megatronAssignment(m, {true}), dataParallelAssignment(m)}) {
                    QCOMPARE(plan.size(), lm.graph.ops.size());
                    for (const auto& op : lm.graph.ops) {
                        const int s = plan[static_cast<size_t>(op.id)];
                        QVERIFY2(s >= 0 && s < int(m.strategies(op.id).size()), (name + ": " + op.name).c_str());
                    }
                    const Breakdown b = m.evaluate(plan);
                    QVERIFY2(b.stepSeconds > 0, name.c_str());
                }
            }
        }
    }

    // Pure data parallelism on mesh 8: the batch is split 8 ways, the only communication is
    // the gradient all-reduce of every weight (2 bytes per parameter in all). The position
    // embedding has no batch loop, so its [s, h] output's gradient is all-reduced on the edge
    // into the batch-split add (backward phase) instead: with positions = seq that is exactly
    // wpe's size.
    void dataParallel()
    {
        const auto lm = gpt3(2, 16);
        const Hardware hw = loadHardware("a100-80g-dgx");
        const CostModel m(lm.graph, parseMesh("8", hw), hw);
        const Breakdown b = m.evaluate(dataParallelAssignment(m));
        double gradBytes = 0;
        int backward = 0;
        for (const auto& c : b.collectives) {
            QVERIFY(c.phase == Phase::Gradient || c.phase == Phase::Backward);
            QCOMPARE(c.kind, CollectiveKind::AllReduce);
            gradBytes += c.bytes;
            backward += c.phase == Phase::Backward;
        }
        QCOMPARE(backward, 1);
        QCOMPARE(gradBytes, 2.0 * double(lm.graph.parameterCount()));
        QCOMPARE(b.paramBytes, 2.0 * double(lm.graph.parameterCount()));
    }

    // The matmul shape model (core/cost/kernels.h) on the A100 preset (108 SMs, 128x256 tiles,
    // half rate at K = 32): the 22B model's fused QKV on TP 8, m = 4*2048 = 8192 tokens,
    // n = 3*6144/8 = 2304, k = 6144. Tiles: 64 x 9 = 576 (either orientation: 32 x 18), 6 waves
    // of 108 = 648 slots of 128*256: utilization 8192*2304 / (648*32768) = 0.888889; times
    // 6144 / 6176 for K: 0.869 * 0.888889 * 0.994819 = 0.768446.
    void gemmEfficiencyFromShape_data()
    {
        QTest::addColumn<double>("m");
        QTest::addColumn<double>("n");
        QTest::addColumn<double>("k");
        QTest::addColumn<double>("batch");
        QTest::addColumn<double>("expected");
        QTest::newRow("22B qkv") << 8192.0 << 2304.0 << 6144.0 << 1.0 << 0.869 * (8192.0 * 2304 / (648.0 * 32768)) * 6144 / 6176;
        // One wave exactly (108 tiles of 128x256 would need m = 128*108 with n = 256): full
        // utilization, K = 32 halves the rate.
        QTest::newRow("one wave, k 32") << 128.0 * 108 << 256.0 << 32.0 << 1.0 << 0.869 * 0.5;
        // Attention scores of the 22B layer: 32 batches of 2048 x 2048 x 96: 32*8*16 = 4096
        // tiles in 38 waves (4104 slots): 4096/4104, K 96/(96+32) = 0.75.
        QTest::newRow("22B scores") << 2048.0 << 2048.0 << 96.0 << 32.0 << 0.869 * 4096.0 / 4104 * 0.75;
    }
    void gemmEfficiencyFromShape()
    {
        QFETCH(double, m);
        QFETCH(double, n);
        QFETCH(double, k);
        QFETCH(double, batch);
        QFETCH(double, expected);
        const Hardware hw = loadHardware("a100-80g-dgx");
        const double got = gemmEfficiency(hw, {batch, m, n, k});
        QVERIFY2(near(got, expected, 1e-9), qPrintable(QString::number(got, 'g', 10)));
        // Without the shape model, the flat efficiency.
        QCOMPARE(gemmEfficiency(flatA100(), {batch, m, n, k}), 0.869);
    }

    // A measured bus-bandwidth curve replaces the alpha-beta model: between 1 MiB (36.1 GB/s)
    // and 16 MiB (255 GB/s) it is interpolated in log(size), so 4 MiB (half-way in log) runs at
    // (36.1 + 255) / 2 = 145.55 GB/s; an all-reduce over 8 takes 2*7/8 * 4 MiB / 145.55 GB/s.
    // Below the first point the time stays that of the first point.
    void busBandwidthCurve()
    {
        Hardware hw = loadHardware("a100-80g-dgx");
        hw.intraNode.busbw["all-reduce"].points = {{1048576.0, 36.1e9}, {16777216.0, 255e9}};
        const Mesh m = parseMesh("8", hw);
        const double mib4 = 4.0 * 1048576;
        QVERIFY(near(collectiveSeconds(CollectiveKind::AllReduce, mib4, m.axes[0]), 1.75 * mib4 / 145.55e9, 1e-9));
        // All-gather has no curve of its own: the all-reduce curve with its (g-1)/g factor.
        QVERIFY(near(collectiveSeconds(CollectiveKind::AllGather, mib4, m.axes[0]), 0.875 * mib4 / 145.55e9, 1e-9));
        const double first = collectiveSeconds(CollectiveKind::AllReduce, 1048576.0, m.axes[0]);
        QVERIFY(near(collectiveSeconds(CollectiveKind::AllReduce, 1024.0, m.axes[0]), first, 1e-9));
    }

    // Groups spanning nodes: mesh 16 on 8-GPU nodes is one axis of 16 with 8 members per node.
    // An all-reduce of n runs as a reduce-scatter inside the node (7/8 n / 235 GB/s + 7*5 us),
    // an all-reduce across the 2 nodes of n/8 (2*1/2 * n/8 / 20 GB/s + tree 2*1*10 us) and an
    // all-gather inside the node again. Mesh 2x8 puts the two nodes on axis x with one member
    // per node: a flat all-reduce of n over 2 at 20 GB/s.
    void hierarchicalAcrossNodes()
    {
        const Hardware hw = loadHardware("a100-80g-dgx");
        const double n = 1e9;
        const Mesh m16 = parseMesh("16", hw);
        QCOMPARE(m16.axes[0].membersPerNode, 8);
        const double intra = 0.875 * n / 235e9 + 7 * 5e-6;
        const double inter = 1.0 * (n / 8) / 20e9 + 2 * 10e-6;
        QVERIFY(near(collectiveSeconds(CollectiveKind::AllReduce, n, m16.axes[0]), 2 * intra + inter, 1e-9));
        const Mesh m2x8 = parseMesh("2x8", hw);
        QCOMPARE(m2x8.axes[0].membersPerNode, 1);
        QVERIFY(near(collectiveSeconds(CollectiveKind::AllReduce, n, m2x8.axes[0]), 1.0 * n / 20e9 + 2 * 10e-6, 1e-9));
    }

    // The optimizer step streams, per parameter, Megatron's passes: the bf16 gradient copied to
    // fp32 (2 + 4 bytes), its norm (4), Adam reading the fp32 gradient (4) and reading and
    // writing master weight, momentum and variance (2 x 12), the master copied into the bf16
    // weight (4 + 2) and the gradient zeroed (2): 46 bytes at 88% of 2039 GB/s. One 4096 x
    // 4096 linear: 16.78M parameters.
    void optimizerStep()
    {
        Graph g;
        const TensorId x = g.addTensor("x", {8, 4096}, DType::BF16, TensorRole::Input);
        const TensorId w = g.addTensor("w", {4096, 4096}, DType::BF16, TensorRole::Weight);
        const TensorId y = g.addTensor("y", {8, 4096}, DType::BF16, TensorRole::Output);
        g.addOp("fc", OpKind::Linear, {x, w}, {y}, "bk,kf->bf");
        const Hardware hw = loadHardware("a100-80g-dgx");
        const CostModel model(g, parseMesh("1", hw), hw);
        const OpCost& c = model.opCost(0, 0);
        QVERIFY(near(c.optimizerSeconds, 4096.0 * 4096 * 46 / (2039e9 * 0.88), 1e-9));
        CostSettings infer;
        infer.training = false;
        QCOMPARE(CostModel(g, parseMesh("1", hw), hw, infer).opCost(0, 0).optimizerSeconds, 0.0);
    }

    // Data-parallel gradients in buckets: a weight of 1 MiB of gradient in a 25 MiB bucket pays
    // 1/25 of the bucket's all-reduce (2*7/8 * 25 MiB / 235 GB/s + 14 * 5 us), not a whole
    // latency-bound collective of its own; overlapped, it hides under the op's backward pass.
    void gradientBuckets()
    {
        Graph g;
        const TensorId x = g.addTensor("x", {8192, 512}, DType::BF16, TensorRole::Input);
        const TensorId w = g.addTensor("w", {512, 1024}, DType::BF16, TensorRole::Weight); // 1 MiB of bf16 gradient
        const TensorId y = g.addTensor("y", {8192, 1024}, DType::BF16, TensorRole::Output);
        g.addOp("fc", OpKind::Linear, {x, w}, {y}, "bk,kf->bf");
        const Hardware hw = loadHardware("a100-80g-dgx");
        CostSettings s;
        s.overlapGradientReduction = false;
        const CostModel m(g, parseMesh("8", hw), hw, s);
        const int dp = m.findStrategy(0, parseStrategy("b=x", m.signature(0), m.mesh()));
        const double bucket = 25.0 * 1048576;
        const double expected = 1048576.0 / bucket * (1.75 * bucket / 235e9 + 14 * 5e-6);
        QVERIFY2(near(m.opCost(0, dp).commSeconds, expected, 1e-9), qPrintable(QString::number(m.opCost(0, dp).commSeconds)));
        QCOMPARE(m.opCost(0, dp).hiddenCommSeconds, 0.0);
        s.overlapGradientReduction = true;
        const CostModel o(g, parseMesh("8", hw), hw, s);
        const OpCost& c = o.opCost(0, dp);
        QVERIFY(c.computeSeconds - c.forwardSeconds - c.optimizerSeconds > expected); // the backward covers it
        QCOMPARE(c.hiddenCommSeconds, c.commSeconds);
        QVERIFY(near(c.seconds(), c.computeSeconds, 1e-12));
    }

    // Fused kernels: dropout hands its output to the residual add alone, and backward keeps
    // neither, so the pair streams x, the mask and the sum, never the dropped tensor. Unfused,
    // dropout writes it and the add reads it back: 2 x 2 bytes per element more.
    void fusedChainsSkipTheirIntermediate()
    {
        Graph g;
        const std::vector<std::int64_t> shape{4, 2048, 6144};
        const TensorId x = g.addTensor("x", shape, DType::BF16, TensorRole::Input);
        const TensorId r = g.addTensor("r", shape, DType::BF16, TensorRole::Input);
        const TensorId d = g.addTensor("d", shape, DType::BF16, TensorRole::Activation);
        const TensorId y = g.addTensor("y", shape, DType::BF16, TensorRole::Output);
        g.addOp("dropout", OpKind::Dropout, {x}, {d});
        g.addOp("add", OpKind::Add, {d, r}, {y});
        const Hardware hw = loadHardware("a100-80g-dgx");
        CostSettings s;
        s.training = false;
        s.readerGroupOfOp = {0, 0}; // one block instance, as the planner's fold gives it
        const CostModel fused(g, parseMesh("1", hw), hw, s);
        s.fusedKernels = false;
        const CostModel apart(g, parseMesh("1", hw), hw, s);
        const double elems = 4.0 * 2048 * 6144;
        const double saved = 2 * 2 * elems / (2039e9 * 0.88);
        const double f = fused.opCost(0, 0).seconds() + fused.opCost(1, 0).seconds();
        const double a = apart.opCost(0, 0).seconds() + apart.opCost(1, 0).seconds();
        QVERIFY2(near(a - f, saved, 1e-9), qPrintable(QStringLiteral("%1 vs %2").arg(a - f).arg(saved)));
    }

    // ZeRO's Table 1 (Rajbhandari et al. 2020; ../shared/reference.md): 7.5B parameters, data
    // parallel over Nd = 64, mixed-precision Adam (2 + 2 + 12 bytes per parameter): 120 / 31.4 /
    // 16.6 / 1.88 GB per device for stages 0-3 (16 psi; 4 psi + 12 psi / 64; 2 psi + 14 psi / 64;
    // 16 psi / 64). Communication per device and step: 2 psi for stages 0-2 (an all-reduce, or a
    // reduce-scatter and an all-gather), 3 psi for stage 3 (parameters gathered for forward and
    // again for backward, gradients scattered), each at the ring's (g - 1) / g, g = 64, in
    // bf16; with 4 micro-batches stage 3 gathers and scatters once per micro-batch (12 psi) and
    // stage 1 still reduces once. One 75000 x 100000 linear stands for the 7.5B parameters.
    void zeroStagesAsInTheZeroPaper_data()
    {
        QTest::addColumn<int>("stage");
        QTest::addColumn<int>("microBatch"); ///< samples per micro-batch; 0: the local batch at once
        QTest::addColumn<double>("gigabytes");
        QTest::addColumn<double>("psiMoved");
        QTest::newRow("stage 0") << 0 << 0 << 120.0 << 2.0;
        QTest::newRow("stage 1") << 1 << 0 << 31.40625 << 2.0;
        QTest::newRow("stage 2") << 2 << 0 << 16.640625 << 2.0;
        QTest::newRow("stage 3") << 3 << 0 << 1.875 << 3.0;
        QTest::newRow("stage 3, 4 micro-batches") << 3 << 1 << 1.875 << 12.0;
        QTest::newRow("stage 1, 4 micro-batches") << 1 << 1 << 31.40625 << 2.0;
    }

    void zeroStagesAsInTheZeroPaper()
    {
        QFETCH(int, stage);
        QFETCH(int, microBatch);
        QFETCH(double, gigabytes);
        QFETCH(double, psiMoved);
        Graph g;
        // 256 samples: 4 per device, so micro-batches of 1 make 4 of them.
        const TensorId x = g.addTensor("x", {256, 75000}, DType::BF16, TensorRole::Input);
        const TensorId w = g.addTensor("w", {75000, 100000}, DType::BF16, TensorRole::Weight);
        const TensorId y = g.addTensor("y", {256, 100000}, DType::BF16, TensorRole::Output);
        g.addOp("fc", OpKind::Linear, {x, w}, {y}, "bk,kf->bf");
        const Hardware hw = loadHardware("a100-80g-dgx");
        CostSettings s;
        s.zeroStage = stage;
        s.microBatch = microBatch;
        const CostModel model(g, parseMesh("64", hw), hw, s);
        const int dp = dataParallelAssignment(model)[0];
        const OpCost& c = model.opCost(0, dp);
        const double psi = 7.5e9;
        QVERIFY2(near(c.paramBytes + c.gradBytes + c.optimizerBytes, gigabytes * 1e9, 1e-12),
                 qPrintable(QString::number((c.paramBytes + c.gradBytes + c.optimizerBytes) / 1e9, 'g', 10)));
        double moved = 0;
        for (const auto& call : c.collectives)
            moved += call.bytes * (call.kind == CollectiveKind::AllReduce ? 2.0 : 1.0) * 63 / 64;
        QVERIFY2(near(moved, psiMoved * psi * 2 * 63 / 64, 1e-12), qPrintable(QString::number(moved / (2 * psi), 'g', 10)));
        // The optimizer steps its shard: 1/64 of the parameters from stage 1 on.
        const CostModel stageZero(g, parseMesh("64", hw), hw);
        const OpCost& replicated = stageZero.opCost(0, dp);
        QVERIFY(near(c.optimizerSeconds, replicated.optimizerSeconds / (stage >= 1 ? 64 : 1), 1e-12));
    }

    // The loss without a fused kernel (the default, as Megatron-LM, torchtitan and Transformers
    // run it): 38 bytes per logit forward (cast 2+4, max 4, shift 4+4, exp 4+4, sum 4, divide
    // 4+4), 14 backward (scale 4+4, cast back 4+2), and the fp32 softmax kept (4 bytes). Logits
    // of 8 x 1024 x 51200 = 419.4M on one A100 80GB at 88% of 2039 GB/s. Fused, it reads the
    // logits once and keeps nothing of its own.
    void unfusedCrossEntropyStreamsFp32Passes()
    {
        Graph g;
        const TensorId logits = g.addTensor("logits", {8, 1024, 51200}, DType::BF16, TensorRole::Input);
        const TensorId labels = g.addTensor("labels", {8, 1024}, DType::I64, TensorRole::Input);
        const TensorId loss = g.addTensor("loss", {}, DType::F32, TensorRole::Output);
        g.addOp("loss", OpKind::CrossEntropy, {logits, labels}, {loss});
        const Hardware hw = loadHardware("a100-80g-dgx");
        const double elems = 8.0 * 1024 * 51200, bw = 2039e9 * 0.88;
        const CostModel unfused(g, parseMesh("1", hw), hw);
        const OpCost& u = unfused.opCost(0, 0);
        QVERIFY(near(u.forwardSeconds, elems * 38 / bw, 1e-9));
        QVERIFY(near(u.computeSeconds, elems * (38 + 14) / bw, 1e-9));
        QVERIFY(near(u.activationBytes, elems * 4, 1e-12));
        CostSettings s;
        s.fusedCrossEntropy = true;
        const CostModel fused(g, parseMesh("1", hw), hw, s);
        const OpCost& f = fused.opCost(0, 0);
        QVERIFY(f.computeSeconds < u.computeSeconds / 5);
        QCOMPARE(f.activationBytes, 0.0);
    }

    // FlashAttention keeps no s x s tensor: the 22B layer on TP 8 without recomputation keeps
    // what selective recomputation keeps, s b h (10 + 24/t) (Korthikanti et al.), and its
    // scores' backward pays the scores' forward once more inside the kernel.
    void flashAttentionKeepsNoScores()
    {
        const Graph g = gpt22b(3);
        const Hardware hw = loadHardware("a100-80g-dgx");
        CostSettings s;
        s.flashAttention = true;
        const CostModel m(g, parseMesh("8", hw), hw, s);
        const auto plan = megatronAssignment(m);
        const double t = 8, sbh = 2048.0 * 4 * 6144;
        QVERIFY(near(layerActivation(m, plan, Recompute::None), sbh * (10 + 24 / t), 0.01));
        CostSettings plain;
        const CostModel p(g, parseMesh("8", hw), hw, plain);
        for (const auto& op : g.ops) {
            if (op.name != "layers.1/attn/scores") continue;
            const int st = plan[static_cast<size_t>(op.id)];
            const OpCost &fa = m.opCost(op.id, st), no = p.opCost(op.id, st);
            QVERIFY(near(fa.computeSeconds, no.computeSeconds + no.forwardSeconds, 1e-9));
        }
    }

    // Full recomputation runs the forward again, its collectives included: per layer of the
    // Megatron plan, the 2 forward all-reduces once more on top of the none plan's four.
    void fullRecomputeRepaysForwardCollectives()
    {
        const auto lm = gpt3(2, 8);
        const Hardware hw = loadHardware("a100-80g-dgx");
        const CostModel m(lm.graph, parseMesh("8", hw), hw);
        const auto plan = megatronAssignment(m);
        std::vector<Recompute> full(lm.graph.ops.size(), Recompute::Full);
        const Breakdown none = m.evaluate(plan), again = m.evaluate(plan, full, std::vector<double>(lm.graph.ops.size(), 0.0));
        double forward = 0;
        for (const auto& c : none.collectives)
            if (c.phase == Phase::Forward) forward += c.seconds;
        QVERIFY(forward > 0);
        QVERIFY2(near(again.commSeconds - none.commSeconds, forward, 1e-9),
                 qPrintable(QStringLiteral("%1 vs %2").arg(again.commSeconds - none.commSeconds).arg(forward)));
    }

    void settingsErrors()
    {
        const auto lm = gpt3(1, 8);
        const Hardware hw = loadHardware("a100-80g-dgx");
        CostSettings s;
        s.overlapChunks = 0;
        QVERIFY_THROWS_EXCEPTION(InputError, CostModel(lm.graph, parseMesh("8", hw), hw, s));
        const CostModel m(lm.graph, parseMesh("8", hw), hw);
        QVERIFY_THROWS_EXCEPTION(InputError, m.evaluate({0, 1}));
        std::vector<int> bad(lm.graph.ops.size(), 0);
        bad[3] = 100000;
        try {
            m.evaluate(bad);
            QFAIL("expected InputError");
        } catch (const InputError& e) {
            QVERIFY2(QString(e.what()).contains(QString::fromStdString(lm.graph.op(3).name)), e.what());
        }
    }
};

QTEST_APPLESS_MAIN(TestCost)
#include "tst_cost.moc"
