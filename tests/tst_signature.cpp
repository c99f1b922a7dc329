// The einsum signature parser and the op table: loop sizes, roles and FLOPs derive from one
// description per op.
#include <QtTest>

#include "graph/opkinds.h"
#include "graph/signature.h"
#include "graph/validate.h"
#include "import/catalog.h"
#include "util/error.h"

using namespace tp;

Q_DECLARE_METATYPE(std::vector<std::vector<std::int64_t>>)

class TestSignature : public QObject {
    Q_OBJECT
private slots:
    void tableRowsFollowTheEnum()
    {
        // opKindInfo indexes the table by the enum; a row out of place would mislabel a kind.
        const auto& rows = allOpKinds();
        for (size_t i = 0; i < rows.size(); ++i) QCOMPARE(static_cast<size_t>(rows[i].kind), i);
        QCOMPARE(parseOpKind("BatchMatMul"), std::optional<OpKind>(OpKind::BatchMatMul));
        QVERIFY(!parseOpKind("NoSuchKind"));
    }

    // The cache parses each distinct (kind, equation, attrs, shapes) once: every op of a model
    // must get what opSignature gives it, though ops share cache entries (a GPT's layers: 24
    // layers of ~20 ops over a few dozen entries; the ViT's patch Conv2d keys on its attrs, the
    // T5 decoder's cross attention on its shapes).
    void cachedSignaturesEqualParsedOnes_data()
    {
        QTest::addColumn<QString>("model");
        QTest::newRow("gpt2") << "gpt2";
        QTest::newRow("llama3-8b") << "llama3-8b";
        QTest::newRow("t5-base") << "t5-base";
        QTest::newRow("switch-base-8") << "switch-base-8";
        QTest::newRow("vit-b16") << "vit-b16";
        QTest::newRow("resnet50") << "resnet50";
    }
    void cachedSignaturesEqualParsedOnes()
    {
        QFETCH(QString, model);
        const Graph g = loadModel(model.toStdString()).graph;
        SignatureCache cache;
        for (const Op& op : g.ops) {
            const Signature want = opSignature(op, g);
            const Signature& got = cache.of(op, g);
            QCOMPARE(got.equation, want.equation);
            QCOMPARE(got.loops.size(), want.loops.size());
            for (size_t l = 0; l < want.loops.size(); ++l) {
                QCOMPARE(got.loops[l].size, want.loops[l].size);
                QCOMPARE(got.loops[l].role, want.loops[l].role);
            }
            QCOMPARE(got.inputs.size(), want.inputs.size());
            QCOMPARE(got.outputs.size(), want.outputs.size());
        }
    }

    void parse_data()
    {
        QTest::addColumn<QString>("equation");
        QTest::addColumn<std::vector<std::vector<std::int64_t>>>("inputs");
        QTest::addColumn<std::vector<std::vector<std::int64_t>>>("outputs");
        QTest::addColumn<QString>("loops"); // label:size:role-initial, in loop order
        QTest::addColumn<double>("points");

        // Linear: b s f parallel (from the output), h contracted. points = 2*3*5*4 = 120.
        QTest::newRow("linear") << "bsh,hf->bsf" << std::vector<std::vector<std::int64_t>>{{2, 3, 4}, {4, 5}}
                                << std::vector<std::vector<std::int64_t>>{{2, 3, 5}} << "b2P s3P f5P h4C" << 120.0;
        // Head split: h = n*d with n=4 from the output; points = 2*3*4*8 = 192.
        QTest::newRow("reshape-heads") << "bs(nd)->bnsd" << std::vector<std::vector<std::int64_t>>{{2, 3, 32}}
                                       << std::vector<std::vector<std::int64_t>>{{2, 4, 3, 8}} << "b2P n4P s3P d8P" << 192.0;
        // Merge back: bnsd -> bs(nd).
        QTest::newRow("merge-heads") << "bnsd->bs(nd)" << std::vector<std::vector<std::int64_t>>{{2, 4, 3, 8}}
                                     << std::vector<std::vector<std::int64_t>>{{2, 3, 32}} << "b2P s3P n4P d8P" << 192.0;
        // Broadcast bias-like add with a size-1 dim.
        QTest::newRow("broadcast") << "bsh,1sh->bsh" << std::vector<std::vector<std::int64_t>>{{2, 3, 4}, {1, 3, 4}}
                                   << std::vector<std::vector<std::int64_t>>{{2, 3, 4}} << "b2P s3P h4P" << 24.0;
        // Scalar output: everything contracted.
        QTest::newRow("scalar") << "bsv,bs->" << std::vector<std::vector<std::int64_t>>{{2, 3, 7}, {2, 3}}
                                << std::vector<std::vector<std::int64_t>>{{}} << "b2C s3C v7C" << 42.0;
        // Attention scores: t (key positions) parallel, d contracted.
        QTest::newRow("scores") << "bnsd,bntd->bnst" << std::vector<std::vector<std::int64_t>>{{1, 2, 5, 8}, {1, 2, 5, 8}}
                                << std::vector<std::vector<std::int64_t>>{{1, 2, 5, 5}} << "b1P n2P s5P t5P d8C" << 400.0;
    }

