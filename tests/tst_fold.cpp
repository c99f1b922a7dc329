// Folding: block classes, runs and siblings of the built-in models; robustness to names (random,
// empty); odd layers and distinct ops split classes; random stacked graphs fold back exactly;
// checkFold accepts every fold and rejects broken ones; `tpplan fold --json`.
#include <QtTest>

#include <algorithm>
#include <numeric>
#include <random>
#include <set>
#include <sstream>

#include "cli.h"
#include "fold/fold.h"
#include "graph/validate.h"
#include "import/catalog.h"
#include "util/error.h"

using namespace tp;

namespace {

Graph loadSmall(const std::string& name, std::vector<std::string> overrides = {})
{
    ModelOptions options;
    options.batch = 1;
    options.overrides = std::move(overrides);
    return loadModel(name, options).graph;
}

OpId opNamed(const Graph& graph, const std::string& name)
{
    for (const auto& op : graph.ops)
        if (op.name == name) return op.id;
    throw std::runtime_error("no op " + name);
}

bool isSiblingClass(const FoldedGraph& folded, int classId)
{
    for (const auto& group : folded.siblings)
        if (group.classId == classId) return true;
    return false;
}

// Instance counts of the top-level classes with more than one instance, largest first.
QList<int> repeatedCounts(const FoldedGraph& folded)
{
    QList<int> counts;
    for (const auto& block : folded.classes)
        if (block.instances.size() > 1 && !isSiblingClass(folded, block.id)) counts << static_cast<int>(block.instances.size());
    std::sort(counts.begin(), counts.end(), std::greater<>());
    return counts;
}

std::vector<Run> runsOf(const FoldedGraph& folded, int classId)
{
    std::vector<Run> runs;
    for (const auto& run : folded.runs)
        if (run.classId == classId) runs.push_back(run);
    return runs;
}

std::string randomName(std::mt19937& rng)
{
    std::string name;
    for (int i = 0; i < 8; ++i) name.push_back(static_cast<char>('a' + rng() % 26));
    return name;
}

// Replaces every op and tensor name: random strings (fixed seed) or nothing at all.
void rename(Graph& graph, bool empty, unsigned seed)
{
    std::mt19937 rng(seed);
    for (auto& op : graph.ops) op.name = empty ? std::string() : randomName(rng);
    for (auto& tensor : graph.tensors) tensor.name = empty ? std::string() : randomName(rng);
}

// GPT-2 with 12 layers whose layer 6 has an FFN of 2h instead of 4h.
Graph gptWithOddLayer()
{
    Graph graph = loadSmall("gpt2", {"layers=12", "seq=16"});
    const std::int64_t h = 768, narrow = 2 * h;
    const Op& fc1 = graph.op(opNamed(graph, "layers.6/mlp/fc1"));
    const Op& gelu = graph.op(opNamed(graph, "layers.6/mlp/gelu"));
    const Op& fc2 = graph.op(opNamed(graph, "layers.6/mlp/fc2"));
    graph.tensors[fc1.inputs[1]].shape = {h, narrow};
    graph.tensors[fc1.inputs[2]].shape = {narrow};
    graph.tensors[fc1.outputs[0]].shape.back() = narrow;
    graph.tensors[gelu.outputs[0]].shape.back() = narrow;
    graph.tensors[fc2.inputs[1]].shape = {narrow, h};
    validateGraph(graph);
    return graph;
}

// A random stack: an embedding, then for each of 1-3 random blocks 2-5 chained copies, then a
// head. Each block starts with a linear to a width no other block uses (so the block is the
// smallest repeating unit) and ends with a residual add onto its input.
struct RandomStack {
    Graph graph;
    std::vector<std::vector<std::vector<OpId>>> copies; // per block, per copy: its ops
};

RandomStack randomStack(unsigned seed)
{
    std::mt19937 rng(seed);
    auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    RandomStack stack;
    Graph& g = stack.graph;
    const std::int64_t b = 2, s = pick(2, 5), h = 8 * pick(1, 4), vocab = 50;
    auto name = [&] { return randomName(rng); };
    auto addOp = [&](OpKind kind, std::vector<TensorId> inputs, std::vector<std::int64_t> shape, std::string eq = {}) {
        const TensorId out = g.addTensor(name(), std::move(shape), DType::BF16, TensorRole::Activation);
        g.addOp(name(), kind, std::move(inputs), {out}, std::move(eq));
        return out;
    };
    auto weight = [&](std::vector<std::int64_t> shape) {
        return g.addTensor(name(), std::move(shape), DType::BF16, TensorRole::Weight);
    };
    auto linear = [&](TensorId x, std::int64_t out) {
        const std::int64_t in = g.tensor(x).shape.back();
        return addOp(OpKind::Linear, {x, weight({in, out})}, {b, s, out}, "bsh,hf->bsf");
    };

    const TensorId tokens = g.addTensor(name(), {b, s}, DType::I64, TensorRole::Input);
    TensorId x = addOp(OpKind::Embedding, {tokens, weight({vocab, h})}, {b, s, h}, "bs,vh->bsh");

    struct Step {
        int kind;
        int a;
        int c;
        std::int64_t width;
        OpKind op;
    };
    const int blocks = pick(1, 3);
    for (int j = 0; j < blocks; ++j) {
        // The recipe, replayed for every copy. Values: 0 is the block input, 1 the first linear.
        std::vector<Step> recipe;
        std::vector<std::int64_t> widthOf{h, 3 + 8 * (j + 1)};
        const int steps = pick(1, 6);
        for (int k = 0; k < steps; ++k) {
            Step step{pick(0, 4), pick(0, static_cast<int>(widthOf.size()) - 1), 0, 0, OpKind::ReLU};
            const std::int64_t w = widthOf[step.a];
            switch (step.kind) {
            case 0: {
                const OpKind unary[] = {OpKind::GeLU, OpKind::ReLU, OpKind::Tanh, OpKind::Dropout, OpKind::Sigmoid};
                step.op = unary[pick(0, 4)];
                break;
            }
            case 2:
                step.width = pick(0, 1) ? 5 : 7;
                break;
            case 3: {
                std::vector<int> same;
                for (int v = 0; v < static_cast<int>(widthOf.size()); ++v)
                    if (widthOf[v] == w) same.push_back(v);
                step.c = same[static_cast<size_t>(pick(0, static_cast<int>(same.size()) - 1))];
                step.op = pick(0, 1) ? OpKind::Add : OpKind::Mul;
                break;
            }
            default:
                break;
            }
            widthOf.push_back(step.kind == 2 ? step.width : w);
            recipe.push_back(step);
        }
        const int copies = pick(2, 5);
        stack.copies.emplace_back();
        for (int c = 0; c < copies; ++c) {
            const OpId first = static_cast<OpId>(g.ops.size());
            std::vector<TensorId> values{x, linear(x, widthOf[1])};
            for (const Step& step : recipe) {
                const TensorId a = values[static_cast<size_t>(step.a)];
                const auto shape = g.tensor(a).shape;
                switch (step.kind) {
                case 0:
                    values.push_back(addOp(step.op, {a}, shape));
                    break;
                case 1:
                    values.push_back(addOp(OpKind::LayerNorm, {a, weight({shape.back()}), weight({shape.back()})}, shape));
                    break;
                case 2:
                    values.push_back(linear(a, step.width));
                    break;
                case 3:
                    values.push_back(addOp(step.op, {a, values[static_cast<size_t>(step.c)]}, shape));
                    break;
                default:
                    values.push_back(addOp(OpKind::Softmax, {a}, shape));
                    break;
                }
            }
            x = addOp(OpKind::Add, {x, linear(values.back(), h)}, {b, s, h});
            std::vector<OpId> ops(static_cast<size_t>(static_cast<OpId>(g.ops.size()) - first));
            std::iota(ops.begin(), ops.end(), first);
            stack.copies.back().push_back(std::move(ops));
        }
    }
    const TensorId normed = addOp(OpKind::LayerNorm, {x, weight({h}), weight({h})}, {b, s, h});
    const TensorId logits = linear(normed, vocab);
    const TensorId labels = g.addTensor(name(), {b, s}, DType::I64, TensorRole::Input);
    const TensorId loss = addOp(OpKind::CrossEntropy, {logits, labels}, {}, "bsv,bs->");
    g.tensors[loss].role = TensorRole::Output;
    return stack;
}

// MoE layers built by hand: router, dispatch to E experts (linear, ReLU, linear), combine, residual.
Graph handMoe(int layers, int experts)
{
    Graph g;
    const std::int64_t b = 1, s = 4, h = 16, f = 32, c = 2;
    TensorId x = g.addTensor("x", {b, s, h}, DType::BF16, TensorRole::Input);
    for (int l = 0; l < layers; ++l) {
        const std::string p = "l" + std::to_string(l) + "/";
        auto act = [&](const std::string& n, std::vector<std::int64_t> shape) {
            return g.addTensor(p + n, std::move(shape), DType::BF16, TensorRole::Activation);
        };
        auto w = [&](const std::string& n, std::vector<std::int64_t> shape) {
            return g.addTensor(p + n, std::move(shape), DType::BF16, TensorRole::Weight);
        };
        const TensorId logits = act("logits", {b, s, experts});
        g.addOp(p + "router", OpKind::Linear, {x, w("router.w", {h, experts})}, {logits}, "bsh,he->bse");
        const TensorId probs = act("probs", {b, s, experts});
        g.addOp(p + "softmax", OpKind::Softmax, {logits}, {probs});
        std::vector<TensorId> slices;
        std::string eq;
        for (int e = 0; e < experts; ++e) {
            slices.push_back(act("slice" + std::to_string(e), {b, c, h}));
            eq += (e ? "," : "") + std::string("bch");
        }
        g.addOp(p + "dispatch", OpKind::Dispatch, {x, probs}, slices, "bsh,bse->" + eq);
        std::vector<TensorId> outs;
        for (int e = 0; e < experts; ++e) {
            const std::string q = "e" + std::to_string(e) + "/";
            const TensorId up = act(q + "up", {b, c, f}), r = act(q + "relu", {b, c, f}), down = act(q + "down", {b, c, h});
            g.addOp(p + q + "up", OpKind::Linear, {slices[e], w(q + "up.w", {h, f})}, {up}, "bch,hf->bcf");
            g.addOp(p + q + "relu", OpKind::ReLU, {up}, {r});
            g.addOp(p + q + "down", OpKind::Linear, {r, w(q + "down.w", {f, h})}, {down}, "bcf,fh->bch");
            outs.push_back(down);
        }
        outs.push_back(probs);
        const TensorId combined = act("combined", {b, s, h});
        g.addOp(p + "combine", OpKind::Combine, outs, {combined}, eq + ",bse->bsh");
        const TensorId next = act("residual", {b, s, h});
        g.addOp(p + "residual", OpKind::Add, {x, combined}, {next});
        x = next;
    }
    g.tensors[x].role = TensorRole::Output;
    return g;
}

} // namespace

