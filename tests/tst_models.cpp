// Model builders and the Hugging Face config reader: parameter counts against published figures,
// FLOPs against closed forms, scope names, and the structural facts folding relies on.
#include <QtTest>

#include <cmath>
#include <set>

#include "graph/opkinds.h"
#include "graph/stats.h"
#include "graph/validate.h"
#include "import/catalog.h"
#include "import/hf_config.h"
#include "util/error.h"

using namespace tp;

namespace {

const QString kHfData = QStringLiteral(TP_TEST_DATA "/hf/");

LoadedModel load(const std::string& name, std::vector<std::string> overrides = {}, std::int64_t batch = 2)
{
    ModelOptions o;
    o.overrides = std::move(overrides);
    o.batch = batch;
    return loadModel(name, o);
}

const Op* findOp(const Graph& g, const std::string& name)
{
    for (const auto& op : g.ops)
        if (op.name == name) return &op;
    return nullptr;
}

double forwardFlopsOf(const Graph& g, std::initializer_list<OpKind> kinds)
{
    double total = 0;
    for (const auto& op : g.ops)
        if (std::find(kinds.begin(), kinds.end(), op.kind) != kinds.end())
            total += forwardFlops(opSignature(op, g), opKindInfo(op.kind));
    return total;
}

// What folding compares: per op, its kind, its name below the block prefix, its equation and
// the shapes of its operands, in op order. Two blocks with equal text are structurally identical.
QStringList blockStructure(const Graph& g, const std::string& prefix)
{
    QStringList lines;
    for (const auto& op : g.ops) {
        if (op.name.rfind(prefix, 0) != 0) continue;
        QString line =
            QString::fromStdString(std::string(opKindName(op.kind)) + " " + op.name.substr(prefix.size()) + " " + op.einsum);
        for (const auto* side : {&op.inputs, &op.outputs})
            for (auto t : *side) {
                line += " [";
                for (auto d : g.tensor(t).shape) line += QString::number(d) + ",";
                line += "]";
            }
        lines << line;
    }
    return lines;
}

std::int64_t paramsOutside(const Graph& g, std::initializer_list<const char*> scopes)
{
    std::int64_t n = 0;
    for (const auto& t : g.tensors) {
        if (t.role != TensorRole::Weight) continue;
        bool excluded = false;
        for (const char* s : scopes) excluded = excluded || t.name.rfind(s, 0) == 0;
        if (!excluded) n += t.numel();
    }
    return n;
}

} // namespace

