// The GUI's item models (app/tpstudio/models) fed hand-built snapshots, under
// QAbstractItemModelTester: no document, no planner, no plan.
#include <QAbstractItemModelTester>
#include <QtTest>

#include "blockoutlinemodel.h"
#include "candidatemodel.h"

using namespace tp;

namespace {

OutlineOp op(OpId id, const char* name, double seconds, bool locked = false)
{
    OutlineOp o;
    o.id = id;
    o.name = QString::fromLatin1(name).section(QLatin1Char('/'), 1);
    o.fullName = QString::fromLatin1(name);
    o.kind = QStringLiteral("Matmul");
    o.strategy = QStringLiteral("f=y");
    o.locked = locked;
    o.seconds = seconds;
    o.sharding = ShardClass::Column;
    return o;
}

/// Two layers of two ops (ops 1..4) and a head of one op (op 0):
/// class "layers.*" 1+2 ms and 3+4 ms = 10 ms; class "head" 5 ms.
OutlineSnapshot twoLayers()
{
    OutlineSnapshot s;
    OutlineClass head;
    head.label = QStringLiteral("head");
    head.opsPerInstance = 1;
    head.instances.push_back({QStringLiteral("head"), 5e-3, {op(0, "head/loss", 5e-3)}});
    head.seconds = 5e-3;
    OutlineClass layers;
    layers.label = QStringLiteral("layers.*");
    layers.opsPerInstance = 2;
    layers.instances.push_back(
        {QStringLiteral("layers.0"), 3e-3, {op(1, "layers.0/fc1", 1e-3), op(2, "layers.0/fc2", 2e-3, true)}});
    layers.instances.push_back({QStringLiteral("layers.1"), 7e-3, {op(3, "layers.1/fc1", 3e-3), op(4, "layers.1/fc2", 4e-3)}});
    layers.seconds = 10e-3;
    s.classes = {head, layers};
    return s;
}

CandidateSnapshot threeCandidates()
{
    CandidateSnapshot s;
    s.op = 7;
    s.chosen = 1;
    s.locked = true;
    s.lambda = 0;
    for (int i = 0; i < 3; ++i) {
        CandidateCost c;
        c.strategy = i;
        c.text = QStringLiteral("s%1").arg(i);
        c.computeSeconds = 1e-3 * (i + 1); // 1, 2, 3 ms
        c.commSeconds = 1e-3;              // + 1 ms each
        c.memoryBytes = 1024.0 * (3 - i);
        c.objective = c.seconds();
        s.rows.push_back(c);
    }
    return s;
}

} // namespace

class TestItemModels : public QObject {
    Q_OBJECT
private slots:
    void outlineShowsASnapshot();
    void outlineSameShapeChangesDataOnly();
    void outlineCheckBoxReportsTheToggle();
    void candidatesShowASnapshot();
};

void TestItemModels::outlineShowsASnapshot()
{
    BlockOutlineModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.setSnapshot(twoLayers());
    QCOMPARE(model.rowCount(), 2);
    const QModelIndex layers = model.index(1, 0);
    QCOMPARE(layers.data().toString(), QStringLiteral("layers.*  ×2"));
    QCOMPARE(model.index(1, BlockOutlineModel::CountColumn).data().toString(), QStringLiteral("2 ops"));
    QCOMPARE(model.rowCount(layers), 2);
    const QModelIndex fc2 = model.indexOfOp(2);
    QVERIFY(fc2.isValid());
    QCOMPARE(fc2.data().toString(), QStringLiteral("fc2"));
    QCOMPARE(fc2.data(BlockOutlineModel::OpIdRole).toInt(), 2);
    QCOMPARE(model.parent(fc2).data().toString(), QStringLiteral("layers.0"));
    QCOMPARE(fc2.sibling(fc2.row(), BlockOutlineModel::StrategyColumn).data().toString(), QStringLiteral("f=y  (locked)"));
    QCOMPARE(model.indexOfOp(3).parent().row(), 1); // layers.1
    QVERIFY(!model.indexOfOp(9).isValid());
    // Class and instance rows carry no op.
    QCOMPARE(layers.data(BlockOutlineModel::OpIdRole).toInt(), -1);
    model.setSnapshot({});
    QCOMPARE(model.rowCount(), 0);
    QVERIFY(!model.indexOfOp(2).isValid());
}

