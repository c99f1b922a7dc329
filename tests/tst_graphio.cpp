// The graph file format: lossless round trips and clear messages for malformed files.
#include <QtTest>

#include "io/graph_json.h"
#include "models/catalog.h"
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
