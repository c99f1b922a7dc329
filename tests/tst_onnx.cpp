// The ONNX importer: real PyTorch exports import with their exact parameter counts and fold like
// the built-in models; everything in Debian's ONNX test data either imports or is refused with an
// InputError (no crash, no hang).
#include <QtTest>

#include <cmath>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>
#include <onnx/onnx_pb.h>

#include "fold/fold.h"
#include "graph/opkinds.h"
#include "import/onnx_import.h"
#include "import/catalog.h"
#include "plan/planner.h"
#include "search/search.h"
#include "util/error.h"

using namespace tp;

namespace {

const QString kFixtures = QStringLiteral(TP_TEST_DATA "/onnx");

nlohmann::json fixtureTable()
{
    QFile f(kFixtures + "/fixtures.json");
    if (!f.open(QIODevice::ReadOnly)) return nlohmann::json::object();
    return nlohmann::json::parse(f.readAll().toStdString());
}

std::string fixturePath(const char* name) { return (kFixtures + "/" + name).toStdString(); }

std::map<OpKind, int> kindCounts(const Graph& g)
{
    std::map<OpKind, int> counts;
    for (const auto& op : g.ops) ++counts[op.kind];
    return counts;
}

const Op* findOp(const Graph& g, const std::string& name)
{
    for (const auto& op : g.ops)
        if (op.name == name) return &op;
    return nullptr;
}

} // namespace

class TestOnnx : public QObject {
    Q_OBJECT
private slots:
    void fixtureImportsWithExactParameterCount_data()
    {
        QTest::addColumn<QString>("file");
        QTest::addColumn<qint64>("params");
        const auto table = fixtureTable();
        QVERIFY(table.size() >= 5);
        for (const auto& [name, entry] : table.items())
            QTest::newRow(name.c_str()) << QString::fromStdString(entry.at("file").get<std::string>())
                                        << qint64(entry.at("params").get<std::int64_t>());
    }

    void fixtureImportsWithExactParameterCount()
    {
        QFETCH(QString, file);
        QFETCH(qint64, params);
        const Graph g = importOnnxFile((kFixtures + "/" + file).toStdString());
        QCOMPARE(qint64(g.parameterCount()), params);
        // Every op of a PyTorch export maps onto a real kind; nothing is left opaque.
        QCOMPARE(kindCounts(g)[OpKind::Opaque], 0);
        qInfo("%s: %zu ops, %zu tensors, %lld parameters", qPrintable(file), g.ops.size(), g.tensors.size(),
              static_cast<long long>(g.parameterCount()));
    }

    // Each fixture is planned end to end like a built-in model: every op gets a strategy and
    // the step time is finite and positive.
    void planIsProducedForEachFixture_data() { fixtureImportsWithExactParameterCount_data(); }

    void planIsProducedForEachFixture()
    {
        QFETCH(QString, file);
        PlanRequest request;
        request.model = (kFixtures + "/" + file).toStdString();
        request.mesh = "4";
        request.memoryLimit = "none";
        auto ws = preparePlan(request);
        const SearchResult r = runPlan(*ws, request);
        QCOMPARE(r.strategyOfOp.size(), ws->model.graph.ops.size());
        QVERIFY(r.breakdown.stepSeconds > 0 && std::isfinite(r.breakdown.stepSeconds));
        QVERIFY(r.blockClasses >= 1);
    }

    // torchvision's ResNet-50 folds exactly like the built-in one: the same classes (stem,
    // per stage one downsampling block and one class of identity blocks, head) with the same
    // op counts and instance counts, in the same order.
    void resnetFoldsLikeTheBuiltin()
    {
        const FoldedGraph onnx = foldGraph(importOnnxFile(fixturePath("resnet50.onnx")));
        ModelOptions options;
        options.batch = 1;
        const FoldedGraph builtin = foldGraph(loadModel("resnet50", options).graph);
        auto shape = [](const FoldedGraph& f) {
            QStringList out;
            for (const auto& c : f.classes) out << QStringLiteral("%1x%2").arg(c.opsPerInstance()).arg(c.instances.size());
            return out.join(' ');
        };
        // stem 4x1, then per stage (12-op downsampling x1, 10-op identity x2/3/5/2), head 3x1.
        QCOMPARE(shape(builtin), QStringLiteral("4x1 12x1 10x2 12x1 10x3 12x1 10x5 12x1 10x2 3x1"));
        QCOMPARE(shape(onnx), shape(builtin));
    }