class TestModels : public QObject {
    Q_OBJECT
private slots:
    void parameterCounts_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<double>("expected");
        QTest::addColumn<double>("tolerance"); // relative
        // GPT-2 small, exact: wte 50257*768 + wpe 1024*768 + 12*(12*768^2 + 13*768) + 2*768
        // = 38,597,376 + 786,432 + 85,054,464 + 1,536 = 124,439,808 (Hugging Face's count for gpt2).
        QTest::newRow("gpt2") << "gpt2" << 124439808.0 << 0.0;
        // GPT-3 (Brown et al. 2020, Table 2.1). 175B: 12*l*h^2 + 13*l*h + V*h + 2048*h + 2h ~ 174.6B
        // (the figure); the others as published, rounded to their printed digits.
        QTest::newRow("gpt3-175b") << "gpt3-175b" << 174.6e9 << 0.01;
        QTest::newRow("gpt3-13b") << "gpt3-13b" << 13.0e9 << 0.02;
        QTest::newRow("gpt3-6.7b") << "gpt3-6.7b" << 6.7e9 << 0.01;
        QTest::newRow("gpt3-2.7b") << "gpt3-2.7b" << 2.7e9 << 0.02;
        QTest::newRow("gpt3-1.3b") << "gpt3-1.3b" << 1.3e9 << 0.02;
        QTest::newRow("gpt3-760m") << "gpt3-760m" << 760e6 << 0.01;
        QTest::newRow("gpt3-350m") << "gpt3-350m" << 350e6 << 0.02;
        QTest::newRow("gpt3-125m") << "gpt3-125m" << 125e6 << 0.01;
        // LLaMA-2 7B exact: 2*32000*4096 (embed + untied head) + 32*(4*4096^2 + 3*4096*11008 + 2*4096)
        // + 4096 = 262,144,000 + 6,476,267,520 + 4,096 = 6,738,415,616 (Meta's 6.738B).
        QTest::newRow("llama2-7b") << "llama2-7b" << 6738415616.0 << 0.0;
        // LLaMA-2 13B: 2*32000*5120 + 40*(4*5120^2 + 3*5120*13824 + 2*5120) + 5120 = 13,015,864,320 (13.016B).
        QTest::newRow("llama2-13b") << "llama2-13b" << 13015864320.0 << 0.0;
        // LLaMA-2 70B (GQA, 8 kv heads of 128): 2*32000*8192 + 80*(2*8192^2 + 2*8192*1024
        // + 3*8192*28672 + 2*8192) + 8192 = 68,976,648,192 (68.977B; the 68.98B).
        QTest::newRow("llama2-70b") << "llama2-70b" << 68976648192.0 << 0.0;
        // LLaMA-3 (exact Hugging Face counts).
        QTest::newRow("llama3-8b") << "llama3-8b" << 8030261248.0 << 0.0;
        QTest::newRow("llama3-70b") << "llama3-70b" << 70553706496.0 << 0.0;
        // BERT with pre-training heads: BertModel (Hugging Face: 109,482,240) + MLM transform
        // 768^2+768 + LN 2*768 + decoder bias 30522 + NSP 768*2+2 = 110,106,428; within 1% of the
        // published BertModel figure (the BertModel part is checked exactly in bertModelPartIsExact).
        QTest::newRow("bert-base") << "bert-base" << 109482240.0 << 0.01;
        QTest::newRow("bert-large") << "bert-large" << 335141888.0 << 0.01; // the issue's ~335M
        // T5-Base: shared 32128*768 + 12 encoder layers (4*768^2 + 2*768*3072 + 2*768)
        // + 12 decoder layers (8*768^2 + 2*768*3072 + 3*768) + 2 bias tables 32*12 + 2 final norms
        // = 24,674,304 + 84,953,088 + 113,273,856 + 768 + 1,536 = 222,903,552 (~220M).
        QTest::newRow("t5-base") << "t5-base" << 222903552.0 << 0.0;
        // T5-3B (inner 32*128 = 4096): 32128*1024 + 24*(4*1024*4096 + 2*1024*16384 + 2*1024)
        // + 24*(8*1024*4096 + 2*1024*16384 + 3*1024) + 2*32*32 + 2*1024 = 2,851,598,336 (~2.85B).
        QTest::newRow("t5-3b") << "t5-3b" << 2.85e9 << 0.01;
        QTest::newRow("t5-11b") << "t5-11b" << 11.0e9 << 0.03; // published ~11B (11.3B exact by the same sum)
        // ViT (exact torchvision counts). B/16: conv 768*3*256 + 768, class 768,
        // position 197*768, 12*(4*(768^2+768) + 2*768*3072 + 3072 + 768 + 4*768), LN 2*768,
        // head 768*1000 + 1000 = 86,567,656.
        QTest::newRow("vit-b16") << "vit-b16" << 86567656.0 << 0.0;
        QTest::newRow("vit-h14") << "vit-h14" << 632045800.0 << 0.0;
        // ResNets: torchvision parameter counts, exact.
        QTest::newRow("resnet50") << "resnet50" << 25557032.0 << 0.0;
        QTest::newRow("resnet101") << "resnet101" << 44549160.0 << 0.0;
        QTest::newRow("resnet152") << "resnet152" << 60192808.0 << 0.0;
        QTest::newRow("wide-resnet50-2") << "wide-resnet50-2" << 68883240.0 << 0.0;
        QTest::newRow("wide-resnet101-2") << "wide-resnet101-2" << 126886696.0 << 0.0;
        // Llama 3.1 405B: 2*128256*16384 + 126*(2*16384^2 + 2*16384*1024 + 3*16384*53248
        // + 2*16384) + 16384 = 4,202,692,608 + 126*3,187,703,808 + 16,384 = 405,853,388,800
        // (Meta's 405.85B; the figure).
        QTest::newRow("llama3.1-405b") << "llama3.1-405b" << 405853388800.0 << 0.0;
        // Qwen3-32B: 2*151936*5120 + 64*(2*5120*8192 + 2*5120*1024 + 3*5120*25600 + 2*5120
        // + 2*128) + 5120 = 1,555,824,640 + 64*487,598,336 + 5120 = 32,762,123,264 (the Hub's 32.8B).
        QTest::newRow("qwen3-32b") << "qwen3-32b" << 32762123264.0 << 0.0;
        // Mixtral 8x7B: as the mixtral-8x7b row of huggingFaceConfigs, 46,702,792,704.
        QTest::newRow("mixtral-8x7b") << "mixtral-8x7b" << 46702792704.0 << 0.0;
        // Qwen3-235B-A22B: 2*151936*4096 + 94*(4096*8192 + 2*4096*512 + 8192*4096 + 2*128
        // + 4096*128 + 128*3*4096*1536 + 2*4096) + 4096 = 1,244,659,712 + 94*2,487,755,008 + 4096
        // = 235,093,634,560 (the Hub's 235B).
        QTest::newRow("qwen3-235b-a22b") << "qwen3-235b-a22b" << 235093634560.0 << 0.0;
        // DeepSeek-V3: as the deepseek-v3 row of huggingFaceConfigs, 671,026,419,200.
        QTest::newRow("deepseek-v3") << "deepseek-v3" << 671026419200.0 << 0.0;
        // Gemma 3 27B's language model: as the gemma-3-27b row of huggingFaceConfigs, 27,009,346,304.
        QTest::newRow("gemma3-27b") << "gemma3-27b" << 27009346304.0 << 0.0;
        // Switch-Base-8: T5-Base (222,903,552) + 12 sparse FFNs, each 7 extra experts of
        // 2*768*3072 and a router 768*8: 12*(7*4,718,592 + 6,144) = 396,435,456; total
        // 619,339,008, "about 620M" (as published) within 2%.
        QTest::newRow("switch-base-8") << "switch-base-8" << 620e6 << 0.02;
    }

    void parameterCounts()
    {
        QFETCH(QString, model);
        QFETCH(double, expected);
        QFETCH(double, tolerance);
        const auto m = loadModel(model.toStdString());
        const double params = static_cast<double>(m.graph.parameterCount());
        QVERIFY2(std::abs(params - expected) <= tolerance * expected,
                 qPrintable(QStringLiteral("%1 params, expected %2").arg(params, 0, 'f', 0).arg(expected, 0, 'f', 0)));
    }

    void bertModelPartIsExact_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<qint64>("expected");
        // Hugging Face's BertModel (embeddings, encoder, pooler) without the pre-training heads.
        QTest::newRow("bert-base") << "bert-base" << qint64(109482240);
        QTest::newRow("bert-large") << "bert-large" << qint64(335141888);
    }

    void bertModelPartIsExact()
    {
        QFETCH(QString, model);
        QFETCH(qint64, expected);
        const auto m = load(model.toStdString());
        QCOMPARE(qint64(paramsOutside(m.graph, {"mlm/", "nsp/"})), expected);
    }

    void flopsOfGpt3MatchNarayanan()
    {
        // Model FLOPs of one training step, no recomputation:
        // 72*B*s*l*h^2*(1 + s/(6h) + V/(12*l*h)) (Narayanan et al. 2021 with 3 passes instead of 4).
        ModelOptions options;
        options.batch = 1536;
        const auto m = loadModel("gpt3-175b", options);
        const double B = 1536, s = 2048, l = 96, h = 12288, V = 50257;
        const double expected = 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
        const double flops = computeStats(m.graph).trainStepFlops;
        QVERIFY2(std::abs(flops / expected - 1) < 0.02,
                 qPrintable(QStringLiteral("%1 vs %2").arg(flops, 0, 'e', 4).arg(expected, 0, 'e', 4)));
    }

    void llamaMatmulFlops_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<double>("layers");
        QTest::addColumn<double>("hidden");
        QTest::addColumn<double>("vocab");
        QTest::newRow("llama2-7b") << "llama2-7b" << 32.0 << 4096.0 << 32000.0;
        QTest::newRow("llama2-70b (GQA)") << "llama2-70b" << 80.0 << 8192.0 << 32000.0;
        QTest::newRow("llama3-8b (GQA)") << "llama3-8b" << 32.0 << 4096.0 << 128256.0;
    }

    void llamaMatmulFlops()
    {
        // Forward matmul FLOPs = 2 * tokens * (matmul weights) + attention 4*b*s^2*h per layer
        // (scores and context, each 2*b*s*t*n*d with n*d = h; GQA shares k/v but not this work).
        // Matmul weights = params - embedding table (a lookup) - norm weights (2h per layer + h).
        QFETCH(QString, model);
        QFETCH(double, layers);
        QFETCH(double, hidden);
        QFETCH(double, vocab);
        const auto m = load(model.toStdString(), {"seq=1024"}, 2);
        const double b = 2, s = 1024, tokens = b * s;
        const double matmulWeights = static_cast<double>(m.graph.parameterCount()) - vocab * hidden - (2 * layers + 1) * hidden;
        const double expected = 2 * tokens * matmulWeights + 4 * b * s * s * hidden * layers;
        const double flops = forwardFlopsOf(m.graph, {OpKind::Linear, OpKind::BatchMatMul});
        QVERIFY2(std::abs(flops / expected - 1) < 1e-9,
                 qPrintable(QStringLiteral("%1 vs %2").arg(flops, 0, 'e', 6).arg(expected, 0, 'e', 6)));
        // And the rule of thumb: 2 * params * tokens, to within the attention and embedding share.
        const double rough = 2 * static_cast<double>(m.graph.parameterCount()) * tokens;
        QVERIFY(std::abs(flops / rough - 1) < 0.10);
    }

    void convNetFlops_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<double>("gmacs");
        QTest::addColumn<double>("tolerance");
        // torchvision docs / weight cards: multiply-adds of conv and fc layers per
        // 224x224 image. R50 and WRN-50-2 are [S]; R101, R152, WRN-101-2 [M], hence looser.
        QTest::newRow("resnet50") << "resnet50" << 4.09 << 0.02;
        QTest::newRow("wide-resnet50-2") << "wide-resnet50-2" << 11.40 << 0.02;
        QTest::newRow("resnet101") << "resnet101" << 7.80 << 0.03;
        QTest::newRow("resnet152") << "resnet152" << 11.51 << 0.03;
        QTest::newRow("wide-resnet101-2") << "wide-resnet101-2" << 22.75 << 0.03;
    }

    void convNetFlops()
    {
        QFETCH(QString, model);
        QFETCH(double, gmacs);
        QFETCH(double, tolerance);
        const auto m = load(model.toStdString(), {}, 1);
        const double macs = forwardFlopsOf(m.graph, {OpKind::Conv2d, OpKind::Linear}) / 2; // 2 FLOPs per MAC
        QVERIFY2(std::abs(macs / (gmacs * 1e9) - 1) < tolerance,
                 qPrintable(QStringLiteral("%1 GMACs, expected %2").arg(macs / 1e9).arg(gmacs)));
        // The whole forward pass adds BatchNorm, ReLU, pooling: a little more, not a lot.
        const double total = computeStats(m.graph).forwardFlops;
        QVERIFY(total > 2 * macs && total < 2 * macs * 1.05);
    }

    void everyBuiltinBuildsAndValidates()
    {
        const std::set<std::string> families = [] {
            std::set<std::string> names;
            for (const auto& f : modelFamilies()) names.insert(std::string(f.name));
            return names;
        }();
        std::set<std::string> used;
        for (const auto& name : builtinModelNames()) {
            const auto config = builtinModelConfig(name);
            QVERIFY2(config.contains("description") && config["description"].is_string(), name.c_str());
            QVERIFY2(config.contains("batch") && config["batch"].is_number_integer(), name.c_str());
            const auto m = loadModel(name); // default batch: shapes only, so this is fast
            validateGraph(m.graph);
            QVERIFY2(m.graph.ops.size() > 10, name.c_str());
            QCOMPARE(m.graph.tensor(m.graph.ops.front().inputs.front()).shape.front(), config["batch"].get<std::int64_t>());
            used.insert(config["family"].get<std::string>());
        }
        QCOMPARE(used, families); // every family has a built-in
    }

    void builtinNamesFromDesign()
    {
        // The built-in names `tpplan models` lists.
        for (const char* name :
             {"gpt2", "gpt3-1.3b", "gpt3-175b", "llama2-7b", "llama2-13b", "llama2-70b", "llama3-8b", "llama3-70b", "bert-base",
              "bert-large", "t5-base", "t5-3b", "t5-11b", "vit-b16", "vit-h14", "resnet50", "wide-resnet101-2", "switch-base-8"})
            QVERIFY2(isBuiltinModel(name), name);
    }

    void scopeNames_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<QStringList>("present");
        QTest::addColumn<QStringList>("absent");
        QTest::newRow("gpt2") << "gpt2" << QStringList{"layers.11/mlp/fc1", "layers.0/attn/scores", "head/lm_head"}
                              << QStringList{"layers.12/mlp/fc1"};
        QTest::newRow("llama2-7b") << "llama2-7b" << QStringList{"layers.31/attn/q",   "layers.0/mlp/gate", "layers.0/mlp/up",
                                                                 "layers.0/mlp/silu",  "layers.0/mlp/mul",  "layers.0/mlp/down",
                                                                 "layers.0/attn_norm", "head/lm_head"}
                                   << QStringList{"layers.32/attn/q", "layers.0/mlp/fc1"};
        QTest::newRow("bert-base") << "bert-base" << QStringList{"embed/token_type", "layers.11/ln2",  "pooler/tanh",
                                                                 "mlm/decoder",      "nsp/classifier", "loss"}
                                   << QStringList{"layers.12/ln2"};
        QTest::newRow("t5-base") << "t5-base"
                                 << QStringList{"encoder/position_bias",
                                                "decoder/position_bias",
                                                "encoder/layers.11/self_attn/position_bias",
                                                "decoder/layers.11/cross_attn/k",
                                                "decoder/layers.0/ffn/wi",
                                                "decoder/layers.0/ffn/relu",
                                                "decoder/head/lm_head"}
                                 << QStringList{"encoder/layers.0/cross_attn/q", "decoder/layers.0/cross_attn/position_bias"};
        QTest::newRow("switch-base-8") << "switch-base-8"
                                       << QStringList{"encoder/layers.3/moe/router",       "encoder/layers.3/moe/dispatch",
                                                      "encoder/layers.3/moe/experts/wi",   "decoder/layers.11/moe/experts/wo",
                                                      "decoder/layers.1/moe/combine",      "encoder/layers.2/ffn/wi"}
                                       << QStringList{"encoder/layers.2/moe/router", "encoder/layers.3/ffn/wi",
                                                      "encoder/layers.3/moe/experts.5/wi"};
        QTest::newRow("vit-b16") << "vit-b16"
                                 << QStringList{"embed/patch", "embed/class_token", "layers.11/attn/scores", "head/classifier",
                                                "head/loss"}
                                 << QStringList{"layers.12/attn/scores"};
        QTest::newRow("resnet50")
            << "resnet50"
            << QStringList{"conv1", "maxpool", "layer1.0/downsample.0", "layer3.5/conv2", "layer4.2/relu3", "avgpool", "fc"}
            << QStringList{"layer3.6/conv2", "layer1.1/downsample.0"};
    }

    void scopeNames()
    {
        QFETCH(QString, model);
        QFETCH(QStringList, present);
        QFETCH(QStringList, absent);
        const auto m = load(model.toStdString());
        for (const auto& name : present) QVERIFY2(findOp(m.graph, name.toStdString()), qPrintable(name));
        for (const auto& name : absent) QVERIFY2(!findOp(m.graph, name.toStdString()), qPrintable(name));
    }

    void layersOfAStackAreIdentical_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<QString>("stack"); // prefix before "layers.<i>/"
        QTest::addColumn<int>("layers");
        QTest::addColumn<int>("period"); // layers i and i+period are compared
        QTest::newRow("t5 encoder") << "t5-base"
                                    << "encoder/" << 12 << 1;
        QTest::newRow("t5 decoder") << "t5-base"
                                    << "decoder/" << 12 << 1;
        QTest::newRow("t5-3b decoder") << "t5-3b"
                                       << "decoder/" << 24 << 1;
        QTest::newRow("llama2-70b") << "llama2-70b"
                                    << "" << 80 << 1;
        QTest::newRow("bert-large") << "bert-large"
                                    << "" << 24 << 1;
        QTest::newRow("vit-h14") << "vit-h14"
                                 << "" << 32 << 1;
        // Switch alternates dense and sparse layers: equal with a period of two.
        QTest::newRow("switch encoder") << "switch-base-8"
                                        << "encoder/" << 12 << 2;
        QTest::newRow("switch decoder") << "switch-base-8"
                                        << "decoder/" << 12 << 2;
    }

    void layersOfAStackAreIdentical()
    {
        QFETCH(QString, model);
        QFETCH(QString, stack);
        QFETCH(int, layers);
        QFETCH(int, period);
        const auto m = load(model.toStdString());
        auto layer = [&](int i) { return blockStructure(m.graph, stack.toStdString() + "layers." + std::to_string(i) + "/"); };
        const QStringList first = layer(0);
        QVERIFY(first.size() > 8);
        for (int i = period; i < layers; ++i) QCOMPARE(layer(i), layer(i - period));
        QVERIFY(layer(layers).isEmpty());
        if (period == 2) QVERIFY(layer(0) != layer(1));
    }

    void t5PositionBiasIsComputedOncePerStack()
    {
        const auto m = load("t5-base");
        int tables = 0;
        for (const auto& op : m.graph.ops)
            if (op.kind == OpKind::Embedding && op.name.ends_with("position_bias")) ++tables;
        QCOMPARE(tables, 2); // encoder and decoder, not one per layer
        const Op* bias = findOp(m.graph, "encoder/position_bias");
        QVERIFY(bias);
        const auto consumers = m.graph.consumers()[static_cast<size_t>(bias->outputs[0])];
        QCOMPARE(int(consumers.size()), 12); // every encoder layer's self-attention
        // [heads, s, t] = [12, 512, 512] added to scores [b, 12, 512, 512].
        QCOMPARE(m.graph.tensor(bias->outputs[0]).shape, (std::vector<std::int64_t>{12, 512, 512}));
        const Op* cross = findOp(m.graph, "decoder/layers.0/cross_attn/scores");
        // Cross-attention: decoder queries (114) against encoder keys (512).
        QCOMPARE(m.graph.tensor(cross->outputs[0]).shape, (std::vector<std::int64_t>{2, 12, 114, 512}));
    }

    void tiedAndUntiedHeads_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<QString>("head");
        QTest::addColumn<QString>("embedding");
        QTest::addColumn<bool>("tied");
        QTest::newRow("gpt2 tied") << "gpt2"
                                   << "head/lm_head"
                                   << "embed/wte" << true;
        QTest::newRow("llama untied") << "llama2-7b"
                                      << "head/lm_head"
                                      << "embed/tokens" << false;
        QTest::newRow("bert decoder tied") << "bert-base"
                                           << "mlm/decoder"
                                           << "embed/word" << true;
        QTest::newRow("t5 tied") << "t5-base"
                                 << "decoder/head/lm_head"
                                 << "encoder/embed" << true;
    }

    void tiedAndUntiedHeads()
    {
        QFETCH(QString, model);
        QFETCH(QString, head);
        QFETCH(QString, embedding);
        QFETCH(bool, tied);
        const auto m = load(model.toStdString());
        const Op* h = findOp(m.graph, head.toStdString());
        const Op* e = findOp(m.graph, embedding.toStdString());
        QVERIFY(h && e);
        QCOMPARE(h->inputs[1] == e->inputs[1], tied);
    }

    void groupedQueryAttentionEinsums()
    {
        // LLaMA-2 70B: 64 query heads in 8 groups of 8 over 8 kv heads of 128.
        const auto m = load("llama2-70b", {"seq=256"});
        const Op* q = findOp(m.graph, "layers.0/attn/q_heads");
        QCOMPARE(q->einsum, std::string("bs(kgd)->bkgsd"));
        QCOMPARE(m.graph.tensor(q->outputs[0]).shape, (std::vector<std::int64_t>{2, 8, 8, 256, 128}));
        QCOMPARE(findOp(m.graph, "layers.0/attn/k_heads")->einsum, std::string("bs(kd)->bksd"));
        QCOMPARE(findOp(m.graph, "layers.0/attn/scores")->einsum, std::string("bkgsd,bktd->bkgst"));
        QCOMPARE(findOp(m.graph, "layers.0/attn/context")->einsum, std::string("bkgst,bktd->bkgsd"));
        // k projection is 8192 x (8*128) = 8,388,608 weights.
        const Op* k = findOp(m.graph, "layers.0/attn/k");
        QCOMPARE(m.graph.tensor(k->inputs[1]).numel(), std::int64_t{8388608});
        // Without grouping (LLaMA-2 7B) heads stay one loop.
        const auto dense = load("llama2-7b", {"seq=256"});
        QCOMPARE(findOp(dense.graph, "layers.0/attn/q_heads")->einsum, std::string("bs(nd)->bnsd"));
    }

    // Experts are one op per FFN Linear with an expert loop (GShard's einsum form,
    // core/models/blocks.h): dispatch [b, s, h] -> [b, e, c, h], the stacked expert weights
    // [e, h, f], combine back to [b, s, h].
    void switchDispatchAndCombine()
    {
        const auto m = load("switch-base-8");
        const Op* dispatch = findOp(m.graph, "encoder/layers.1/moe/dispatch");
        QVERIFY(dispatch);
        QCOMPARE(int(dispatch->outputs.size()), 1);
        // capacity = ceil(512 tokens * top-1 * 1.25 / 8 experts) = 80.
        QCOMPARE(m.graph.tensor(dispatch->outputs[0]).shape, (std::vector<std::int64_t>{2, 8, 80, 768}));
        const Op* wi = findOp(m.graph, "encoder/layers.1/moe/experts/wi");
        QVERIFY(wi);
        QCOMPARE(wi->einsum, std::string("bech,ehf->becf"));
        QCOMPARE(m.graph.tensor(wi->inputs[1]).shape, (std::vector<std::int64_t>{8, 768, 3072}));
        QCOMPARE(m.graph.tensor(wi->inputs[1]).role, TensorRole::Weight);
        const Op* combine = findOp(m.graph, "encoder/layers.1/moe/combine");
        QCOMPARE(int(combine->inputs.size()), 2); // the expert outputs and the router probabilities
        QCOMPARE(m.graph.tensor(combine->outputs[0]).shape, (std::vector<std::int64_t>{2, 512, 768}));
        for (const Op* op : {dispatch, combine}) {
            const Signature sig = opSignature(*op, m.graph);
            for (const auto& loop : sig.loops) {
                const bool splittable = loop.label == 'b' || loop.label == 'h';
                QVERIFY2((loop.role == DimRole::Parallel) == splittable, op->name.c_str());
                if (!splittable) QCOMPARE(loop.role, DimRole::Spatial); // tokens s, capacity c, experts e
            }
        }
        // Dispatch and combine move data at memory speed: no FLOPs of the one-hot einsum.
        QCOMPARE(forwardFlops(opSignature(*dispatch, m.graph), opKindInfo(OpKind::Dispatch)), 0.0);
    }

    // Decoder MoE layers (Mixtral, Qwen-MoE): capacity from top-k, the shared expert and its
    // gate, the dense first layers.
    void decoderExperts()
    {
        // Mixtral-8x7B at seq 256: capacity = ceil(256 tokens * top-2 * factor 1.0 / 8) = 64.
        const auto mixtral = loadModel((kHfData + "mixtral-8x7b.json").toStdString(), [] {
            ModelOptions o;
            o.seq = 256;
            return o;
        }());
        const Op* dispatch = findOp(mixtral.graph, "layers.31/moe/dispatch");
        QVERIFY(dispatch);
        QCOMPARE(mixtral.graph.tensor(dispatch->outputs[0]).shape, (std::vector<std::int64_t>{8, 8, 64, 4096}));
        QVERIFY(!findOp(mixtral.graph, "layers.0/mlp/up"));
        // Qwen1.5-MoE: 60 experts of 1408, top-4, a 5632-wide shared expert behind a sigmoid gate.
        const auto qwen = loadModel((kHfData + "qwen1.5-moe-a2.7b.json").toStdString(), [] {
            ModelOptions o;
            o.seq = 240;
            return o;
        }());
        // capacity = ceil(240 * 4 / 60) = 16
        QCOMPARE(qwen.graph.tensor(findOp(qwen.graph, "layers.0/moe/dispatch")->outputs[0]).shape,
                 (std::vector<std::int64_t>{8, 60, 16, 2048}));
        const Op* shared = findOp(qwen.graph, "layers.0/moe/shared_expert/up");
        QVERIFY(shared);
        QCOMPARE(qwen.graph.tensor(shared->inputs[1]).shape, (std::vector<std::int64_t>{2048, 5632}));
        QVERIFY(findOp(qwen.graph, "layers.0/moe/shared_gate"));
        // DeepSeek-V3: latent attention's low-rank projections, dense first layers, the shared
        // expert, the selection bias as the dispatch's third input.
        const auto deepseek = loadModel((kHfData + "deepseek-v3.json").toStdString(), [] {
            ModelOptions o;
            o.seq = 256;
            o.batch = 1;
            return o;
        }());
        auto weightShape = [&](const char* op, int input) {
            return deepseek.graph.tensor(findOp(deepseek.graph, op)->inputs[static_cast<size_t>(input)]).shape;
        };
        QCOMPARE(weightShape("layers.0/attn/q_a", 1), (std::vector<std::int64_t>{7168, 1536}));
        QCOMPARE(weightShape("layers.0/attn/q_b", 1), (std::vector<std::int64_t>{1536, 128 * 192}));
        QCOMPARE(weightShape("layers.0/attn/kv_a", 1), (std::vector<std::int64_t>{7168, 512 + 64}));
        QCOMPARE(weightShape("layers.0/attn/kv_b", 1), (std::vector<std::int64_t>{512, 128 * 256}));
        QCOMPARE(weightShape("layers.0/attn/out", 1), (std::vector<std::int64_t>{128 * 128, 7168}));
        QCOMPARE(findOp(deepseek.graph, "layers.0/attn/rope_scores")->einsum, std::string("bnsd,btd->bnst"));
        QVERIFY(findOp(deepseek.graph, "layers.2/mlp/up"));
        QVERIFY(!findOp(deepseek.graph, "layers.3/mlp/up"));
        QCOMPARE(weightShape("layers.3/moe/shared_expert/up", 1), (std::vector<std::int64_t>{7168, 2048}));
        QCOMPARE(weightShape("layers.3/moe/dispatch", 2), (std::vector<std::int64_t>{256}));
        QCOMPARE(weightShape("layers.60/moe/experts/gate_up", 1), (std::vector<std::int64_t>{256, 7168, 2, 2048}));
        QVERIFY(findOp(deepseek.graph, "layers.3/moe/router_sigmoid"));
        // dense_layers: the first k layers keep the dense MLP, the rest route.
        const auto mixed = load("llama3-8b", {"layers=4", "seq=128", "experts=4", "experts_per_token=2", "dense_layers=1"});
        QVERIFY(findOp(mixed.graph, "layers.0/mlp/up"));
        QVERIFY(!findOp(mixed.graph, "layers.0/moe/dispatch"));
        QVERIFY(findOp(mixed.graph, "layers.1/moe/dispatch"));
        QVERIFY(findOp(mixed.graph, "layers.3/moe/experts/down"));
    }

    void vitSequenceLengths_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<qint64>("seq");
        QTest::addColumn<qint64>("hidden");
        QTest::newRow("vit-b16") << "vit-b16" << qint64(197) << qint64(768);  // (224/16)^2 + 1
        QTest::newRow("vit-h14") << "vit-h14" << qint64(257) << qint64(1280); // (224/14)^2 + 1
    }

    void vitSequenceLengths()
    {
        QFETCH(QString, model);
        QFETCH(qint64, seq);
        QFETCH(qint64, hidden);
        const auto m = load(model.toStdString());
        const Op* join = findOp(m.graph, "embed/class_token");
        QCOMPARE(join->kind, OpKind::Concat);
        QCOMPARE(m.graph.tensor(join->outputs[0]).shape, (std::vector<std::int64_t>{2, seq, hidden}));
        const Op* classifier = findOp(m.graph, "head/classifier");
        QCOMPARE(m.graph.tensor(classifier->inputs[0]).shape, (std::vector<std::int64_t>{2, hidden}));
    }

    void resnetShapes()
    {
        const auto m = load("wide-resnet50-2");
        // Stage 4 of WRN-50-2: 2048 -> 1024 -> 1024 -> 2048 at 7x7 (torchvision).
        const Op* conv2 = findOp(m.graph, "layer4.2/conv2");
        QCOMPARE(m.graph.tensor(conv2->inputs[1]).shape, (std::vector<std::int64_t>{1024, 1024, 3, 3}));
        QCOMPARE(m.graph.tensor(conv2->outputs[0]).shape, (std::vector<std::int64_t>{2, 1024, 7, 7}));
        // v1.5: the first 3x3 of stage 2 strides 56 -> 28; its 1x1 before does not.
        const auto r = load("resnet50");
        QCOMPARE(r.graph.tensor(findOp(r.graph, "layer2.0/conv1")->outputs[0]).shape,
                 (std::vector<std::int64_t>{2, 128, 56, 56}));
        QCOMPARE(r.graph.tensor(findOp(r.graph, "layer2.0/conv2")->outputs[0]).shape,
                 (std::vector<std::int64_t>{2, 128, 28, 28}));
        const Signature sig = opSignature(*findOp(r.graph, "layer2.0/conv2"), r.graph);
        QCOMPARE(sig.loops[static_cast<size_t>(sig.loopIndex('h'))].role, DimRole::Spatial);
    }

    void huggingFaceConfigs_data()
    {
        QTest::addColumn<QString>("file");
        QTest::addColumn<QString>("family");
        QTest::addColumn<qint64>("params");
        // GPT-2 small: Hugging Face's count.
        QTest::newRow("gpt2") << "gpt2.json"
                              << "gpt" << qint64(124439808);
        // OPT-125m: embed 50272*768 + positions (2048+2)*768 + 12*(4*(768^2+768) + 2*768*3072 + 3072
        // + 768 + 4*768) + final LN 2*768 = 38,608,896 + 1,574,400 + 85,054,464 + 1,536 = 125,239,296.
        QTest::newRow("opt-125m") << "opt-125m.json"
                                  << "gpt" << qint64(125239296);
        QTest::newRow("llama-2-7b") << "llama-2-7b.json"
                                    << "llama" << qint64(6738415616); // Meta's 6.738B
        QTest::newRow("llama-3-8b") << "llama-3-8b.json"
                                    << "llama" << qint64(8030261248); // Hugging Face's count
        // Mistral 7B: 2*32000*4096 + 32*(2*4096^2 + 2*4096*1024 + 3*4096*14336 + 2*4096) + 4096
        // = 262,144,000 + 6,979,584,000 + 4,096 = 7,241,732,096.
        QTest::newRow("mistral-7b") << "mistral-7b.json"
                                    << "llama" << qint64(7241732096);
        // The families mapped onto the rotary decoder (core/import/hf_config.cpp). Per layer:
        // attention h*n*d + 2*h*kv*d + n*d*h (+ biases), MLP 3*h*f gated or 2*h*f (+ biases),
        // norms h each (LayerNorm 2h), q/k norms 2d per head or (n + kv)*d over the projection;
        // then the embedding V*h (twice untied) and the final norm. Where the Hub or the model
        // card publishes a total, it is the same integer.
        // Qwen2.5-0.5B (tied; q, k, v biases): 151936*896 + 24*(896*896+896 + 2*(896*128+128)
        // + 896*896 + 3*896*4864 + 2*896) + 896 = 136,134,656 + 24*14,912,384 + 896 = 494,032,768.
        QTest::newRow("qwen2.5-0.5b") << "qwen2.5-0.5b.json"
                                      << "llama" << qint64(494032768);
        // Qwen2.5-7B: 2*152064*3584 + 28*(3584*3584+3584 + 2*(3584*512+512) + 3584*3584
        // + 3*3584*18944 + 2*3584) + 3584 = 1,089,994,752 + 28*233,057,792 + 3584 = 7,615,616,512.
        QTest::newRow("qwen2.5-7b") << "qwen2.5-7b.json"
                                    << "llama" << qint64(7615616512);
        // Qwen3-8B (head_dim 128, per-head q/k norms): 2*151936*4096 + 36*(4096*4096 + 2*4096*1024
        // + 4096*4096 + 3*4096*12288 + 2*4096 + 2*128) + 4096 = 1,244,659,712 + 36*192,946,432
        // + 4096 = 8,190,735,360.
        QTest::newRow("qwen3-8b") << "qwen3-8b.json"
                                  << "llama" << qint64(8190735360);
        // Gemma-7B (tied, 16 heads of 256 over 3072): 256000*3072 + 28*(3*3072*4096 + 4096*3072
        // + 3*3072*24576 + 2*3072) + 3072 = 786,432,000 + 28*276,830,208 + 3072 = 8,537,680,896.
        QTest::newRow("gemma-7b") << "gemma-7b.json"
                                  << "llama" << qint64(8537680896);
        // Gemma-2-9B (8 kv heads, four norms a layer): 256000*3584 + 42*(3584*4096 + 2*3584*2048
        // + 4096*3584 + 3*3584*14336 + 4*3584) + 3584 = 917,504,000 + 42*198,195,200 + 3584
        // = 9,241,705,984.
        QTest::newRow("gemma-2-9b") << "gemma-2-9b.json"
                                    << "llama" << qint64(9241705984);
        // Gemma-3-1B (one kv head, per-head q/k norms, four norms): 262144*1152 + 26*(1152*1024
        // + 2*1152*256 + 1024*1152 + 3*1152*6912 + 4*1152 + 2*256) + 1152 = 301,989,888
        // + 26*26,842,112 + 1152 = 999,885,952.
        QTest::newRow("gemma-3-1b") << "gemma-3-1b.json"
                                    << "llama" << qint64(999885952);
        // Gemma-3-27B's text_config (the vocabulary is Gemma3TextConfig's default 262208; the
        // Hub's 27,432,406,640 adds the vision tower and projector, not planned): 262208*5376
        // + 62*(5376*4096 + 2*5376*2048 + 4096*5376 + 3*5376*21504 + 4*5376 + 2*128) + 5376
        // = 1,409,630,208 + 62*412,898,560 + 5376 = 27,009,346,304.
        QTest::newRow("gemma-3-27b") << "gemma-3-27b.json"
                                     << "llama" << qint64(27009346304);
        // Phi-3-mini-4k (fused qkv_proj and gate_up_proj hold the same weights as separate ones):
        // 2*32064*3072 + 32*(4*3072^2 + 3*3072*8192 + 2*3072) + 3072 = 197,001,216
        // + 32*113,252,352 + 3072 = 3,821,079,552.
        QTest::newRow("phi-3-mini-4k") << "phi-3-mini-4k.json"
                                       << "llama" << qint64(3821079552);
        // OLMo-2-7B (q/k norms over the whole projection: 2*4096): 2*100352*4096 + 32*(4*4096^2
        // + 3*4096*11008 + 2*4096 + 2*4096) + 4096 = 822,083,584 + 32*202,391,552 + 4096
        // = 7,298,617,344.
        QTest::newRow("olmo-2-7b") << "olmo-2-7b.json"
                                   << "llama" << qint64(7298617344);
        // StarCoder2-7B (tied, biases everywhere, LayerNorm, GeLU MLP): 49152*4608
        // + 32*(4608*4608+4608 + 2*(4608*512+512) + 4608*4608+4608 + 4608*18432+18432
        // + 18432*4608+4608 + 2*2*4608) + 2*4608 = 226,492,416 + 32*217,106,944 + 9216 = 7,173,923,840.
        QTest::newRow("starcoder2-7b") << "starcoder2-7b.json"
                                       << "llama" << qint64(7173923840);
        // GPT-NeoX-20B (untied, biases, LayerNorm, attention and MLP in parallel): 2*50432*6144
        // + 44*(4*(6144^2+6144) + 6144*24576+24576 + 24576*6144+6144 + 2*2*6144) + 2*6144
        // = 619,708,416 + 44*453,064,704 + 12,288 = 20,554,567,680 (the Hub's count).
        QTest::newRow("gpt-neox-20b") << "gpt-neox-20b.json"
                                      << "llama" << qint64(20554567680);
        // Falcon-7B (multi-query: one kv head of 64; one LayerNorm feeding attention and MLP;
        // tied; no biases): 65024*4544 + 32*(4544*4544 + 2*4544*64 + 4544*4544 + 2*4544*18176
        // + 2*4544) + 2*4544 = 295,469,056 + 32*207,070,080 + 9088 = 6,921,720,704.
        QTest::newRow("falcon-7b") << "falcon-7b.json"
                                   << "llama" << qint64(6921720704);
        // Falcon-40B (new decoder architecture: 8 kv heads, a LayerNorm each for attention and
        // MLP): 65024*8192 + 60*(8192*8192 + 2*8192*512 + 8192*8192 + 2*8192*32768 + 2*2*8192)
        // + 2*8192 = 532,676,608 + 60*679,510,016 + 16,384 = 41,303,293,952.
        QTest::newRow("falcon-40b") << "falcon-40b.json"
                                    << "llama" << qint64(41303293952);
        // Routed experts (one Linear per FFN projection over stacked [e, h, f] weights, a router
        // h*e without bias). Mixtral-8x7B: 2*32000*4096 + 32*(2*4096^2 + 2*4096*1024 + 4096*8
        // + 8*3*4096*14336 + 2*4096) + 4096 = 262,144,000 + 32*1,451,270,144 + 4096
        // = 46,702,792,704 (Mistral AI's published 46.7B; the Hub's count).
        QTest::newRow("mixtral-8x7b") << "mixtral-8x7b.json"
                                      << "llama" << qint64(46702792704);
        // Qwen3-30B-A3B (128 experts of 768, top-8, per-head q/k norms): 2*151936*2048
        // + 48*(2048*4096 + 2*2048*512 + 4096*2048 + 2*128 + 2048*128 + 128*3*2048*768 + 2*2048)
        // + 2048 = 622,329,856 + 48*623,120,640 + 2048 = 30,532,122,624 (the Hub's count).
        QTest::newRow("qwen3-30b-a3b") << "qwen3-30b-a3b.json"
                                       << "llama" << qint64(30532122624);
        // Qwen1.5-MoE-A2.7B (60 experts of 1408, a 5632-wide shared expert with a h->1 gate, q/k/v
        // biases): 2*151936*2048 + 24*(3*(2048^2+2048) + 2048^2 + 2048*60 + 60*3*2048*1408
        // + 3*2048*5632 + 2048 + 2*2048) + 2048 = 622,329,856 + 24*570,560,512 + 2048
        // = 14,315,784,192 (the Hub's count).
        QTest::newRow("qwen1.5-moe-a2.7b") << "qwen1.5-moe-a2.7b.json"
                                           << "llama" << qint64(14315784192);
        // DeepSeek-V3 (multi-head latent attention; 3 dense layers, then 256 experts of 2048 with
        // a selection bias [256] and one shared expert). Attention: q_a 7168*1536 + norm 1536
        // + q_b 1536*128*192 + kv_a 7168*(512+64) + norm 512 + kv_b 512*128*(128+128)
        // + out 128*128*7168 = 187,107,328. Dense layer: + 3*7168*18432 + 2*7168 = 583,483,392.
        // MoE layer: + 256*3*7168*2048 + 256 + 3*7168*2048 + 7168*256 + 2*7168 = 11,507,286,272.
        // 2*129280*7168 + 3*583,483,392 + 58*11,507,286,272 + 7168 = 671,026,419,200 (the
        // Hub's 671B without the multi-token-prediction module's 14B).
        QTest::newRow("deepseek-v3") << "deepseek-v3.json"
                                     << "llama" << qint64(671026419200);
        // BERT-base with the pre-training heads (see parameterCounts): 110,106,428.
        QTest::newRow("bert-base-uncased") << "bert-base-uncased.json"
                                           << "bert" << qint64(110106428);
        // T5-small: 32128*512 + 6*(4*512^2 + 2*512*2048 + 2*512) + 6*(8*512^2 + 2*512*2048 + 3*512)
        // + 2*32*8 + 2*512 = 16,449,536 + 18,880,512 + 25,175,040 + 512 + 1,024 = 60,506,624 (~60M).
        QTest::newRow("t5-small") << "t5-small.json"
                                  << "t5" << qint64(60506624);
        QTest::newRow("vit-base-patch16-224") << "vit-base-patch16-224.json"
                                              << "vit" << qint64(86567656);
        QTest::newRow("switch-base-8") << "switch-base-8.json"
                                       << "moe" << qint64(619339008);
    }

    void huggingFaceConfigs()
    {
        QFETCH(QString, file);
        QFETCH(QString, family);
        QFETCH(qint64, params);
        ModelOptions o;
        o.seq = 128; // keep the sequence small; parameters do not depend on it
        const auto m = loadModel((kHfData + file).toStdString(), o);
        QCOMPARE(QString::fromStdString(m.config["family"].get<std::string>()), family);
        QCOMPARE(qint64(m.graph.parameterCount()), params);
    }

    void huggingFaceDetails()
    {
        // Switch: HF's expert_capacity (64) wins over the capacity factor.
        const auto sw = loadModel((kHfData + "switch-base-8.json").toStdString());
        QCOMPARE(sw.graph.tensor(findOp(sw.graph, "encoder/layers.1/moe/dispatch")->outputs[0]).shape[2], std::int64_t{64});
        // OPT uses ReLU; GPT-2 GeLU.
        const auto opt = loadModel((kHfData + "opt-125m.json").toStdString());
        QVERIFY(findOp(opt.graph, "layers.0/mlp/relu"));
        QCOMPARE(QString::fromStdString(opt.name), QStringLiteral("facebook/opt-125m"));
        // Without _name_or_path (most Hub files), the download names the model: the folder of a
        // config.json, else the file's stem; the architecture only when neither says anything.
        QFile qwen(kHfData + "qwen2.5-7b.json");
        QVERIFY(qwen.open(QIODevice::ReadOnly));
        const std::string text = qwen.readAll().toStdString();
        QCOMPARE(modelConfigFromHuggingFace(text, "/models/Qwen2.5-7B/config.json")["name"].get<std::string>(),
                 std::string("Qwen2.5-7B"));
        QCOMPARE(modelConfigFromHuggingFace(text, "tests/qwen2.5-7b.json")["name"].get<std::string>(), std::string("qwen2.5-7b"));
        QCOMPARE(modelConfigFromHuggingFace(text, "config.json")["name"].get<std::string>(), std::string("qwen2"));
        // Mistral keeps 8 kv heads: grouped-query einsums.
        ModelOptions shortSeq;
        shortSeq.seq = 64;
        const auto mistral = loadModel((kHfData + "mistral-7b.json").toStdString(), shortSeq);
        QCOMPARE(findOp(mistral.graph, "layers.0/attn/q_heads")->einsum, std::string("bs(kgd)->bkgsd"));
    }

    // A sliding-window layer's scores and context span min(window, seq) keys per query: Gemma-3
    // 27B at seq 8192 with its 1024-token window, layer 0 local and layer 5 global (one in six).
    // Scores: 2 * b * kv * g * s * t * d = 2 * 1 * 16 * 2 * 8192 * 8192 * 128 = 549,755,813,888
    // FLOPs global; local 1024 / 8192 of it = 68,719,476,736; the same for the context.
    void slidingWindowLayers()
    {
        const auto m = load("gemma3-27b", {}, 1);
        auto flops = [&](const std::string& name) {
            const Op* op = findOp(m.graph, name);
            return op ? forwardFlops(opSignature(*op, m.graph), opKindInfo(op->kind)) : -1.0;
        };
        QCOMPARE(flops("layers.5/attn/scores"), 549755813888.0);
        QCOMPARE(flops("layers.0/attn/scores"), 68719476736.0);
        QCOMPARE(flops("layers.0/attn/context"), 68719476736.0);
        QCOMPARE(flops("layers.11/attn/context"), 549755813888.0);
        QCOMPARE(flops("layers.0/attn/q"), flops("layers.5/attn/q")); // projections do not see the window
        // A window wider than the sequence costs what a global layer does.
        const auto wide = load("gemma3-27b", {"sliding_window=100000"}, 1);
        const Op* op = findOp(wide.graph, "layers.0/attn/scores");
        QVERIFY(op);
        QCOMPARE(forwardFlops(opSignature(*op, wide.graph), opKindInfo(op->kind)), 549755813888.0);
    }

    // The layer layouts the Hugging Face families map onto (core/models/llama.cpp): which ops a
    // layer has, by name, and what feeds the residual adds.
    void decoderLayouts_data()
    {
        QTest::addColumn<QStringList>("overrides");
        QTest::addColumn<QStringList>("present");
        QTest::addColumn<QStringList>("absent");
        QTest::newRow("llama") << QStringList{} << QStringList{"attn_norm", "mlp_norm", "attn/q", "mlp/gate"}
                               << QStringList{"post_attn_norm", "attn/q_norm", "attn/q.bias"};
        QTest::newRow("qwen3 per-head q/k norm") << QStringList{"qk_norm=head"} << QStringList{"attn/q_norm", "attn/k_norm"}
                                                 << QStringList{"post_attn_norm"};
        QTest::newRow("gemma2 sandwich") << QStringList{"norm_placement=sandwich"}
                                         << QStringList{"attn_norm", "post_attn_norm", "mlp_norm", "post_mlp_norm"}
                                         << QStringList{"attn/q_norm"};
        QTest::newRow("olmo2 post") << QStringList{"norm_placement=post", "qk_norm=full"}
                                    << QStringList{"post_attn_norm", "post_mlp_norm", "attn/q_norm"}
                                    << QStringList{"attn_norm", "mlp_norm"};
        QTest::newRow("neox parallel") << QStringList{"parallel_residual=separate", "norm=layer", "ffn_gated=false"}
                                       << QStringList{"attn_norm", "mlp_norm"} << QStringList{"mlp/gate", "post_attn_norm"};
        QTest::newRow("falcon shared") << QStringList{"parallel_residual=shared", "norm=layer"} << QStringList{"attn_norm"}
                                       << QStringList{"mlp_norm"};
    }

    void decoderLayouts()
    {
        QFETCH(QStringList, overrides);
        QFETCH(QStringList, present);
        QFETCH(QStringList, absent);
        std::vector<std::string> sets = {"layers=2", "hidden=64", "heads=4", "kv_heads=2", "ffn=128", "vocab=256", "seq=16"};
        for (const auto& o : overrides) sets.push_back(o.toStdString());
        const auto m = load("llama3-8b", sets, 1);
        std::set<std::string> names;
        for (const auto& op : m.graph.ops) names.insert(op.name);
        for (const auto& t : m.graph.tensors) names.insert(t.name);
        for (const auto& p : present)
            QVERIFY2(names.count("layers.1/" + p.toStdString()), qPrintable(p));
        for (const auto& a : absent)
            QVERIFY2(!names.count("layers.1/" + a.toStdString()), qPrintable(a));
        // A parallel layer's MLP reads the layer's input (through its norm), not the attention's sum.
        if (overrides.contains(QStringLiteral("parallel_residual=separate"))) {
            const Op* up = findOp(m.graph, "layers.1/mlp/up");
            const Op* mlpNorm = findOp(m.graph, "layers.1/mlp_norm");
            const Op* attnNorm = findOp(m.graph, "layers.1/attn_norm");
            QVERIFY(up && mlpNorm && attnNorm);
            QCOMPARE(up->inputs[0], mlpNorm->outputs[0]);
            QCOMPARE(mlpNorm->inputs[0], attnNorm->inputs[0]);
        }
    }

    void huggingFaceErrors_data()
    {
        QTest::addColumn<QString>("file");
        QTest::addColumn<QString>("message");
        QTest::newRow("unknown model_type")
            << "unknown-model-type.json"
            << "unknown-model-type.json: field 'model_type' is 'mamba', an architecture TP Studio does not know; "
               "supported: gpt2, opt, llama, mistral, qwen2, qwen3, mixtral, qwen2_moe, qwen3_moe, deepseek_v3, gemma, gemma2, gemma3, gemma3_text, phi3, olmo2, starcoder2, "
               "gpt_neox, falcon, bert, t5, vit, switch_transformers";
        QTest::newRow("no model_type") << "missing-model-type.json"
                                       << "missing-model-type.json: field 'model_type' is missing";
        QTest::newRow("missing field") << "llama-missing-intermediate.json"
                                       << "llama-missing-intermediate.json: field 'intermediate_size' is missing";
        QTest::newRow("string for int") << "bert-string-hidden.json"
                                        << "bert-string-hidden.json: field 'hidden_size' must be a positive integer, "
                                           "not \"768\"";
        QTest::newRow("negative") << "gpt2-negative-layers.json"
                                  << "gpt2-negative-layers.json: field 'n_layer' must be a positive integer, not -12";
        QTest::newRow("bad projection") << "t5-bad-projection.json"
                                        << "t5-bad-projection.json: field 'feed_forward_proj' is 'gated-mish'";
        QTest::newRow("kv heads") << "mistral-indivisible-kv.json"
                                  << "mistral-indivisible-kv.json: model config 'mistral-indivisible-kv': field 'heads' (32) is not "
                                     "divisible by 'kv_heads' (6)";
        QTest::newRow("not json") << "not-json.json"
                                  << "not-json.json: not valid JSON";
    }

    void huggingFaceErrors()
    {
        QFETCH(QString, file);
        QFETCH(QString, message);
        QFile f(kHfData + "bad/" + file);
        QVERIFY(f.open(QIODevice::ReadOnly));
        try {
            const ModelConfig c = modelConfigFromHuggingFace(f.readAll().toStdString(), file.toStdString());
            // Some faults only show when the mapped config is built; loadModel adds the file name.
            (void)c;
            loadModel((kHfData + "bad/" + file).toStdString());
            QFAIL("bad config accepted");
        } catch (const InputError& e) {
            QString what = QString::fromUtf8(e.what());
            what.remove(kHfData + "bad/"); // loadModel names the path as given
            QVERIFY2(what.startsWith(message), qPrintable(what));
        }
    }

    void builderErrors_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<QStringList>("overrides");
        QTest::addColumn<QString>("message");
        QTest::newRow("gpt heads") << "gpt2" << QStringList{"hidden=100", "heads=3"}
                                   << "field 'hidden' (100) is not divisible by 'heads' (3)";
        QTest::newRow("negative layers") << "gpt2" << QStringList{"layers=-4"} << "field 'layers' must be a positive integer";
        QTest::newRow("llama kv heads") << "llama2-70b" << QStringList{"kv_heads=7"}
                                        << "field 'heads' (64) is not divisible by 'kv_heads' (7)";
        QTest::newRow("llama seq") << "llama2-7b" << QStringList{"seq=8192"} << "field 'seq' (8192) exceeds 'positions' (4096)";
        QTest::newRow("vit patch") << "vit-b16" << QStringList{"patch=15"}
                                   << "field 'image' (224) is not divisible by 'patch' (15)";
        QTest::newRow("resnet blocks") << "resnet50" << QStringList{"blocks=3,4,6"}
                                       << "field 'blocks' must list four positive block counts";
        QTest::newRow("activation") << "t5-base" << QStringList{"activation=mish"}
                                    << "field 'activation' is 'mish'; use gelu, relu, silu or tanh";
        QTest::newRow("experts") << "switch-base-8" << QStringList{"experts=0"} << "field 'experts' must be a positive integer";
        QTest::newRow("capacity factor") << "switch-base-8" << QStringList{"capacity_factor=fast"}
                                         << "field 'capacity_factor' must be a positive number";
        QTest::newRow("family") << "gpt2" << QStringList{"family=rnn"}
                                << "field 'family' is 'rnn'; known families: gpt, llama, bert, t5, moe, vit, resnet";
        QTest::newRow("unknown model") << "no-such-model" << QStringList{} << "unknown model 'no-such-model'";
    }

    void builderErrors()
    {
        QFETCH(QString, model);
        QFETCH(QStringList, overrides);
        QFETCH(QString, message);
        std::vector<std::string> sets;
        for (const auto& s : overrides) sets.push_back(s.toStdString());
        try {
            load(model.toStdString(), sets);
            QFAIL("bad config accepted");
        } catch (const InputError& e) {
            QVERIFY2(QString::fromUtf8(e.what()).contains(message), e.what());
        }
    }

    void resnetBlocksOverride()
    {
        // --set blocks=3,8,36,3 turns ResNet-50 into ResNet-152 (torchvision: 60,192,808).
        const auto m = load("resnet50", {"blocks=3,8,36,3"});
        QCOMPARE(m.graph.parameterCount(), std::int64_t{60192808});
    }
};

QTEST_GUILESS_MAIN(TestModels)
#include "tst_models.moc"
