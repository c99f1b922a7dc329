// The graph file format: lossless round trips and clear messages for malformed files.
#include <QtTest>

#include "import/graph_json.h"
#include "import/catalog.h"
#include "util/error.h"

using namespace tp;

class TestGraphIo : public QObject {
    Q_OBJECT
private slots:
    void roundTripIsByteIdentical_data()
    {
        QTest::addColumn<QString>("model");
        for (const auto& name : builtinModelNames()) QTest::newRow(name.c_str()) << QString::fromStdString(name);
    }

    void roundTripIsByteIdentical()
    {
        QFETCH(QString, model);
        ModelOptions small;
        small.batch = 2;
        const auto m = loadModel(model.toStdString(), small);
        const std::string first = writeGraphJson(m.graph);
        const Graph back = readGraphJson(first, "memory");
        QCOMPARE(back.ops.size(), m.graph.ops.size());
        const std::string second = writeGraphJson(back);
        QVERIFY(first == second);
    }

    // docs/formats.md promises that its example loads; read the first json block after
    // "### Example" so the document and the reader cannot drift apart.
    void documentedExampleLoads()
    {
        QFile doc(QStringLiteral(TP_TEST_DATA "/../../docs/formats.md"));
        QVERIFY(doc.open(QIODevice::ReadOnly));
        const QString text = QString::fromUtf8(doc.readAll());
        const qsizetype section = text.indexOf(QStringLiteral("### Example"));
        QVERIFY(section >= 0);
        const QString fence = QStringLiteral("```json\n");
        const qsizetype begin = text.indexOf(fence, section);
        QVERIFY(begin >= 0);
        const qsizetype end = text.indexOf(QStringLiteral("```"), begin + fence.size());
        QVERIFY(end > begin);
        const std::string json = text.mid(begin + fence.size(), end - begin - fence.size()).toStdString();
        const Graph g = readGraphJson(json, "docs/formats.md");
        QCOMPARE(g.name, std::string("mlp-block"));
        QCOMPARE(g.tensors.size(), size_t(12));
        QCOMPARE(g.ops.size(), size_t(6));
        QCOMPARE(g.parameterCount(), std::int64_t(33152)); // the figure the document states
        // The written form reads back to the same graph.
        QCOMPARE(writeGraphJson(readGraphJson(writeGraphJson(g), "again")), writeGraphJson(g));
    }

    void malformed_data()
    {
        QTest::addColumn<QString>("file");
        QTest::addColumn<QString>("message");
        const QDir dir(QStringLiteral(TP_TEST_DATA "/malformed"));
        const QStringList files = dir.entryList({QStringLiteral("*.tpgraph.json")}, QDir::Files, QDir::Name);
        QVERIFY(files.size() >= 10);
        for (const auto& f : files) {
            QFile expect(dir.filePath(f + ".expected"));
            QVERIFY2(expect.open(QIODevice::ReadOnly), qPrintable(f + ".expected missing"));
            QTest::newRow(qPrintable(f)) << dir.filePath(f) << QString::fromUtf8(expect.readAll()).trimmed();
        }
    }

    void malformed()
    {
        QFETCH(QString, file);
        QFETCH(QString, message);
        QFile f(file);
        QVERIFY(f.open(QIODevice::ReadOnly));
        try {
            readGraphJson(f.readAll().toStdString(), QFileInfo(file).fileName().toStdString());
            QFAIL("malformed file accepted");
        } catch (const InputError& e) {
            QCOMPARE(QString::fromUtf8(e.what()), message);
        }
    }
};

QTEST_GUILESS_MAIN(TestGraphIo)
#include "tst_graphio.moc"