    // The decomposed LayerNorm (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add) and
    // GeLU (Div, Erf, Add, Mul, Mul) of the opset-14 exports collapse into one op each; shape
    // subgraphs vanish; linear layers (MatMul of a transposed weight + bias) become Linear ops.
    void gptStyleStructure()
    {
        const Graph g = importOnnxFile(fixturePath("gpt2_style.onnx"));
        auto counts = kindCounts(g);
        QCOMPARE(counts[OpKind::LayerNorm], 4 * 2 + 1);
        QCOMPARE(counts[OpKind::GeLU], 4);
        QCOMPARE(counts[OpKind::Linear], 4 * 4 + 1); // qkv, proj, fc1, fc2 per layer + tied head
        QCOMPARE(counts[OpKind::Embedding], 2);
        QCOMPARE(counts[OpKind::Softmax], 4);
        QCOMPARE(counts[OpKind::BatchMatMul], 4 * 2);
        for (const auto& op : g.ops) {
            const auto onnxOp = op.attrs.find("onnx_op");
            if (onnxOp == op.attrs.end()) continue;
            const auto& type = std::get<std::string>(onnxOp->second);
            for (const char* folded : {"Shape", "Constant", "ConstantOfShape", "Cast", "Unsqueeze", "Range", "Erf", "Sqrt", "Pow",
                                       "ReduceMean", "Identity"})
                QVERIFY2(type != folded, qPrintable(QString::fromStdString(op.name + " is a " + type)));
        }
        // Scopes survive: "/layers.3/attn/qkv/MatMul" -> "layers.3/attn/qkv/MatMul".
        const Op* qkv = findOp(g, "layers.3/attn/qkv/MatMul");
        QVERIFY(qkv);
        QCOMPARE(qkv->kind, OpKind::Linear);
        QCOMPARE(qkv->inputs.size(), size_t(3)); // the bias Add is fused
        QCOMPARE(g.tensor(qkv->inputs[1]).name, std::string("layers.3.attn.qkv.weight"));
        QCOMPARE(g.tensor(qkv->inputs[1]).role, TensorRole::Weight);
        const Op* ln = findOp(g, "layers.0/ln_1/LayerNorm");
        QVERIFY(ln);
        QCOMPARE(ln->inputs.size(), size_t(3)); // x, scale, bias
        // The tied head reads the embedding table itself (stored [vocab, hidden]).
        const Op* embed = findOp(g, "wte/Gather");
        QVERIFY(embed);
        QCOMPARE(embed->kind, OpKind::Embedding);
        int readers = 0;
        for (const auto& op : g.ops)
            for (auto t : op.inputs) readers += t == embed->inputs[1];
        QCOMPARE(readers, 2);
    }

    void gptStyleFoldsToOneClassOfFour()
    {
        const Graph g = importOnnxFile(fixturePath("gpt2_style.onnx"));
        const FoldedGraph folded = foldGraph(g);
        checkFold(g, folded);
        int longest = 0;
        for (const auto& run : folded.runs) longest = std::max(longest, run.count);
        QCOMPARE(longest, 4);
        QVERIFY2(folded.foldRatio() > 2.0, qPrintable(QString::number(folded.foldRatio())));
    }

