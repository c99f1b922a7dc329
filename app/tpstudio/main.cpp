// tpstudio [FILE|MODEL] [--mesh 2x8 --hardware h100-dgx ...] [--screenshot out.png
//          [--screenshot-view window|graph|breakdown|explain|timeline|devices|compare]]
//          [--select OP --screenshot-explain explain.png] [--bench-edits N]
#include <QApplication>
#include <QCommandLineParser>
#include <QDockWidget>
#include <QElapsedTimer>
#include <QTimer>

#include <cstdio>

#include "document.h"
#include "explainpanel.h"
#include "editbench.h"
#include "graphview.h"
#include "mainwindow.h"
#include "recovery.h"
#include "devicesview.h"
#include "timelineview.h"

namespace {

bool saveGrab(QWidget* widget, const QString& path)
{
    const QPixmap pixmap = widget->grab();
    if (pixmap.save(path)) return true;
    std::fprintf(stderr, "tpstudio: %s: cannot write the screenshot\n", qPrintable(path));
    return false;
}

const QStringList kScreenshotViews = {QStringLiteral("window"), QStringLiteral("graph"), QStringLiteral("breakdown"),
                                       QStringLiteral("explain"), QStringLiteral("timeline"), QStringLiteral("devices"),
                                       QStringLiteral("compare")};

/// What `--screenshot-view` names (checked against kScreenshotViews before the window opens).
QWidget* viewToGrab(tp::MainWindow& window, const QString& view)
{
    if (view == QStringLiteral("graph")) return window.graphView();
    if (view == QStringLiteral("breakdown")) return window.breakdownDock();
    if (view == QStringLiteral("explain")) return window.explainDock();
    if (view == QStringLiteral("timeline")) return window.timelineDock();
    if (view == QStringLiteral("devices")) return window.devicesDock();
    return &window;
}

/// The options tpstudio takes (the comment at the top of this file), added to a parser.
struct CommandLine {
    QCommandLineOption mesh{QStringLiteral("mesh"), QStringLiteral("Device mesh, e.g. 8, 2x8, 4x4x8."), QStringLiteral("shape")};
    QCommandLineOption hardware{QStringLiteral("hardware"), QStringLiteral("Hardware preset or JSON file."),
                                QStringLiteral("name")};
    QCommandLineOption batch{QStringLiteral("batch"), QStringLiteral("Global batch."), QStringLiteral("n")};
    QCommandLineOption seq{QStringLiteral("seq"), QStringLiteral("Sequence length."), QStringLiteral("n")};
    QCommandLineOption microBatch{QStringLiteral("micro-batch"),
                                  QStringLiteral("Micro-batch (gradient accumulation): auto or n."), QStringLiteral("n")};
    QCommandLineOption zero{QStringLiteral("zero"), QStringLiteral("ZeRO stage: auto, 0, 1, 2 or 3."), QStringLiteral("stage")};
    QCommandLineOption mode{QStringLiteral("mode"), QStringLiteral("train or infer."), QStringLiteral("mode")};
    QCommandLineOption pipeline{QStringLiteral("pipeline"), QStringLiteral("Pipeline stages: auto or a number (1: none)."),
                                QStringLiteral("stages")};
    QCommandLineOption schedule{QStringLiteral("schedule"), QStringLiteral("Pipeline schedule: auto, 1f1b or interleaved:V."),
                                QStringLiteral("schedule")};
    QCommandLineOption stageLayers{QStringLiteral("stage-layers"),
                                   QStringLiteral("Pipeline stage boundaries: auto, even, or F,L (first and last stage's layers)."),
                                   QStringLiteral("layers")};
    QCommandLineOption memoryLimit{QStringLiteral("memory-limit"), QStringLiteral("e.g. 80GiB, none."), QStringLiteral("bytes")};
    QCommandLineOption lock{QStringLiteral("lock"), QStringLiteral("GLOB=STRATEGY (repeatable)."), QStringLiteral("lock")};
    QCommandLineOption select{QStringLiteral("select"), QStringLiteral("Op to select (name)."), QStringLiteral("op")};
    QCommandLineOption screenshot{QStringLiteral("screenshot"),
                                  QStringLiteral("Render the window after the first plan, save, exit."), QStringLiteral("png")};
    QCommandLineOption screenshotBreakdown{QStringLiteral("screenshot-breakdown"),
                                           QStringLiteral("Also save the Breakdown dock."), QStringLiteral("png")};
    QCommandLineOption screenshotExplain{QStringLiteral("screenshot-explain"),
                                         QStringLiteral("Also save the Explain dock for the --select op."),
                                         QStringLiteral("png")};
    QCommandLineOption screenshotView{QStringLiteral("screenshot-view"),
                                      QStringLiteral("What --screenshot draws: window (default), graph, breakdown, explain, "
                                                     "timeline or devices (that view alone, brought forward; the timeline "
                                                     "zoomed to the --select op's layer, the devices at its compute), or "
                                                     "compare (the window with the plan comparison and its marks)."),
                                      QStringLiteral("view")};
    QCommandLineOption size{QStringLiteral("size"), QStringLiteral("Window size for screenshots, e.g. 1720x1080."),
                            QStringLiteral("WxH")};
    QCommandLineOption benchEdits{
        QStringLiteral("bench-edits"),
        QStringLiteral("Time N edits (lock/unlock an op) to the updated plan on screen, print JSON, exit."), QStringLiteral("N")};
    QCommandLineParser parser;