class TestFold : public QObject {
    Q_OBJECT
private slots:
    void builtinModels_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<QList<int>>("repeated"); // instances of each repeated top-level class
        QTest::addColumn<int>("siblingGroups");
        QTest::addColumn<int>("siblingsPerGroup");
        // 96 layers; embedding and head are singletons.
        QTest::newRow("gpt3-175b") << "gpt3-175b" << QList<int>{96} << 0 << 0;
        QTest::newRow("llama2-70b") << "llama2-70b" << QList<int>{80} << 0 << 0;
        QTest::newRow("bert-large") << "bert-large" << QList<int>{24} << 0 << 0;
        // Encoder and decoder stacks are two classes.
        QTest::newRow("t5-3b") << "t5-3b" << QList<int>{24, 24} << 0 << 0;
        // Identity blocks per stage: 3-1, 4-1, 6-1, 3-1 (the first block of each stage downsamples).
        QTest::newRow("resnet50") << "resnet50" << QList<int>{5, 3, 2, 2} << 0 << 0;
        // 12 encoder + 12 decoder layers, every other one MoE: 6 + 6 layer pairs; the experts are
        // one op per projection with an expert loop, so no sibling branches.
        QTest::newRow("switch-base-8") << "switch-base-8" << QList<int>{6, 6} << 0 << 0;
        // Every layer routes: one class of 32.
        QTest::newRow("mixtral-8x7b") << "mixtral-8x7b" << QList<int>{32} << 0 << 0;
        // DeepSeek-V3: the 3 dense layers and the 58 MoE layers are two classes.
        QTest::newRow("deepseek-v3") << "deepseek-v3" << QList<int>{58, 3} << 0 << 0;
    }

    void builtinModels()
    {
        QFETCH(QString, model);
        QFETCH(QList<int>, repeated);
        QFETCH(int, siblingGroups);
        QFETCH(int, siblingsPerGroup);
        const Graph graph = loadSmall(model.toStdString());
        const FoldedGraph folded = foldGraph(graph);
        checkFold(graph, folded);
        QCOMPARE(repeatedCounts(folded), repeated);
        // Every repeated top-level class is one run over all its instances.
        for (const auto& block : folded.classes) {
            if (block.instances.size() < 2 || isSiblingClass(folded, block.id)) continue;
            const auto runs = runsOf(folded, block.id);
            QCOMPARE(runs.size(), size_t{1});
            QCOMPARE(runs[0].count, static_cast<int>(block.instances.size()));
        }
        QCOMPARE(static_cast<int>(folded.siblings.size()), siblingGroups);
        for (const auto& group : folded.siblings) QCOMPARE(static_cast<int>(group.instances.size()), siblingsPerGroup);
    }

    // Layers of different kinds in a repeating pattern fold to one class per kind, not one class
    // per period: Gemma-3's five local (windowed) layers to one global, and Gemma-2's alternation.
    // The period is found whole (six layers) and split at its layer scopes (fold.cpp, unitPieces);
    // the pattern's partial period at the end (Gemma-3 27B: 62 = 5 + 9 * 6 + 3 layers) splits too.
    void layerKindsAreClassesOfTheirOwn_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<QStringList>("overrides");
        QTest::addColumn<QList<int>>("repeated");
        QTest::addColumn<QList<int>>("localRuns"); // the local class's runs, in order
        // Layers 5, 11, ..., 59 global (every sixth): 10 global; 52 local in runs of 5 and a last 2.
        QTest::newRow("gemma3-27b") << "gemma3-27b" << QStringList{"seq=2048"} << QList<int>{52, 10}
                                    << QList<int>{5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 2};
        // Every other layer global, layer 0 local: 21 and 21 alternating, in runs of one.
        QTest::newRow("gemma2-like") << "gemma3-27b" << QStringList{"seq=2048", "layers=42", "global_every=2"}
                                     << QList<int>{21, 21} << QList<int>(21, 1);
        // A window wider than the sequence is still a different layer kind (its attrs differ).
        QTest::newRow("seven layers, one global") << "gemma3-27b" << QStringList{"seq=2048", "layers=7"} << QList<int>{6}
                                                  << QList<int>{5, 1};
    }

    void layerKindsAreClassesOfTheirOwn()
    {
        QFETCH(QString, model);
        QFETCH(QStringList, overrides);
        QFETCH(QList<int>, repeated);
        QFETCH(QList<int>, localRuns);
        std::vector<std::string> sets;
        for (const auto& o : overrides) sets.push_back(o.toStdString());
        const Graph graph = loadSmall(model.toStdString(), sets);
        const FoldedGraph folded = foldGraph(graph);
        checkFold(graph, folded);
        QCOMPARE(repeatedCounts(folded), repeated);
        // Each instance is one whole layer: its ops share one top-level scope.
        for (const auto& block : folded.classes)
            for (const auto& instance : block.instances) {
                const std::string first = graph.op(instance.ops.front()).name;
                const std::string scope = first.substr(0, first.find('/'));
                for (OpId op : instance.ops)
                    QVERIFY2(graph.op(op).name.rfind(scope + "/", 0) == 0 || graph.op(op).name == scope,
                             graph.op(op).name.c_str());
            }
        // The local class is the one holding layer 0.
        const int local = folded.classOfOp[static_cast<size_t>(opNamed(graph, "layers.0/attn/q"))];
        QList<int> runs;
        for (const auto& run : runsOf(folded, local)) runs << run.count;
        QCOMPARE(runs, localRuns);
    }

    void resnetDownsamplingBlocks()
    {
        const Graph graph = loadSmall("resnet50");
        const FoldedGraph folded = foldGraph(graph);
        // Each stage's first block alone: 3 convs + 3 BNs + 2 ReLUs + shortcut conv + BN + add +
        // ReLU = 12 ops, a singleton class of its own.
        QStringList downsampling;
        for (const auto& block : folded.classes)
            if (block.instances.size() == 1 && block.opsPerInstance() == 12) downsampling << QString::fromStdString(block.label);
        QCOMPARE(downsampling, (QStringList{"layer1.0", "layer2.0", "layer3.0", "layer4.0"}));
    }

    void gptLayerIsTheResidualToResidualBlock()
    {
        const Graph graph = loadSmall("gpt3-175b");
        const FoldedGraph folded = foldGraph(graph);
        QCOMPARE(folded.classes.size(), size_t{3});
        const BlockClass& embed = folded.classes[0];
        const BlockClass& layer = folded.classes[1];
        const BlockClass& head = folded.classes[2];
        QCOMPARE(layer.label, std::string("layers.*"));
        QCOMPARE(embed.label, std::string("embed"));
        QCOMPARE(head.label, std::string("head"));
        // ln1, q/k/v with their head reshapes (6), scores, softmax, dropout, context, merge, out,
        // dropout, residual1, ln2, fc1, gelu, fc2, dropout, residual2: 21 ops.
        QCOMPARE(layer.opsPerInstance(), 21);
        QCOMPARE(graph.op(layer.instances[0].ops.front()).name, std::string("layers.0/ln1"));
        QCOMPARE(graph.op(layer.instances[0].ops.back()).name, std::string("layers.0/residual2"));
        QCOMPARE(graph.op(layer.instances[95].ops.front()).name, std::string("layers.95/ln1"));
        // Exactly the residual stream crosses each layer boundary.
        for (const auto& inst : layer.instances) {
            QCOMPARE(inst.inputs.size(), size_t{1});
            QCOMPARE(inst.outputs.size(), size_t{1});
        }
        QCOMPARE(embed.opsPerInstance(), 4); // wte, wpe, add, dropout
        QCOMPARE(head.opsPerInstance(), 3);  // ln_f, lm_head, loss
        // 4 + 96 * 21 + 3 = 2023 ops; searched 4 + 21 + 3 = 28; ratio 2023 / 28 = 72.25.
        QCOMPARE(folded.totalOps(), 2023);
        QCOMPARE(folded.searchedOps(), 28);
        QCOMPARE(folded.foldRatio(), 72.25);
        QCOMPARE(folded.runs.size(), size_t{3});
        QCOMPARE(folded.runs[1].count, 96);
        QCOMPARE(folded.sequence.size(), size_t{98});
    }

    void oddLayer_data()
    {
        QTest::addColumn<QString>("names");
        QTest::newRow("scoped names") << "scoped";
        QTest::newRow("random names") << "random";
        QTest::newRow("no names") << "empty";
    }

    void oddLayer()
    {
        QFETCH(QString, names);
        const Graph original = gptWithOddLayer();
        Graph graph = original;
        if (names != "scoped") rename(graph, names == "empty", 20240607);
        const FoldedGraph folded = foldGraph(graph);
        checkFold(graph, folded);
        // embed, layers 0-5 and 7-11 (one class), layer 6 (alone), head.
        QCOMPARE(folded.classes.size(), size_t{4});
        const int common = folded.classOfOp[opNamed(original, "layers.0/ln1")];
        const int odd = folded.classOfOp[opNamed(original, "layers.6/ln1")];
        QVERIFY(common != odd);
        QCOMPARE(folded.classes[common].instances.size(), size_t{11});
        QCOMPARE(folded.classes[odd].instances.size(), size_t{1});
        QCOMPARE(folded.classes[odd].opsPerInstance(), 21);
        const auto runs = runsOf(folded, common);
        QCOMPARE(runs.size(), size_t{2});
        QCOMPARE(runs[0].firstInstance, 0); // layers 0-5
        QCOMPARE(runs[0].count, 6);
        QCOMPARE(runs[1].firstInstance, 6); // layers 7-11
        QCOMPARE(runs[1].count, 5);
        // The renamed graphs fold exactly like the named one.
        const FoldedGraph reference = foldGraph(original);
        QCOMPARE(folded.classOfOp, reference.classOfOp);
        QCOMPARE(folded.instanceOfOp, reference.instanceOfOp);
        for (size_t c = 0; c < folded.classes.size(); ++c)
            for (size_t i = 0; i < folded.classes[c].instances.size(); ++i)
                QCOMPARE(folded.classes[c].instances[i].ops, reference.classes[c].instances[i].ops);
    }

    void randomStacks_data()
    {
        QTest::addColumn<unsigned>("seed");
        for (unsigned seed = 1; seed <= 300; ++seed) QTest::newRow(qPrintable(QString::number(seed))) << seed;
    }

    void randomStacks()
    {
        QFETCH(unsigned, seed);
        const RandomStack stack = randomStack(seed);
        validateGraph(stack.graph);
        const FoldedGraph folded = foldGraph(stack.graph);
        checkFold(stack.graph, folded);
        std::set<int> seenClasses;
        for (const auto& copies : stack.copies) {
            const int classId = folded.classOfOp[copies[0][0]];
            QVERIFY2(seenClasses.insert(classId).second, "two different blocks share a class");
            const BlockClass& block = folded.classes[classId];
            QCOMPARE(block.instances.size(), copies.size());
            for (size_t c = 0; c < copies.size(); ++c) QCOMPARE(block.instances[c].ops, copies[c]);
            const auto runs = runsOf(folded, classId);
            QCOMPARE(runs.size(), size_t{1});
            QCOMPARE(runs[0].count, static_cast<int>(copies.size()));
        }
    }

    void distinctOpSplitsItsInstance_data()
    {
        QTest::addColumn<int>("layer");
        QTest::addColumn<QList<int>>("runLengths"); // runs of the layer classes in order
        // 24 layers: marking layer L gives L + 1 + (23 - L).
        QTest::newRow("layer 17") << 17 << QList<int>{17, 1, 6};
        QTest::newRow("layer 0") << 0 << QList<int>{1, 23};
        QTest::newRow("layer 23") << 23 << QList<int>{23, 1};
    }

    void distinctOpSplitsItsInstance()
    {
        QFETCH(int, layer);
        QFETCH(QList<int>, runLengths);
        const Graph graph = loadSmall("gpt2", {"layers=24", "seq=16"});
        FoldOptions options;
        const OpId marked = opNamed(graph, "layers." + std::to_string(layer) + "/mlp/fc1");
        options.distinctOps.insert(marked);
        const FoldedGraph folded = foldGraph(graph, options);
        checkFold(graph, folded);
        const BlockClass& alone = folded.classes[folded.classOfOp[marked]];
        QVERIFY(alone.distinct);
        QCOMPARE(alone.instances.size(), size_t{1});
        QCOMPARE(graph.op(alone.instances[0].ops.front()).name, "layers." + std::to_string(layer) + "/ln1");
        QList<int> lengths;
        for (const auto& run : folded.runs)
            if (folded.classes[run.classId].opsPerInstance() == 21) lengths << run.count;
        QCOMPARE(lengths, runLengths);
    }

    void handBuiltExpertsAreSiblings()
    {
        const Graph graph = handMoe(3, 4);
        validateGraph(graph);
        const FoldedGraph folded = foldGraph(graph);
        checkFold(graph, folded);
        // Per layer: router, softmax, dispatch, combine, residual (5 ops) + 4 experts x 3 ops.
        QCOMPARE(folded.classes.size(), size_t{2});
        const BlockClass& layer = folded.classes[0];
        const BlockClass& expert = folded.classes[1];
        QCOMPARE(layer.opsPerInstance(), 5);
        QCOMPARE(layer.instances.size(), size_t{3});
        QCOMPARE(expert.opsPerInstance(), 3);
        QCOMPARE(expert.instances.size(), size_t{12});
        QCOMPARE(folded.siblings.size(), size_t{3});
        for (int l = 0; l < 3; ++l) {
            QCOMPARE(folded.siblings[l].parentClass, 0);
            QCOMPARE(folded.siblings[l].parentInstance, l);
            QCOMPARE(folded.siblings[l].instances, (std::vector<int>{4 * l, 4 * l + 1, 4 * l + 2, 4 * l + 3}));
        }
        QCOMPARE(folded.runs.size(), size_t{1});
        QCOMPARE(folded.runs[0].count, 3);
        QCOMPARE(expert.label, std::string("l*/e*"));
        // The layer's boundary: the residual in; each expert output back in; the residual out.
        QCOMPARE(layer.instances[0].inputs.size(), size_t{5});
        QCOMPARE(layer.instances[0].outputs.size(), size_t{5}); // 4 slices + the residual
    }

    void checkFoldOnEveryBuiltin()
    {
        for (const auto& name : builtinModelNames()) {
            const Graph graph = loadSmall(name);
            const FoldedGraph folded = foldGraph(graph);
            try {
                checkFold(graph, folded);
            } catch (const std::exception& e) {
                QFAIL(qPrintable(QString::fromStdString(name + ": " + e.what())));
            }
            QVERIFY2(folded.searchedOps() < folded.totalOps(), name.c_str());
        }
    }

    void checkFoldRejectsBrokenFolds_data()
    {
        QTest::addColumn<QString>("damage");
        QTest::newRow("op missing") << "drop-op";
        QTest::newRow("ops swapped in an instance") << "swap-ops";
        QTest::newRow("op table disagrees") << "table";
        QTest::newRow("run too short") << "run";
        QTest::newRow("inputs not canonical") << "inputs";
        QTest::newRow("instance of another shape") << "move-instance";
    }

    void checkFoldRejectsBrokenFolds()
    {
        QFETCH(QString, damage);
        const Graph graph = gptWithOddLayer();
        FoldedGraph folded = foldGraph(graph);
        checkFold(graph, folded);
        BlockClass& layer = folded.classes[1];
        if (damage == "drop-op")
            layer.instances[3].ops.pop_back();
        else if (damage == "swap-ops")
            std::swap(layer.instances[3].ops[1], layer.instances[3].ops[3]); // q and k
        else if (damage == "table")
            folded.instanceOfOp[layer.instances[2].ops[0]] = 3;
        else if (damage == "run")
            --folded.runs[1].count;
        else if (damage == "inputs")
            layer.instances[2].inputs.push_back(layer.instances[2].outputs[0]);
        else {
            // Layer 6 (the odd one) listed as an instance of the common layer class.
            const int odd = folded.classOfOp[opNamed(graph, "layers.6/ln1")];
            layer.instances.push_back(folded.classes[odd].instances[0]);
        }
        QVERIFY_THROWS_EXCEPTION(std::logic_error, checkFold(graph, folded));
    }

    void optionsAreChecked()
    {
        const Graph graph = handMoe(1, 2);
        FoldOptions options;
        options.distinctOps.insert(static_cast<OpId>(graph.ops.size()));
        QVERIFY_THROWS_EXCEPTION(InputError, foldGraph(graph, options));
        options.distinctOps.clear();
        options.refinementRounds = -1;
        QVERIFY_THROWS_EXCEPTION(InputError, foldGraph(graph, options));
        const FoldedGraph empty = foldGraph(Graph{});
        QCOMPARE(empty.classes.size(), size_t{0});
        QCOMPARE(empty.foldRatio(), 1.0);
    }

    void cliJson()
    {
        cli::Options options = cli::parseArguments({"fold", "gpt2", "--json"});
        std::ostringstream out;
        QCOMPARE(cli::runFold(options, out), 0);
        const auto doc = nlohmann::json::parse(out.str());
        // GPT-2: 4 + 12 * 21 + 3 = 259 ops; searched 28; ratio 259 / 28 = 9.25.
        QCOMPARE(doc["ops"].get<int>(), 259);
        QCOMPARE(doc["searched_ops"].get<int>(), 28);
        QCOMPARE(doc["fold_ratio"].get<double>(), 9.25);
        QVERIFY(doc["time_ms"].get<double>() >= 0.0);
        QCOMPARE(doc["block_classes"].size(), size_t{3});
        const auto& layer = doc["block_classes"][1];
        QCOMPARE(layer["id"].get<int>(), 1);
        QCOMPARE(layer["ops"].get<int>(), 21);
        QCOMPARE(layer["instances"].get<int>(), 12);
        QCOMPARE(layer["representative"][0].get<std::string>(), std::string("layers.0/ln1"));
        QCOMPARE(doc["runs"][1]["count"].get<int>(), 12);
        QVERIFY(doc["siblings"].is_array());

        cli::Options table = cli::parseArguments({"fold", "gpt2"});
        std::ostringstream text;
        QCOMPARE(cli::runFold(table, text), 0);
        QVERIFY(QString::fromStdString(text.str()).contains("layers.*"));
        QVERIFY_THROWS_EXCEPTION(cli::UsageError, cli::runFold(cli::parseArguments({"fold"}), text));
    }
};

QTEST_GUILESS_MAIN(TestFold)
#include "tst_fold.moc"