    // Dynamic dims (exported with dynamic_axes) take the batch and seq options.
    void dynamicDimsFollowOptions_data()
    {
        QTest::addColumn<qint64>("batch");
        QTest::addColumn<qint64>("seq");
        QTest::newRow("defaults") << qint64(0) << qint64(0);
        QTest::newRow("3x32") << qint64(3) << qint64(32);
        QTest::newRow("8x128") << qint64(8) << qint64(128);
    }

    void dynamicDimsFollowOptions()
    {
        QFETCH(qint64, batch);
        QFETCH(qint64, seq);
        OnnxImportOptions options;
        options.batch = batch;
        options.seq = seq;
        const Graph g = importOnnxFile(fixturePath("gpt2_style.onnx"), options);
        const std::int64_t b = batch ? batch : 1, s = seq ? seq : 128;
        const Tensor* ids = nullptr;
        const Tensor* logits = nullptr;
        for (const auto& t : g.tensors) {
            if (t.name == "input_ids") ids = &t;
            if (t.role == TensorRole::Output) logits = &t;
        }
        QVERIFY(ids && logits);
        QCOMPARE(ids->shape, (std::vector<std::int64_t>{b, s}));
        QCOMPARE(logits->shape, (std::vector<std::int64_t>{b, s, 5000}));
        QCOMPARE(g.parameterCount(), std::int64_t(4472320)); // independent of batch and seq
    }

    // A fixed-shape export (transformer_encoder.onnx: torch.onnx.export without dynamic_axes at
    // batch 2 x sequence 32; its attention holds constant Reshape targets of those sizes): asked
    // for its own sizes it imports; asked for others it is refused in one line that names the
    // exported sizes, the flags that fit and the dynamic_axes export. Images resize their batch
    // (ViT-B/16 at batch 8: [8, 3, 224, 224]).
    void fixedShapesResizeOrAreRefused_data()
    {
        QTest::addColumn<QString>("file");
        QTest::addColumn<qint64>("batch");
        QTest::addColumn<qint64>("seq");
        QTest::addColumn<QString>("message"); // empty: imports
        const QString refused = QStringLiteral(
            "its shapes are fixed at batch 2 x sequence 32 (exported without dynamic axes) and do not follow --batch/--seq to %1 (");
        const QString advice = QStringLiteral(
            "); plan it with --batch 2 --seq 32, or export it again with torch.onnx.export(..., "
            "dynamic_axes={\"src\": {0: \"batch\", 1: \"sequence\"}})");
        QTest::newRow("as exported") << "transformer_encoder.onnx" << qint64(2) << qint64(32) << QString();
        QTest::newRow("no options") << "transformer_encoder.onnx" << qint64(0) << qint64(0) << QString();
        QTest::newRow("batch 8") << "transformer_encoder.onnx" << qint64(8) << qint64(0)
                                 << refused.arg(QStringLiteral("batch 8 x sequence 32")) + "|" + advice;
        QTest::newRow("seq 64") << "transformer_encoder.onnx" << qint64(0) << qint64(64)
                                << refused.arg(QStringLiteral("batch 2 x sequence 64")) + "|" + advice;
        QTest::newRow("vit batch 8") << "vit_b16.onnx" << qint64(8) << qint64(0) << QString();
    }

    void fixedShapesResizeOrAreRefused()
    {
        QFETCH(QString, file);
        QFETCH(qint64, batch);
        QFETCH(qint64, seq);
        QFETCH(QString, message);
        OnnxImportOptions options;
        options.batch = batch;
        options.seq = seq;
        const std::string path = fixturePath(file.toStdString().c_str());
        try {
            const Graph g = importOnnxFile(path, options);
            QVERIFY2(message.isEmpty(), "imported");
            const auto input = std::find_if(g.tensors.begin(), g.tensors.end(), [](const Tensor& t) { return t.role == TensorRole::Input; });
            QVERIFY(input != g.tensors.end());
            QCOMPARE(input->shape.front(), std::int64_t(batch ? batch : (file.startsWith("vit") ? 1 : 2)));
        } catch (const InputError& e) {
            QVERIFY2(!message.isEmpty(), e.what());
            const QString what = QString::fromStdString(e.what());
            const QStringList parts = message.split(QLatin1Char('|'));
            QVERIFY2(what.startsWith(QString::fromStdString(path) + ": " + parts[0]), e.what());
            QVERIFY2(what.endsWith(parts[1]), e.what());
            QVERIFY(!what.contains(QLatin1Char('\n')));
        }
    }