void TestItemModels::outlineSameShapeChangesDataOnly()
{
    BlockOutlineModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.setSnapshot(twoLayers());
    QSignalSpy reset(&model, &QAbstractItemModel::modelReset);
    QSignalSpy changed(&model, &QAbstractItemModel::dataChanged);
    OutlineSnapshot next = twoLayers();
    next.classes[1].instances[1].ops[0].strategy = QStringLiteral("b=x");
    model.setSnapshot(next); // a new plan for the same graph
    QCOMPARE(reset.size(), 0);
    QVERIFY(!changed.isEmpty());
    QCOMPARE(model.indexOfOp(3).sibling(model.indexOfOp(3).row(), BlockOutlineModel::StrategyColumn).data().toString(),
             QStringLiteral("b=x"));
    // Another shape (a third layer) resets the model.
    next.classes[1].instances.push_back({QStringLiteral("layers.2"), 0, {op(5, "layers.2/fc1", 0), op(6, "layers.2/fc2", 0)}});
    model.setSnapshot(next);
    QCOMPARE(reset.size(), 1);
    QCOMPARE(model.rowCount(model.index(1, 0)), 3);
    QCOMPARE(model.indexOfOp(6).parent().row(), 2);
}

void TestItemModels::outlineCheckBoxReportsTheToggle()
{
    BlockOutlineModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.setSnapshot(twoLayers());
    const QModelIndex head = model.index(0, 0), layers = model.index(1, 0);
    QVERIFY(!(model.flags(head) & Qt::ItemIsUserCheckable)); // one instance: nothing to unfold
    QVERIFY(model.flags(layers) & Qt::ItemIsUserCheckable);
    QCOMPARE(layers.data(Qt::CheckStateRole).toInt(), int(Qt::Unchecked));
    QSignalSpy edited(&model, &BlockOutlineModel::expandedKeysEdited);
    QVERIFY(model.setData(layers, Qt::Checked, Qt::CheckStateRole));
    QCOMPARE(edited.size(), 1);
    const QStringList keys = edited.at(0).at(0).toStringList();
    QCOMPARE(keys, QStringList{instancesViewKey(QStringLiteral("layers.*"))});
    // The model shows what it is told, not what it asked for.
    QCOMPARE(layers.data(Qt::CheckStateRole).toInt(), int(Qt::Unchecked));
    model.setExpandedKeys(keys);
    QCOMPARE(layers.data(Qt::CheckStateRole).toInt(), int(Qt::Checked));
}

void TestItemModels::candidatesShowASnapshot()
{
    CandidateModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.setSnapshot(threeCandidates());
    QCOMPARE(model.rowCount(), 3);
    QCOMPARE(model.op(), 7);
    QCOMPARE(model.chosenStrategy(), 1);
    // Row 1 is the chosen (and locked) one: 2 ms compute + 1 ms comm = 3 ms.
    QCOMPARE(model.index(1, CandidateModel::StrategyColumn).data().toString(), QStringLiteral("✔ s1 (locked)"));
    QCOMPARE(model.index(1, CandidateModel::TimeColumn).data(CandidateModel::SortRole).toDouble(), 3e-3);
    QVERIFY(model.index(1, 0).data(Qt::FontRole).value<QFont>().bold());
    QVERIFY(!model.index(0, 0).data(Qt::FontRole).isValid());
    QCOMPARE(model.index(2, CandidateModel::StrategyColumn).data().toString(), QStringLiteral("s2"));
    QCOMPARE(model.index(2, CandidateModel::StrategyColumn).data(CandidateModel::StrategyIndexRole).toInt(), 2);
    QCOMPARE(model.index(0, CandidateModel::CollectivesColumn).data().toString(), QStringLiteral("—"));
    model.setSnapshot({});
    QCOMPARE(model.rowCount(), 0);
    QCOMPARE(model.op(), -1);
}

QTEST_MAIN(TestItemModels)
#include "tst_itemmodels.moc"
