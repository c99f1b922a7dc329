// The GUI's session library without a GUI (QTEST_GUILESS_MAIN: it links QtCore only):
// LatestJob's "newest job wins", and the one planning path: the same settings through the
// GUI's PlannerService, `tpplan plan --json`, and a saved plan read by `tpplan check --json`
// give the same figures.
#include <QtTest>

#include <thread>

#include "explain/explain.h"
#include "latestjob.h"
#include "plan/plan_file.h"
#include "plannerservice.h"
#include "util/error.h"

using namespace tp;

namespace {

constexpr int kPlanTimeoutMs = 120000;

/// Runs tpplan and parses its standard output as JSON (null when it did not exit 0).
nlohmann::json tpplanJson(const QStringList& args, int* exitCode = nullptr, QString* errorText = nullptr)
{
    QProcess p;
    p.start(QStringLiteral(TP_TPPLAN), args);
    if (!p.waitForFinished(kPlanTimeoutMs)) return nullptr;
    if (exitCode) *exitCode = p.exitCode();
    if (errorText) *errorText = QString::fromUtf8(p.readAllStandardError());
    if (p.exitCode() != 0 && p.exitCode() != 1) return nullptr;
    return nlohmann::json::parse(p.readAllStandardOutput().toStdString(), nullptr, false);
}

} // namespace

class TestSession : public QObject {
    Q_OBJECT
private slots:
    void latestJobDeliversOnlyTheLastOfABurst();
    void latestJobCancelledDeliversNothing();
    void latestJobReportsFailures();
    void onePlanningPath();
    void linkOverrideFlagsAreChecked_data();
    void linkOverrideFlagsAreChecked();
};

void TestSession::latestJobDeliversOnlyTheLastOfABurst()
{
    std::vector<int> delivered;
    LatestJob<int> jobs([&](quint64, int value) { delivered.push_back(value); });
    QSignalSpy started(&jobs, &JobTracker::started);
    QSignalSpy dropped(&jobs, &JobTracker::dropped);
    QSignalSpy idle(&jobs, &JobTracker::idle);
    std::vector<quint64> ids;
    // The first job is running (and ignores its cancel flag) when the other four arrive: its
    // value comes back after it was superseded and is dropped; the next three never start.
    std::atomic<bool> firstRunning{false};
    ids.push_back(jobs.start([&firstRunning](const std::atomic<bool>&) {
        firstRunning = true;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        return 0;
    }));
    QTRY_VERIFY(firstRunning.load());
    for (int i = 1; i < 5; ++i)
        ids.push_back(jobs.start([i](const std::atomic<bool>&) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            return i;
        }));
    QVERIFY(idle.wait(10000));
    QCOMPARE(started.size(), 5);
    // Only the fifth job's value arrives; the four before it are dropped (skipped or discarded).
    QCOMPARE(delivered, std::vector<int>{4});
    QCOMPARE(dropped.size(), 4);
    for (int i = 0; i < 4; ++i) QCOMPARE(dropped.at(i).at(0).value<quint64>(), ids[static_cast<size_t>(i)]);
    QCOMPARE(idle.size(), 1);
    QVERIFY(!jobs.isBusy());
}