    // A file with stored initializers, a Gemm and a MatMul + Add: both become Linear ops with
    // bias, named by their scopes; a fixed batch dim is replaced by the batch option.
    void initializersAndGemm()
    {
        OnnxImportOptions options;
        options.batch = 4;
        const Graph g = importOnnxFile(fixturePath("scoped_mlp.onnx"), options);
        QCOMPARE(g.name, std::string("scoped_mlp")); // the file's stem, not the exporter's graph name
        QCOMPARE(g.ops.size(), size_t(3));
        const Op* fc1 = findOp(g, "mlp/fc1/Gemm");
        const Op* fc2 = findOp(g, "mlp/fc2/MatMul");
        QVERIFY(fc1 && fc2);
        QCOMPARE(fc1->kind, OpKind::Linear);
        QCOMPARE(fc1->einsum, std::string("mk,nk,n->mn"));
        QCOMPARE(fc2->kind, OpKind::Linear);
        QCOMPARE(fc2->inputs.size(), size_t(3));
        QCOMPARE(g.tensor(fc2->outputs[0]).shape, (std::vector<std::int64_t>{4, 8}));
        QCOMPARE(g.tensor(fc2->outputs[0]).role, TensorRole::Output);
    }

    // Einsum nodes are our own op description: a contraction with a weight is a Linear (the
    // weight put second when it comes first), one between activations a BatchMatMul, one
    // operand a Transpose or a sum. Output shapes come from the letters when ONNX leaves them
    // out; an ellipsis is refused by name.
    void einsumNodesMapToTheirEquations()
    {
        onnx::ModelProto model;
        model.set_ir_version(8);
        model.add_opset_import()->set_version(17);
        onnx::GraphProto* g = model.mutable_graph();
        g->set_name("einsums");
        auto tensorType = [](onnx::ValueInfoProto* v, const std::string& name, std::vector<std::int64_t> dims) {
            v->set_name(name);
            auto* tt = v->mutable_type()->mutable_tensor_type();
            tt->set_elem_type(onnx::TensorProto_DataType_FLOAT);
            for (auto d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
        };
        auto weight = [&](const std::string& name, std::vector<std::int64_t> dims) {
            onnx::TensorProto* t = g->add_initializer();
            t->set_name(name);
            t->set_data_type(onnx::TensorProto_DataType_FLOAT);
            std::int64_t n = 1;
            for (auto d : dims) {
                t->add_dims(d);
                n *= d;
            }
            for (std::int64_t i = 0; i < n; ++i) t->add_float_data(0.5f);
        };
        auto einsum = [&](const std::string& name, std::vector<std::string> inputs, const std::string& out,
                          const std::string& equation) {
            onnx::NodeProto* node = g->add_node();
            node->set_name(name);
            node->set_op_type("Einsum");
            for (const auto& in : inputs) node->add_input(in);
            node->add_output(out);
            onnx::AttributeProto* a = node->add_attribute();
            a->set_name("equation");
            a->set_type(onnx::AttributeProto_AttributeType_STRING);
            a->set_s(equation);
        };
        tensorType(g->add_input(), "x", {4, 6, 8});
        weight("w1", {8, 16});
        weight("w2", {16, 8});
        einsum("proj", {"x", "w1"}, "y1", "bsh, hf -> bsf");
        einsum("back", {"w2", "y1"}, "y2", "fg,bsf->bsg");
        einsum("scores", {"y2", "y2"}, "y3", "bsg,btg->bst");
        einsum("swap", {"y3"}, "y4", "bst->bts");
        einsum("total", {"y4"}, "y5", "bts->bt");
        tensorType(g->add_output(), "y5", {});
        g->mutable_output(0)->mutable_type()->mutable_tensor_type()->clear_shape();
        const QString path = QDir::temp().filePath(QStringLiteral("tp_einsums.onnx"));
        {
            std::ofstream out(path.toStdString(), std::ios::binary);
            QVERIFY(model.SerializeToOstream(&out));
        }
        const Graph graph = importOnnxFile(path.toStdString());
        QCOMPARE(graph.parameterCount(), std::int64_t(8 * 16 + 16 * 8));
        const Op* proj = findOp(graph, "proj");
        const Op* back = findOp(graph, "back");
        const Op* scores = findOp(graph, "scores");
        const Op* swap = findOp(graph, "swap");
        const Op* total = findOp(graph, "total");
        QVERIFY(proj && back && scores && swap && total);
        QCOMPARE(proj->kind, OpKind::Linear);
        QCOMPARE(proj->einsum, std::string("bsh,hf->bsf"));
        QCOMPARE(back->kind, OpKind::Linear);
        QCOMPARE(back->einsum, std::string("bsf,fg->bsg"));
        QCOMPARE(scores->kind, OpKind::BatchMatMul);
        QCOMPARE(graph.tensor(scores->outputs[0]).shape, (std::vector<std::int64_t>{4, 6, 6}));
        QCOMPARE(swap->kind, OpKind::Transpose);
        QCOMPARE(total->kind, OpKind::Reduce);
        QCOMPARE(graph.tensor(total->outputs[0]).shape, (std::vector<std::int64_t>{4, 6}));
        // The equations are costed and sharded like any op: on 2 devices the projections split.
        PlanRequest request;
        request.model = path.toStdString();
        request.mesh = "2";
        request.memoryLimit = "none";
        auto ws = preparePlan(request);
        const SearchResult r = runPlan(*ws, request);
        QVERIFY(r.breakdown.stepSeconds > 0 && std::isfinite(r.breakdown.stepSeconds));
        QVERIFY(ws->costModel->strategies(proj->id).size() > 1);

        // ONNX allows upper-case letters.
        g->mutable_node(0)->mutable_attribute(0)->set_s("BSH,HF->BSF");
        {
            std::ofstream out(path.toStdString(), std::ios::binary | std::ios::trunc);
            QVERIFY(model.SerializeToOstream(&out));
        }
        const Graph upper = importOnnxFile(path.toStdString());
        QCOMPARE(findOp(upper, "proj")->einsum, std::string("BSH,HF->BSF"));
        request.model = path.toStdString();
        auto wsUpper = preparePlan(request);
        QVERIFY(runPlan(*wsUpper, request).breakdown.stepSeconds > 0);

        // The same graph with an ellipsis is refused, naming the node and why.
        g->mutable_node(0)->mutable_attribute(0)->set_s("...h,hf->...f");
        {
            std::ofstream out(path.toStdString(), std::ios::binary | std::ios::trunc);
            QVERIFY(model.SerializeToOstream(&out));
        }
        try {
            importOnnxFile(path.toStdString());
            QFAIL("an Einsum with an ellipsis was accepted");
        } catch (const InputError& e) {
            QVERIFY2(QString::fromUtf8(e.what()).contains(
                         QStringLiteral("node 'proj' (op type Einsum, node 0) is not supported: an Einsum with an ellipsis")),
                     e.what());
        }
        QFile::remove(path);
    }

    void loadModelOpensOnnxFiles()
    {
        ModelOptions options;
        options.batch = 2;
        const auto m = loadModel(fixturePath("resnet50.onnx"), options);
        QCOMPARE(m.graph.parameterCount(), std::int64_t(25557032));
        auto counts = kindCounts(m.graph);
        QCOMPARE(counts[OpKind::Conv2d], 53);
        QCOMPARE(counts[OpKind::BatchNorm], 53);
        for (const auto& t : m.graph.tensors)
            if (t.name == "image") QCOMPARE(t.shape.front(), std::int64_t(2));
    }

    void unsupportedOpIsNamedOrOpaque()
    {
        const std::string path = fixturePath("unsupported_op.onnx");
        try {
            importOnnxFile(path);
            QFAIL("an unsupported op was accepted");
        } catch (const InputError& e) {
            QCOMPARE(QString::fromUtf8(e.what()),
                     QString::fromStdString(path + ": node '/head/DepthToSpace' (op type DepthToSpace, node 1) is not "
                                                   "supported: no op kind of TP Studio corresponds to it; import with "
                                                   "the option to keep unsupported ops as opaque ops"));
        }
        OnnxImportOptions options;
        options.opaqueUnsupported = true;
        const Graph g = importOnnxFile(path, options);
        QCOMPARE(g.ops.size(), size_t(2));
        QCOMPARE(g.ops[1].kind, OpKind::Opaque);
        QCOMPARE(g.ops[1].name, std::string("head/DepthToSpace"));
        QCOMPARE(g.tensor(g.ops[1].outputs[0]).shape, (std::vector<std::int64_t>{1, 4, 16, 16}));
    }

    void garbageIsRefused_data()
    {
        QTest::addColumn<QByteArray>("bytes");
        QTest::addColumn<QString>("message");
        QTest::newRow("text") << QByteArray("this is not protobuf")
                              << "mem.onnx: not an ONNX model (the protobuf message does not parse)";
        QTest::newRow("empty") << QByteArray() << "mem.onnx: the ONNX model has no graph";
        QFile f(kFixtures + "/scoped_mlp.onnx");
        QVERIFY(f.open(QIODevice::ReadOnly));
        const QByteArray whole = f.readAll();
        QTest::newRow("truncated") << whole.left(whole.size() / 2)
                                   << "mem.onnx: not an ONNX model (the protobuf message does not parse)";
    }

    void garbageIsRefused()
    {
        QFETCH(QByteArray, bytes);
        QFETCH(QString, message);
        try {
            importOnnx(bytes.toStdString(), "mem.onnx");
            QFAIL("garbage accepted");
        } catch (const InputError& e) {
            QCOMPARE(QString::fromUtf8(e.what()), message);
        }
    }

    // Every model of Debian's libonnx-testdata imports or is refused with an InputError.
    void debianTestDataImportsOrIsRefused()
    {
        const QString root = QStringLiteral("/usr/share/libonnx-testdata/data");
        if (!QDir(root).exists()) QSKIP("libonnx-testdata is not installed");
        QStringList files;
        QDirIterator it(root, {QStringLiteral("*.onnx")}, QDir::Files, QDirIterator::Subdirectories);
        while (it.hasNext()) files << it.next();
        files.sort();
        int imported = 0, refused = 0;
        QStringList other;
        std::map<std::string, int> reasons;
        for (const auto& file : files) {
            try {
                importOnnxFile(file.toStdString());
                ++imported;
            } catch (const InputError& e) {
                ++refused;
                std::string why = e.what();
                const auto cut = why.find(": ", file.size() + 2);
                ++reasons[why.substr(file.size() + 2,
                                     cut == std::string::npos ? 40 : std::min<size_t>(cut - file.size() - 2, 60))];
            } catch (const std::exception& e) {
                other << file + ": " + e.what();
            }
        }
        qInfo("libonnx-testdata: %lld models, %d imported, %d refused with a message", static_cast<long long>(files.size()),
              imported, refused);
        QVERIFY2(other.isEmpty(), qPrintable(other.join('\n')));
        QVERIFY(files.size() > 100);
        QCOMPARE(imported + refused, int(files.size()));
        QVERIFY(imported > files.size() / 4);
    }
};

QTEST_GUILESS_MAIN(TestOnnx)
#include "tst_onnx.moc"