    CommandLine()
    {
        parser.setApplicationDescription(QStringLiteral("Visualizer and planner for tensor parallelism"));
        parser.addHelpOption();
        parser.addVersionOption();
        parser.addPositionalArgument(
            QStringLiteral("source"),
            QStringLiteral("built-in model name, .tpgraph.json, .onnx, config.json, .tpproj.json or .tpplan.json"));
        parser.addOptions({mesh, hardware, batch, seq, microBatch, zero, mode, pipeline, schedule, stageLayers, memoryLimit, lock, select, screenshot,
                           screenshotBreakdown, screenshotExplain, screenshotView, size, benchEdits});
    }

    tp::PlanSettings settings() const
    {
        tp::PlanSettings base;
        if (parser.isSet(mesh)) base.mesh = parser.value(mesh).toStdString();
        if (parser.isSet(hardware)) base.hardware = parser.value(hardware).toStdString();
        if (parser.isSet(batch)) base.batch = parser.value(batch).toLongLong();
        if (parser.isSet(seq)) base.seq = parser.value(seq).toLongLong();
        // "auto", or a number (a bad one is refused by the planner, naming the setting).
        auto autoOr = [](const QString& v, std::int64_t bad) {
            return v == QStringLiteral("auto") ? tp::kAuto
                                               : (v.toLongLong() > 0 || v == QStringLiteral("0") ? v.toLongLong() : bad);
        };
        if (parser.isSet(microBatch)) base.microBatch = autoOr(parser.value(microBatch), -2);
        if (parser.isSet(zero)) base.zero = static_cast<int>(autoOr(parser.value(zero), 4));
        if (parser.isSet(mode)) base.mode = parser.value(mode).toStdString();
        if (parser.isSet(pipeline)) base.pipeline = static_cast<int>(autoOr(parser.value(pipeline), 0));
        if (parser.isSet(schedule)) base.schedule = parser.value(schedule).toStdString();
        if (parser.isSet(stageLayers)) base.stageLayers = parser.value(stageLayers).toStdString();
        if (parser.isSet(memoryLimit)) base.memoryLimit = parser.value(memoryLimit).toStdString();
        return base;
    }
    bool measuring() const { return parser.isSet(benchEdits); }
    bool headless() const
    {
        return parser.isSet(screenshot) || parser.isSet(screenshotBreakdown) || parser.isSet(screenshotExplain) || measuring();
    }
};

/// Opens what the command line names (or what crash recovery restores, or the start page).
/// Returns an exit code when tpstudio must stop at once, else -1.
int openFromCommandLine(tp::MainWindow& window, const CommandLine& cl)
{
    const bool headless = cl.headless();
    // Autosave and crash recovery (docs/RELIABILITY.md "Nothing lost"); screenshots leave no files.
    bool restored = false;
    if (!headless) {
        window.enableRecovery();
        restored = window.offerRecovery();
    }
    const QStringList positional = cl.parser.positionalArguments();
    if (restored) return -1; // the restored edits replace the file named on the command line
    if (positional.isEmpty()) {
        window.showStartPage();
        return -1;
    }
    if (!window.openSource(positional.first(), cl.settings())) {
        std::fprintf(stderr, "tpstudio: %s\n", qPrintable(window.statusText()));
        return headless ? 2 : -1;
    }
    if (cl.parser.isSet(cl.lock)) {
        std::vector<tp::LockRequest> locks = window.document()->locks();
        try {
            for (const auto& text : cl.parser.values(cl.lock)) locks.push_back(tp::parseLockRequest(text.toStdString()));
        } catch (const std::exception& e) {
            std::fprintf(stderr, "tpstudio: %s\n", e.what());
            return 2;
        }
        window.openSettings(window.document()->settings(), locks);
    }
    return -1;
}

/// After the first plan: select the --select op, wait for dot's layout (and the explanation,
/// when asked), save the screenshots and exit.
void screenshotAfterFirstPlan(QApplication& app, tp::MainWindow& window, const CommandLine& cl, const QElapsedTimer& clock)
{
    tp::Document* doc = window.document();
    const QString selectName = cl.parser.value(cl.select);
    QObject::connect(doc, &tp::Document::errorOccurred, &app, [](const QString& message) {
        std::fprintf(stderr, "tpstudio: %s\n", qPrintable(message));
        QApplication::exit(2);
    });
    QObject::connect(
        doc, &tp::Document::planChanged, &app,
        [&, doc, selectName] {
            if (!selectName.isEmpty())
                for (const auto& op : doc->workspace()->model.graph.ops)
                    if (QString::fromStdString(op.name) == selectName) doc->setSelectedOp(op.id);
            auto grabAll = [&] {
                // Let the views lay out and paint once before grabbing.
                QTimer::singleShot(50, &app, [&] {
                    int rc = 0;
                    if (cl.parser.isSet(cl.screenshot) && !saveGrab(viewToGrab(window, cl.parser.value(cl.screenshotView)),
                                                                    cl.parser.value(cl.screenshot)))
                        rc = 1;
                    if (cl.parser.isSet(cl.screenshotBreakdown) &&
                        !saveGrab(window.breakdownDock(), cl.parser.value(cl.screenshotBreakdown)))
                        rc = 1;
                    if (cl.parser.isSet(cl.screenshotExplain) &&
                        !saveGrab(window.explainDock(), cl.parser.value(cl.screenshotExplain)))
                        rc = 1;
                    std::fprintf(stderr, "tpstudio: first plan and screenshot in %lld ms\n",
                                 static_cast<long long>(clock.elapsed()));
                    QApplication::exit(rc);
                });
            };
            // Pictures show dot's layout, not the stand-in: wait for it when it is still running.
            auto waitForLayout = [&, grabAll] {
                if (window.graphView()->isLayingOut())
                    QObject::connect(window.graphView(), &tp::GraphView::layoutFinished, &app, grabAll, Qt::SingleShotConnection);
                else
                    grabAll();
            };
            if (cl.parser.value(cl.screenshotView) == QStringLiteral("timeline")) {
                window.timelineDock()->raise();
                window.resizeDocks({window.timelineDock()}, {window.height() * 2 / 5}, Qt::Vertical);
                // With --select: the selected op's layer, as double-clicking it shows it.
                if (doc->selectedOp() >= 0) window.timelineView()->zoomToLayerOf(doc->selectedOp());
            } else if (cl.parser.value(cl.screenshotView) == QStringLiteral("breakdown")) {
                window.breakdownDock()->raise();
            } else if (cl.parser.value(cl.screenshotView) == QStringLiteral("explain")) {
                window.explainDock()->raise();
                window.resizeDocks({window.explainDock()}, {window.height() * 2 / 3}, Qt::Vertical);
            }
            if (cl.parser.value(cl.screenshotView) == QStringLiteral("compare")) {
                // The whole window: the comparison's tables and its marks on the graph.
                window.explainDock()->raise();
                window.resizeDocks({window.explainDock()}, {window.height() * 3 / 5}, Qt::Vertical);
                window.explainPanel()->showCompareTab();
                QObject::connect(window.explainPanel(), &tp::ExplainPanel::comparisonShown, &app, waitForLayout,
                                 Qt::SingleShotConnection);
                return;
            }
            if (cl.parser.value(cl.screenshotView) == QStringLiteral("devices")) {
                // The op's steps are computed on a worker: grab once they are on screen.
                window.devicesDock()->raise();
                window.resizeDocks({window.devicesDock()}, {window.height() / 2}, Qt::Vertical);
                if (doc->selectedOp() >= 0) {
                    QObject::connect(window.devicesView(), &tp::DevicesView::stepsShown, &app, waitForLayout,
                                     Qt::SingleShotConnection);
                    return;
                }
            }
            if (cl.parser.isSet(cl.screenshotExplain) && doc->selectedOp() >= 0) {
                // The explanation is computed on a worker: grab once it is on screen.
                window.explainDock()->raise();
                // Tall enough that the mesh pictures and the why-not table are readable.
                window.resizeDocks({window.explainDock()}, {window.height() * 2 / 3}, Qt::Vertical);
                QObject::connect(window.explainPanel(), &tp::ExplainPanel::explanationShown, &app, waitForLayout,
                                 Qt::SingleShotConnection);
            } else {
                waitForLayout();
            }
        },
        Qt::SingleShotConnection);
}

} // namespace

