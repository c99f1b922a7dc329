#include "editbench.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <vector>

#include <QApplication>
#include <QDockWidget>
#include <QElapsedTimer>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTimer>

#include "devicesview.h"
#include "document.h"
#include "explainpanel.h"
#include "mainwindow.h"

namespace tp {

namespace {

struct EditBench {
    MainWindow* window = nullptr;
    int edits = 0;
    OpId target = -1;
    int strategy = -1;
    std::vector<double> samples;
    QElapsedTimer clock;
    double firstPlanMs = 0;
    QString editLabel;

    void fail(const QString& message)
    {
        std::fprintf(stderr, "tpstudio: --bench-edits: %s\n", qPrintable(message));
        QApplication::exit(2);
    }

    /// An op in the middle of the model with a second candidate: a Linear op of the middle
    /// instance of the largest class, as a user would pick one in the inspector.
    bool pickTarget()
    {
        Document* doc = window->document();
        const PlanWorkspace* ws = doc->workspace();
        if (!ws) return false;
        const Graph& g = ws->model.graph;
        const auto& plan = doc->plan()->result;
        int bestClass = -1;
        size_t bestCount = 0;
        for (const auto& bc : ws->folded.classes)
            if (bc.instances.size() > bestCount) {
                bestCount = bc.instances.size();
                bestClass = bc.id;
            }
        if (bestClass < 0) return false;
        const auto& bc = ws->folded.classes[static_cast<size_t>(bestClass)];
        const auto& inst = bc.instances[bc.instances.size() / 2];
        for (OpId op : inst.ops) {
            if (g.op(op).kind != OpKind::Linear) continue;
            const int n = static_cast<int>(ws->costModel->strategies(op).size());
            const int chosen = plan.strategyOfOp[static_cast<size_t>(op)];
            for (int s = 0; s < n; ++s)
                if (s != chosen) {
                    target = op;
                    strategy = s;
                    editLabel = QString::fromStdString(g.op(op).name);
                    return true;
                }
        }
        return false;
    }

    // After the edits: switching the bottom docks (each brought forward and painted, three
    // rounds), then selecting ops with the Explain and then the Devices dock in front, timed
    // from the click to the view's worker result painted (issue 21: under 100 ms).
    std::vector<double> switches, selectExplain, selectDevices;
    std::vector<OpId> selections;
    size_t step = 0;

    void nextSwitch()
    {
        const std::vector<QWidget*> docks = {window->breakdownDock(), window->explainDock(), window->timelineDock(),
                                             window->devicesDock()};
        if (step == 3 * docks.size()) {
            step = 0;
            nextSelection();
            return;
        }
        clock.restart();
        docks[step % docks.size()]->raise();
        QApplication::processEvents();
        window->repaint();
        switches.push_back(static_cast<double>(clock.nsecsElapsed()) / 1e6);
        ++step;
        QTimer::singleShot(0, window, [this] { nextSwitch(); });
    }

    void nextSelection()
    {
        if (selections.empty()) {
            // Every Linear op of the middle instance of the largest class, then as many again.
            const PlanWorkspace* ws = window->document()->workspace();
            const OpId anchor = target;
            const auto& f = ws->folded;
            const auto& inst = f.classes[static_cast<size_t>(f.classOfOp[static_cast<size_t>(anchor)])]
                                   .instances[static_cast<size_t>(f.instanceOfOp[static_cast<size_t>(anchor)])];
            for (OpId op : inst.ops)
                if (ws->model.graph.op(op).kind == OpKind::Linear) selections.push_back(op);
        }
        const size_t perView = selections.size();
        if (perView < 2 || step == 2 * perView) { // one op could not change the selection
            finish();
            return;
        }
        const bool devices = step >= perView;
        (devices ? window->devicesDock() : window->explainDock())->raise();
        QApplication::processEvents();
        auto done = [this, devices] {
            window->repaint();
            (devices ? selectDevices : selectExplain).push_back(static_cast<double>(clock.nsecsElapsed()) / 1e6);
            ++step;
            QTimer::singleShot(0, window, [this] { nextSelection(); });
        };
        if (devices)
            QObject::connect(window->devicesView(), &DevicesView::stepsShown, window, done, Qt::SingleShotConnection);
        else
            QObject::connect(window->explainPanel(), &ExplainPanel::explanationShown, window, done, Qt::SingleShotConnection);
        clock.restart();
        window->document()->setSelectedOp(selections[step % perView]);
    }

    static QJsonObject summary(std::vector<double> v)
    {
        QJsonArray all;
        for (double ms : v) all.append(ms);
        std::sort(v.begin(), v.end());
        return {{QStringLiteral("median"), v.empty() ? 0.0 : v[v.size() / 2]},
                {QStringLiteral("max"), v.empty() ? 0.0 : v.back()},
                {QStringLiteral("samples"), all}};
    }

    void nextEdit()
    {
        if (static_cast<int>(samples.size()) == edits) {
            nextSwitch();
            return;
        }
        Document* doc = window->document();
        const bool lock = samples.size() % 2 == 0;
        clock.restart();
        QObject::connect(
            doc, &Document::planChanged, window, [this] { onPlan(); }, Qt::SingleShotConnection);
        if (lock) {
            if (!doc->lockOp(target, strategy, LockScope::AllInstances)) fail("the lock was refused");
        } else {
            doc->unlockOp(target);
        }
    }

    void onPlan()
    {
        // The views updated in their planChanged slots; a synchronous repaint puts it on screen.
        window->repaint();
        samples.push_back(static_cast<double>(clock.nsecsElapsed()) / 1e6);
        QTimer::singleShot(0, window, [this] { nextEdit(); });
    }

    void finish()
    {
        std::vector<double> sorted = samples;
        std::sort(sorted.begin(), sorted.end());
        QJsonArray all;
        for (double ms : samples) all.append(ms);
        const QJsonObject out{{QStringLiteral("first_plan_ms"), firstPlanMs},
                              {QStringLiteral("edit"), QStringLiteral("lock/unlock %1 (all instances)").arg(editLabel)},
                              {QStringLiteral("edit_to_update_ms"), all},
                              {QStringLiteral("median_ms"), sorted[sorted.size() / 2]},
                              {QStringLiteral("max_ms"), sorted.back()},
                              {QStringLiteral("view_switch_ms"), summary(switches)},
                              {QStringLiteral("select_op_explain_ms"), summary(selectExplain)},
                              {QStringLiteral("select_op_devices_ms"), summary(selectDevices)}};
        std::fprintf(stdout, "%s\n", QJsonDocument(out).toJson(QJsonDocument::Compact).constData());
        std::fflush(stdout);
        QApplication::exit(0);
    }
};

} // namespace

void startEditBenchmark(MainWindow& window, int edits)
{
    auto bench = std::make_shared<EditBench>();
    bench->window = &window;
    bench->edits = std::max(1, edits);
    bench->clock.start();
    Document* doc = window.document();
    if (!doc) {
        bench->fail("no document (give a model or file)");
        return;
    }
    // This connection lives as long as the document, and with it the measurement state.
    QObject::connect(doc, &Document::errorOccurred, &window, [bench](const QString& message) { bench->fail(message); });
    QObject::connect(
        doc, &Document::planChanged, &window,
        [bench] {
            bench->window->repaint();
            bench->firstPlanMs = static_cast<double>(bench->clock.nsecsElapsed()) / 1e6;
            if (!bench->pickTarget()) {
                bench->fail("no op with a second candidate to lock");
                return;
            }
            QTimer::singleShot(0, bench->window, [bench] { bench->nextEdit(); });
        },
        Qt::SingleShotConnection);
}

} // namespace tp