void TestSession::latestJobCancelledDeliversNothing()
{
    int delivered = 0;
    LatestJob<int> jobs([&](quint64, int) { ++delivered; });
    QSignalSpy cancelled(&jobs, &JobTracker::cancelled);
    QSignalSpy dropped(&jobs, &JobTracker::dropped);
    QSignalSpy idle(&jobs, &JobTracker::idle);
    std::atomic<bool> running{false};
    const quint64 id = jobs.start([&running](const std::atomic<bool>& cancel) -> int {
        running = true;
        while (!cancel.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        throw Cancelled();
    });
    QTRY_VERIFY(running.load());
    QVERIFY(jobs.cancel());
    QVERIFY(idle.wait(10000));
    QCOMPARE(delivered, 0);
    QCOMPARE(cancelled.size(), 1);
    QCOMPARE(cancelled.at(0).at(0).value<quint64>(), id);
    QCOMPARE(dropped.size(), 0);
    QCOMPARE(jobs.interruptedJobs(), 1);
    // Cancelled after its work ended, a job still delivers nothing.
    QSignalSpy idle2(&jobs, &JobTracker::idle);
    jobs.start([](const std::atomic<bool>&) { return 7; });
    jobs.cancel();
    QVERIFY(idle2.wait(10000));
    QCOMPARE(delivered, 0);
    QCOMPARE(cancelled.size(), 2);
    QVERIFY(!jobs.cancel()); // nothing in flight
}

void TestSession::latestJobReportsFailures()
{
    LatestJob<int> jobs([](quint64, int) { QFAIL("a failed job delivers no value"); });
    QSignalSpy failed(&jobs, &JobTracker::failed);
    jobs.start([](const std::atomic<bool>&) -> int { throw InputError("model 'x': unknown"); });
    QVERIFY(failed.wait(10000));
    QCOMPARE(failed.at(0).at(1).toString(), QStringLiteral("model 'x': unknown"));
    jobs.start([](const std::atomic<bool>&) -> int { throw std::runtime_error("boom"); });
    QVERIFY(failed.wait(10000));
    QCOMPARE(failed.at(1).at(1).toString(), QStringLiteral("internal error: boom"));
}

void TestSession::onePlanningPath()
{
    // GPT-2 with two layers on 2x2, a slower intra-node link (100 GB/s instead of the preset's),
    // a lock, and a memory limit of 90% of what the unconstrained locked plan needs.
    PlanSettings settings;
    settings.model = "gpt2";
    settings.overrides = {"layers=2"};
    settings.mesh = "2x2";
    settings.intraNodeGBps = 100;
    const std::vector<LockRequest> locks = {{"layers.*/mlp/fc1", "b=x"}};
    const PlanRequest unconstrained = settings.toRequest(locks);
    auto ws = preparePlan(unconstrained);
    QCOMPARE(ws->hardware.intraNode.bandwidth, 100e9);
    const double need = runPlan(*ws, unconstrained).breakdown.perDeviceBytes;
    settings.memoryLimit = std::to_string(static_cast<long long>(0.9 * need));

    PlannerService service;
    QSignalSpy finished(&service, &PlannerService::finished);
    QSignalSpy failed(&service, &PlannerService::failed);
    service.request(settings, locks);
    QVERIFY(finished.wait(kPlanTimeoutMs) || !failed.isEmpty());
    QVERIFY2(failed.isEmpty(), failed.isEmpty() ? "" : qPrintable(failed.at(0).at(1).toString()));
    const auto outcome = finished.at(0).at(0).value<std::shared_ptr<const PlanOutcome>>();
    const Breakdown& gui = outcome->result.breakdown;
    QVERIFY(outcome->result.fits);
    QVERIFY(gui.perDeviceBytes < need); // the limit binds
    QVERIFY(outcome->result.lockedOp[static_cast<size_t>(explain::findOp(outcome->workspace->model.graph, "layers.0/mlp/fc1"))]);

    // The same settings as tpplan flags.
    const QStringList flags = {"--set",           "layers=2",
                               "--mesh",          "2x2",
                               "--intra-node-bw", "100",
                               "--memory-limit",  QString::fromStdString(settings.memoryLimit),
                               "--lock",          "layers.*/mlp/fc1=b=x"};
    const nlohmann::json cli = tpplanJson(QStringList{"plan", "gpt2", "--json"} + flags);
    QVERIFY(cli.is_object());
    QCOMPARE(cli["cost"]["step_time_s"].get<double>(), gui.stepSeconds);
    QCOMPARE(cli["memory"]["per_device_bytes"].get<double>(), gui.perDeviceBytes);
    QCOMPARE(cli["hardware"]["intra_node_GBps"].get<double>(), 100.0);

    // The GUI's plan saved, then re-read and re-costed by tpplan check.
    QTemporaryDir dir;
    const QString path = dir.filePath("gui.tpplan.json");
    {
        const PlanWorkspace& w = *outcome->workspace;
        QFile file(path);
        QVERIFY(file.open(QIODevice::WriteOnly));
        file.write(QByteArray::fromStdString(writePlanFile(planToJson(w.context, *w.costModel, w.folded, outcome->result))));
    }
    const nlohmann::json check = tpplanJson({"check", path, "--json"});
    QVERIFY(check.is_object());
    QCOMPARE(check["recomputed"]["step_time_s"].get<double>(), gui.stepSeconds);
    QCOMPARE(check["recomputed"]["per_device_bytes"].get<double>(), gui.perDeviceBytes);
    QVERIFY2(check["differences"].empty(), check["differences"].dump().c_str());
    // The re-read plan carries the link override, so it rebuilds the same workspace.
    const LoadedPlan loaded = readPlanFile(writePlanFile(planToJson(outcome->workspace->context, *outcome->workspace->costModel,
                                                                    outcome->workspace->folded, outcome->result)),
                                           "gui.tpplan.json");
    QCOMPARE(loaded.workspace->hardware.intraNode.bandwidth, 100e9);
    QCOMPARE(loaded.workspace->context.intraNodeGBps, 100.0);
}

void TestSession::linkOverrideFlagsAreChecked_data()
{
    QTest::addColumn<QString>("flag");
    QTest::addColumn<QString>("value");
    QTest::newRow("zero") << "--intra-node-bw"
                          << "0";
    QTest::newRow("negative") << "--inter-node-bw"
                              << "-5";
    QTest::newRow("text") << "--intra-node-bw"
                          << "fast";
    QTest::newRow("infinite") << "--inter-node-bw"
                              << "inf";
    QTest::newRow("trailing") << "--inter-node-bw"
                              << "25GB";
}

void TestSession::linkOverrideFlagsAreChecked()
{
    QFETCH(QString, flag);
    QFETCH(QString, value);
    int exitCode = -1;
    QString error;
    tpplanJson({"plan", "gpt2", "--set", "layers=1", flag, value}, &exitCode, &error);
    QCOMPARE(exitCode, 2);
    QCOMPARE(error.count(QLatin1Char('\n')), 1); // one line
    QVERIFY2(error.contains(flag) && error.contains(value), qPrintable(error));
}

QTEST_GUILESS_MAIN(TestSession)
#include "tst_session.moc"