    void parse()
    {
        QFETCH(QString, equation);
        QFETCH(std::vector<std::vector<std::int64_t>>, inputs);
        QFETCH(std::vector<std::vector<std::int64_t>>, outputs);
        QFETCH(QString, loops);
        QFETCH(double, points);
        const Signature sig = parseSignature(equation.toStdString(), inputs, outputs);
        QStringList described;
        for (const auto& l : sig.loops)
            described << QStringLiteral("%1%2%3")
                             .arg(QChar(l.label))
                             .arg(l.size)
                             .arg(l.role == DimRole::Parallel     ? 'P'
                                  : l.role == DimRole::Contracted ? 'C'
                                                                  : '?');
        QCOMPARE(described.join(' '), loops);
        QCOMPARE(sig.points(), points);
    }

    void rejects_data()
    {
        QTest::addColumn<QString>("equation");
        QTest::addColumn<std::vector<std::vector<std::int64_t>>>("inputs");
        QTest::addColumn<std::vector<std::vector<std::int64_t>>>("outputs");
        QTest::addColumn<QString>("message");
        using S = std::vector<std::vector<std::int64_t>>;
        QTest::newRow("no arrow") << "bsh" << S{{1, 2, 3}} << S{} << "missing '->'";
        QTest::newRow("rank") << "bs->bs" << S{{1, 2, 3}} << S{{1, 2}} << "has rank 3 but the equation gives it 2 dims";
        QTest::newRow("mismatch") << "bsh,hf->bsf" << S{{1, 2, 3}, {4, 5}} << S{{1, 2, 5}} << "does not match dim 0";
        QTest::newRow("indivisible group") << "b(nd)->bnd" << S{{2, 10}} << S{{2, 3, 3}} << "does not match dim 1";
        QTest::newRow("bad char") << "b$->b" << S{{2}} << S{{2}} << "unexpected character '$'";
        QTest::newRow("unclosed") << "b(nd->bnd" << S{{2, 6}} << S{{2, 2, 3}} << "unclosed '('";
        QTest::newRow("operand count") << "b,b->b" << S{{2}} << S{{2}} << "has 2 inputs but the op has 1";
    }

    void rejects()
    {
        QFETCH(QString, equation);
        QFETCH(std::vector<std::vector<std::int64_t>>, inputs);
        QFETCH(std::vector<std::vector<std::int64_t>>, outputs);
        QFETCH(QString, message);
        try {
            parseSignature(equation.toStdString(), inputs, outputs);
            QFAIL("no error raised");
        } catch (const InputError& e) {
            QVERIFY2(QString::fromUtf8(e.what()).contains(message), e.what());
        }
    }