int main(int argc, char** argv)
{
    QApplication app(argc, argv);
    QApplication::setApplicationName(QStringLiteral("TP Studio"));
    QApplication::setOrganizationName(QStringLiteral("TP Studio"));
    QApplication::setApplicationVersion(QStringLiteral("0.1.0"));
    CommandLine cl;
    cl.parser.process(app);

    if (cl.parser.isSet(cl.screenshotView) && !kScreenshotViews.contains(cl.parser.value(cl.screenshotView))) {
        std::fprintf(stderr, "tpstudio: --screenshot-view: unknown view '%s' (one of %s)\n",
                     qPrintable(cl.parser.value(cl.screenshotView)), qPrintable(kScreenshotViews.join(QStringLiteral(", "))));
        return 2;
    }
    if (cl.parser.isSet(cl.screenshotView) && !cl.parser.isSet(cl.screenshot)) {
        std::fprintf(stderr, "tpstudio: --screenshot-view needs --screenshot FILE\n");
        return 2;
    }
    const bool headless = cl.headless();
    tp::MainWindow window(!headless);
    if (cl.parser.isSet(cl.size)) {
        const auto wh = cl.parser.value(cl.size).split(QLatin1Char('x'));
        if (wh.size() == 2) window.resize(wh[0].toInt(), wh[1].toInt());
    } else if (headless) {
        window.resize(1720, 1080);
    }
    if (const int rc = openFromCommandLine(window, cl); rc >= 0) return rc;
    window.show();
    if (!headless) return app.exec();
    if (cl.parser.positionalArguments().isEmpty()) {
        std::fprintf(stderr, "tpstudio: --screenshot needs a model or file\n");
        return 2;
    }
    if (cl.measuring()) {
        tp::startEditBenchmark(window, cl.parser.value(cl.benchEdits).toInt());
        return app.exec();
    }
    QElapsedTimer clock;
    clock.start();
    screenshotAfterFirstPlan(app, window, cl, clock);
    return app.exec();
}