    // Each kind's default equation, roles and FLOPs on a tiny op.
    void kinds_data()
    {
        QTest::addColumn<int>("kind");
        QTest::addColumn<std::vector<std::vector<std::int64_t>>>("inputs");
        QTest::addColumn<std::vector<std::vector<std::int64_t>>>("outputs");
        QTest::addColumn<QString>("attr");  // "name=v1;v2" (int or int list)
        QTest::addColumn<QString>("roles"); // role initial per loop, in loop order
        QTest::addColumn<double>("flops");  // forward FLOPs
        QTest::addColumn<int>("savedMask");
        using S = std::vector<std::vector<std::int64_t>>;
        // 2 FLOPs per multiply-add: 2*2*3*5*4 = 240.
        QTest::newRow("Linear") << int(OpKind::Linear) << S{{2, 3, 4}, {4, 5}} << S{{2, 3, 5}} << ""
                                << "PPPC" << 240.0 << 1;
        QTest::newRow("Linear+bias") << int(OpKind::Linear) << S{{2, 4}, {4, 5}, {5}} << S{{2, 5}} << ""
                                     << "PPC" << 80.0 << 1;
        // 2 * b2 * m3 * n5 * k4 = 240.
        QTest::newRow("BatchMatMul") << int(OpKind::BatchMatMul) << S{{2, 3, 4}, {2, 4, 5}} << S{{2, 3, 5}} << ""
                                     << "PPPC" << 240.0 << 3;
        // Conv 2*n1*o8*h4*w4*c3*k3*l3 = 6912; h, w spatial.
        QTest::newRow("Conv2d") << int(OpKind::Conv2d) << S{{1, 3, 8, 8}, {8, 3, 3, 3}} << S{{1, 8, 4, 4}} << ""
                                << "PPSSCCC" << 6912.0 << 1;
        // Embedding: vocab is a gather dim, no FLOPs.
        QTest::newRow("Embedding") << int(OpKind::Embedding) << S{{2, 3}, {10, 4}} << S{{2, 3, 4}} << ""
                                   << "PPPG" << 0.0 << 0;
        // LayerNorm: h reduced-nonlinear, 8 FLOPs per element: 8*2*4 = 64.
        QTest::newRow("LayerNorm") << int(OpKind::LayerNorm) << S{{2, 4}, {4}, {4}} << S{{2, 4}} << ""
                                   << "PR" << 64.0 << 1;
        QTest::newRow("RMSNorm") << int(OpKind::RMSNorm) << S{{2, 4}, {4}} << S{{2, 4}} << ""
                                 << "PR" << 40.0 << 1;
        QTest::newRow("Softmax") << int(OpKind::Softmax) << S{{2, 4}} << S{{2, 4}} << ""
                                 << "PR" << 40.0 << 0;
        QTest::newRow("GeLU") << int(OpKind::GeLU) << S{{2, 4}} << S{{2, 4}} << ""
                              << "PP" << 64.0 << 1;
        QTest::newRow("Add broadcast") << int(OpKind::Add) << S{{2, 3, 4}, {4}} << S{{2, 3, 4}} << ""
                                       << "PPP" << 24.0 << 0;
        QTest::newRow("Mul") << int(OpKind::Mul) << S{{2, 4}, {2, 4}} << S{{2, 4}} << ""
                             << "PP" << 8.0 << 3;
        QTest::newRow("Dropout") << int(OpKind::Dropout) << S{{2, 4}} << S{{2, 4}} << ""
                                 << "PP" << 8.0 << 0;
        QTest::newRow("Reshape") << int(OpKind::Reshape) << S{{2, 12}} << S{{2, 3, 4}} << ""
                                 << "PPP" << 0.0 << 0;
        QTest::newRow("Transpose") << int(OpKind::Transpose) << S{{2, 3, 4}} << S{{2, 4, 3}} << "perm=0;2;1"
                                   << "PPP" << 0.0 << 0;
        // Concat: the joined dim's loops are fixed (spatial); the others parallel.
        QTest::newRow("Concat") << int(OpKind::Concat) << S{{2, 3}, {2, 5}} << S{{2, 8}} << "axis=1"
                                << "PSSS" << 0.0 << 0;
        QTest::newRow("Split") << int(OpKind::Split) << S{{2, 8}} << S{{2, 3}, {2, 5}} << "axis=1"
                               << "PSSS" << 0.0 << 0;
        // Reduce over the last dim: a linear reduction, so contracted.
        QTest::newRow("Reduce") << int(OpKind::Reduce) << S{{2, 3, 4}} << S{{2, 3}} << "axes=2"
                                << "PPC" << 24.0 << 0;
        QTest::newRow("MaxPool") << int(OpKind::MaxPool) << S{{1, 2, 8, 8}} << S{{1, 2, 4, 4}} << ""
                                 << "PPSS" << 32.0 << 1;
        // CrossEntropy: batch dims contracted into a scalar, vocab normalised.
        QTest::newRow("CrossEntropy") << int(OpKind::CrossEntropy) << S{{2, 3, 7}, {2, 3}} << S{{}} << ""
                                      << "CCR" << 210.0 << 1;
    }

    void kinds()
    {
        QFETCH(int, kind);
        QFETCH(std::vector<std::vector<std::int64_t>>, inputs);
        QFETCH(std::vector<std::vector<std::int64_t>>, outputs);
        QFETCH(QString, attr);
        QFETCH(QString, roles);
        QFETCH(double, flops);
        QFETCH(int, savedMask);
        Graph g;
        std::vector<TensorId> ins, outs;
        for (size_t i = 0; i < inputs.size(); ++i)
            ins.push_back(
                g.addTensor("in" + std::to_string(i), inputs[i], DType::BF16, i == 0 ? TensorRole::Input : TensorRole::Weight));
        for (size_t i = 0; i < outputs.size(); ++i)
            outs.push_back(g.addTensor("out" + std::to_string(i), outputs[i], DType::BF16, TensorRole::Activation));
        Attrs attrs;
        if (!attr.isEmpty()) {
            const auto parts = attr.split('=');
            std::vector<std::int64_t> values;
            for (const auto& v : parts[1].split(';')) values.push_back(v.toLongLong());
            if (values.size() == 1 && parts[0] != "perm" && parts[0] != "axes")
                attrs[parts[0].toStdString()] = values[0];
            else
                attrs[parts[0].toStdString()] = values;
        }
        g.addOp("op", static_cast<OpKind>(kind), ins, outs, {}, attrs);
        validateGraph(g);
        const Signature sig = opSignature(g.ops[0], g);
        QString described;
        for (const auto& l : sig.loops) described += QChar(dimRoleName(l.role)[0]).toUpper();
        QCOMPARE(described, roles);
        const auto& info = opKindInfo(static_cast<OpKind>(kind));
        QCOMPARE(forwardFlops(sig, info), flops);
        QCOMPARE(int(info.savedInputs), savedMask);
    }
};

QTEST_GUILESS_MAIN(TestSignature)
#include "tst_signature.moc"
