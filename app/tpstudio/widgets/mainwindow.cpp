#include "mainwindow.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QComboBox>
#include <QDockWidget>
#include <QFileDialog>
#include <QFileInfo>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QPainter>
#include <QSaveFile>
#include <QScrollArea>
#include <QSettings>
#include <QStackedWidget>
#include <QStatusBar>
#include <QSvgGenerator>
#include <QToolBar>
#include <QTimer>
#include <QToolButton>
#include <QTreeView>

#include "blockoutlinemodel.h"
#include "outlinefeed.h"
#include "export/export_plan.h"
#include "plan/plan.h"
#include "plan/plan_file.h"
#include "util/error.h"
#include "breakdownview.h"
#include "explainpanel.h"
#include "graphview.h"
#include "inspector.h"
#include "meshpanel.h"
#include "presentation.h"
#include "recovery.h"
#include "startpage.h"
#include "devicesview.h"
#include "timelineview.h"

namespace tp {

namespace {
constexpr int kMaxRecent = 10;
const char* kFileFilter = "All supported (*.tpproj.json *.tpplan.json *.tpgraph.json *.onnx *.json);;"
                          "Projects (*.tpproj.json);;Plans (*.tpplan.json);;Graphs (*.tpgraph.json);;ONNX (*.onnx);;"
                          "Hugging Face config (config.json *.json)";
MainWindow::QuestionHook& questionHook()
{
    static MainWindow::QuestionHook hook;
    return hook;
}
} // namespace

void MainWindow::setQuestionHook(QuestionHook hook) { questionHook() = std::move(hook); }

QMessageBox::StandardButton MainWindow::ask(const QString& title, const QString& text, QMessageBox::StandardButtons buttons,
                                            QMessageBox::StandardButton defaultButton, const QString& openLabel)
{
    if (questionHook()) return questionHook()(title, text, buttons);
    QMessageBox box(QMessageBox::Question, title, text, buttons, this);
    box.setDefaultButton(defaultButton);
    if (!openLabel.isEmpty() && box.button(QMessageBox::Open)) box.button(QMessageBox::Open)->setText(openLabel);
    return static_cast<QMessageBox::StandardButton>(box.exec());
}

MainWindow::MainWindow(bool persistentSettings, QWidget* parent) : QMainWindow(parent), persistent_(persistentSettings)
{
    setWindowTitle(QStringLiteral("TP Studio"));
    setAcceptDrops(true);
    resize(1500, 940);
    stack_ = new QStackedWidget(this);
    // The start page scrolls: a stack is as large as its largest page, and the start page's
    // buttons would otherwise hold the window wider than a 1280-pixel screen.
    startScroll_ = new QScrollArea(stack_);
    start_ = new StartPage(startScroll_);
    startScroll_->setWidget(start_);
    startScroll_->setWidgetResizable(true);
    startScroll_->setFrameShape(QFrame::NoFrame);
    graph_ = new GraphView(stack_);
    stack_->addWidget(startScroll_);
    stack_->addWidget(graph_);
    setCentralWidget(stack_);
    connect(start_, &StartPage::openRequested, this, [this](const QString& s) { openSource(s); });
    connect(start_, &StartPage::openFileRequested, this, &MainWindow::openDialog);

    createDocks();
    createActions();
    status_ = new QLabel(this);
    statusBar()->addPermanentWidget(status_, 1);
    // Shown only while a search runs.
    cancelButton_ = new QToolButton(this);
    cancelButton_->setDefaultAction(cancelSearch_);
    cancelButton_->setToolButtonStyle(Qt::ToolButtonTextOnly);
    cancelButton_->setVisible(false);
    statusBar()->addPermanentWidget(cancelButton_);
    fitButton_ = new QToolButton(this);
    fitButton_->setDefaultAction(useFittingMesh_);
    fitButton_->setToolButtonStyle(Qt::ToolButtonTextOnly);
    fitButton_->setVisible(false);
    statusBar()->addPermanentWidget(fitButton_);
    searchClock_ = new QTimer(this);
    searchClock_->setInterval(250);
    connect(searchClock_, &QTimer::timeout, this, &MainWindow::updateStatus);
    setDocument(std::make_unique<Document>());
    rebuildRecentMenu();
    if (persistent_) {
        QSettings settings;
        restoreGeometry(settings.value(QStringLiteral("window/geometry")).toByteArray());
        restoreState(settings.value(QStringLiteral("window/state")).toByteArray());
        breakdown_->setLogScale(settings.value(QStringLiteral("breakdown/logScale"), false).toBool());
        connect(breakdown_, &BreakdownView::logScaleChanged, this,
                [](bool on) { QSettings().setValue(QStringLiteral("breakdown/logScale"), on); });
    }
}

MainWindow::~MainWindow()
{
    // Views hold QPointers to the document; detach them before it goes.
    std::unique_ptr<Document> doc = std::move(document_);
    if (doc) {
        disconnect(doc.get(), nullptr, this, nullptr);
        disconnect(doc->undoStack(), nullptr, this, nullptr);
    }
    graph_->setDocument(nullptr);
    outlineFeed_->setDocument(nullptr);
    inspector_->setDocument(nullptr);
    breakdown_->setDocument(nullptr);
    meshPanel_->setDocument(nullptr);
    explain_->setDocument(nullptr);
    timeline_->setDocument(nullptr);
    devices_->setDocument(nullptr);
}

void MainWindow::createDocks()
{
    setDockNestingEnabled(true);
    outline_ = new BlockOutlineModel(this);
    outlineFeed_ = new OutlineFeed(outline_, this);
    outlineView_ = new QTreeView(this);
    outlineView_->setModel(outline_);
    outlineView_->setUniformRowHeights(true);
    outlineView_->setAlternatingRowColors(true);
    outlineView_->header()->setSectionResizeMode(QHeaderView::ResizeToContents);
    outlineView_->setSelectionMode(QAbstractItemView::SingleSelection);
    auto* blocksDock = new QDockWidget(tr("Blocks"), this);
    blocksDock->setObjectName(QStringLiteral("BlocksDock"));
    blocksDock->setWidget(outlineView_);
    addDockWidget(Qt::LeftDockWidgetArea, blocksDock);
    connect(outlineView_->selectionModel(), &QItemSelectionModel::currentChanged, this, [this](const QModelIndex& current) {
        if (selecting_ || !document_) return;
        const int op = current.sibling(current.row(), 0).data(BlockOutlineModel::OpIdRole).toInt();
        if (op >= 0) document_->setSelectedOp(op);
    });

    inspector_ = new Inspector(this);
    auto* inspectorDock = new QDockWidget(tr("Inspector"), this);
    inspectorDock->setObjectName(QStringLiteral("InspectorDock"));
    inspectorDock->setWidget(inspector_);
    addDockWidget(Qt::RightDockWidgetArea, inspectorDock);

    meshPanel_ = new MeshPanel(this);
    // No "&": the title bar shows it as written but the tab bar of tabified docks as a mnemonic.
    auto* meshDock = new QDockWidget(tr("Mesh and Hardware"), this);
    meshDock->setObjectName(QStringLiteral("MeshDock"));
    // Scrolled: its form is taller than a 1280x800 screen leaves the right column, and unscrolled
    // it set the window's minimum height past the screen (the status bar fell off the bottom).
    auto* meshScroll = new QScrollArea(meshDock);
    meshScroll->setWidget(meshPanel_);
    meshScroll->setWidgetResizable(true);
    meshScroll->setFrameShape(QFrame::NoFrame);
    meshDock->setWidget(meshScroll);
    addDockWidget(Qt::RightDockWidgetArea, meshDock);
    tabifyDockWidget(meshDock, inspectorDock);
    inspectorDock->raise();

    breakdown_ = new BreakdownView(this);
    breakdownDock_ = new QDockWidget(tr("Breakdown"), this);
    breakdownDock_->setObjectName(QStringLiteral("BreakdownDock"));
    breakdownDock_->setWidget(breakdown_);
    addDockWidget(Qt::BottomDockWidgetArea, breakdownDock_);

    // Explain sits next to Breakdown: its tables are wide, and the bottom area is the widest.
    explain_ = new ExplainPanel(this);
    explainDock_ = new QDockWidget(tr("Explain"), this);
    explainDock_->setObjectName(QStringLiteral("ExplainDock"));
    auto* explainScroll = new QScrollArea(explainDock_); // as the mesh panel, below
    explainScroll->setWidget(explain_);
    explainScroll->setWidgetResizable(true);
    explainScroll->setFrameShape(QFrame::NoFrame);
    explainDock_->setWidget(explainScroll);
    addDockWidget(Qt::BottomDockWidgetArea, explainDock_);
    tabifyDockWidget(breakdownDock_, explainDock_);
    connect(explain_, &ExplainPanel::differencesToMark, graph_, &GraphView::setMarkedOps);

    timeline_ = new TimelineView(this);
    timelineDock_ = new QDockWidget(tr("Timeline"), this);
    timelineDock_->setObjectName(QStringLiteral("TimelineDock"));
    timelineDock_->setWidget(timeline_);
    addDockWidget(Qt::BottomDockWidgetArea, timelineDock_);
    tabifyDockWidget(explainDock_, timelineDock_);

    devices_ = new DevicesView(this);
    devicesDock_ = new QDockWidget(tr("Devices"), this);
    devicesDock_->setObjectName(QStringLiteral("DevicesDock"));
    devicesDock_->setWidget(devices_);
    addDockWidget(Qt::BottomDockWidgetArea, devicesDock_);
    tabifyDockWidget(timelineDock_, devicesDock_);
    breakdownDock_->raise();
}

QWidget* MainWindow::breakdownDock() const { return breakdownDock_; }

void MainWindow::createActions()
{
    // File
    QMenu* file = menuBar()->addMenu(tr("&File"));
    file->addAction(tr("&Open…"), QKeySequence::Open, this, &MainWindow::openDialog);
    QMenu* models = file->addMenu(tr("Open &Built-in Model"));
    for (const auto& name : builtinModelNames()) {
        const QString n = QString::fromStdString(name);
        models->addAction(n, this, [this, n] { openSource(n); });
    }
    recentMenu_ = file->addMenu(tr("Open &Recent"));
    file->addAction(tr("&Start Page"), this, &MainWindow::showStartPage);
    file->addSeparator();
    file->addAction(tr("&Save Project"), QKeySequence::Save, this, &MainWindow::save);
    file->addAction(tr("Save Project &As…"), QKeySequence::SaveAs, this, &MainWindow::saveAs);
    QMenu* exportMenu = file->addMenu(tr("&Export"));
    exportMenu->addAction(tr("Plan (.tpplan.json)…"), QKeySequence(Qt::CTRL | Qt::Key_E), this, &MainWindow::exportPlanJson);
    // Every format of core/export/export_plan (CSV, DOT/SVG/PNG by Graphviz, PyTorch, Megatron, HF).
    for (const auto& format : exportFormats()) {
        const QString f = QString::fromStdString(format);
        exportMenu->addAction(tr("%1…").arg(f.toUpper()), this, [this, f] { exportFormat(f); });
    }
    exportMenu->addSeparator();
    exportMenu->addAction(tr("Graph view as shown (PNG or SVG)…"), this, &MainWindow::exportGraphImage);
    file->addSeparator();
    file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);

    // Edit
    QMenu* edit = menuBar()->addMenu(tr("&Edit"));
    undo_ = edit->addAction(tr("&Undo"));
    undo_->setShortcut(QKeySequence::Undo);
    redo_ = edit->addAction(tr("&Redo"));
    redo_->setShortcuts({QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_Z), QKeySequence::Redo});
    connect(undo_, &QAction::triggered, this, [this] { document_->undoStack()->undo(); });
    connect(redo_, &QAction::triggered, this, [this] { document_->undoStack()->redo(); });
    edit->addSeparator();
    edit->addAction(tr("&Lock Selected Op"), QKeySequence(Qt::CTRL | Qt::Key_L), this, [this] {
        const OpId op = document_->selectedOp();
        if (op >= 0 && document_->plan())
            document_->lockOp(op, document_->plan()->result.strategyOfOp[static_cast<size_t>(op)], inspector_->scope());
    });
    edit->addAction(tr("U&nlock Selected Op"), QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_L), this, [this] {
        if (document_->selectedOp() >= 0) document_->unlockOp(document_->selectedOp());
    });
    edit->addAction(tr("&Find Op…"), QKeySequence::Find, this, [this] {
        find_->setFocus();
        find_->selectAll();
    });

    // View
    QMenu* view = menuBar()->addMenu(tr("&View"));
    view->addAction(tr("Zoom &In"), QKeySequence(Qt::CTRL | Qt::Key_Equal), graph_, &GraphView::zoomIn)
        ->setShortcuts({QKeySequence(Qt::CTRL | Qt::Key_Equal), QKeySequence::ZoomIn});
    view->addAction(tr("Zoom &Out"), QKeySequence::ZoomOut, graph_, &GraphView::zoomOut);
    view->addAction(tr("&Fit"), QKeySequence(Qt::Key_F), graph_, &GraphView::fitAll);
    view->addAction(tr("Fit &Width"), QKeySequence(Qt::SHIFT | Qt::Key_F), graph_, &GraphView::fitWidth);
    QAction* minimap = view->addAction(tr("&Overview"));
    minimap->setCheckable(true);
    minimap->setChecked(true);
    connect(minimap, &QAction::toggled, graph_, &GraphView::setMinimapVisible);
    createDockActions(view);
    createStageActions(view);

    // Plan
    QMenu* plan = menuBar()->addMenu(tr("&Plan"));
    plan->addAction(tr("Compare With &Saved Plan…"), QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_C), this, [this] {
        const QString path = QFileDialog::getOpenFileName(this, tr("Compare with a saved plan"), QString(), tr("Plans (*.tpplan.json)"));
        if (!path.isEmpty()) compareWithPlanFile(path, true);
    });
    plan->addAction(tr("&Clear Locks"), this, [this] { document_->setLocks({}, tr("Clear locks")); });
    plan->addAction(tr("Memory Limit: &Capacity"), this, [this] { document_->setMemoryLimit({}); });
    plan->addAction(tr("Memory Limit: &None"), this, [this] { document_->setMemoryLimit(QStringLiteral("none")); });
    QMenu* mode = plan->addMenu(tr("&Mode"));
    mode->addAction(tr("&Training"), this, [this] { document_->setMode(QStringLiteral("train")); });
    mode->addAction(tr("&Inference"), this, [this] { document_->setMode(QStringLiteral("infer")); });
    plan->addSeparator();
    // Esc stops the running search; the action is disabled (and Esc left to the focused widget)
    // when none runs.
    cancelSearch_ = plan->addAction(tr("Cancel &Search"), QKeySequence(Qt::Key_Escape), this, [this] {
        if (document_) document_->cancelSearch();
    });
    cancelSearch_->setToolTip(tr("Stop the running search (Esc); the last edit stays, without a plan"));
    cancelSearch_->setEnabled(false);
    // Where nothing fits the mesh, the status bar names the smallest preset mesh on which a plan
    // fits (core/plan/mesh_fit.h); this switches to it, as an undoable mesh edit.
    useFittingMesh_ = plan->addAction(tr("Use the Mesh That &Fits"), QKeySequence(tr("Ctrl+Shift+M")), this, [this] {
        const auto outcome = document_ ? document_->plan() : nullptr;
        if (outcome && outcome->fitsOn) document_->setMesh(QString::fromStdString(outcome->fitsOn->mesh));
    });
    useFittingMesh_->setEnabled(false);

    createHelpMenu();

    // Toolbar
    QToolBar* bar = addToolBar(tr("Plan inputs"));
    bar->setObjectName(QStringLiteral("PlanToolBar"));
    bar->setMovable(false);
    bar->addWidget(new QLabel(tr(" model: "), bar));
    modelCombo_ = new QComboBox(bar);
    modelCombo_->setEditable(true);
    modelCombo_->setMinimumContentsLength(14);
    for (const auto& name : builtinModelNames()) modelCombo_->addItem(QString::fromStdString(name));
    bar->addWidget(modelCombo_);
    bar->addWidget(new QLabel(tr("  mesh: "), bar));
    meshCombo_ = new QComboBox(bar);
    meshCombo_->setEditable(true);
    meshCombo_->addItems({QStringLiteral("8"), QStringLiteral("2x8"), QStringLiteral("4x8"), QStringLiteral("8x8"),
                          QStringLiteral("16x8"), QStringLiteral("4x4x8")});
    meshCombo_->setValidator(new MeshShapeValidator(meshCombo_));
    meshCombo_->setMinimumContentsLength(6);
    bar->addWidget(meshCombo_);
    bar->addWidget(new QLabel(tr("  hardware: "), bar));
    hardwareCombo_ = new QComboBox(bar);
    for (const auto& name : hardwarePresetNames()) hardwareCombo_->addItem(QString::fromStdString(name));
    bar->addWidget(hardwareCombo_);
    auto* spacer = new QWidget(bar);
    spacer->setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Preferred);
    bar->addWidget(spacer);
    find_ = new QLineEdit(bar);
    find_->setPlaceholderText(tr("Find op (Ctrl+F)"));
    find_->setClearButtonEnabled(true);
    find_->setMaximumWidth(240);
    bar->addWidget(find_);
    connect(find_, &QLineEdit::returnPressed, this, [this] {
        if (!graph_->findNext(find_->text())) statusBar()->showMessage(tr("No op matches '%1'").arg(find_->text()), 4000);
    });
    connect(modelCombo_, &QComboBox::activated, this, [this] {
        if (modelCombo_->currentText().toStdString() != document_->settings().model) {
            PlanSettings base = document_->settings();
            openSource(modelCombo_->currentText(), base);
        }
    });
    connect(meshCombo_, &QComboBox::activated, this, [this] { document_->setMesh(meshCombo_->currentText()); });
    connect(hardwareCombo_, &QComboBox::activated, this, [this] { document_->setHardware(hardwareCombo_->currentText()); });
}

void MainWindow::createHelpMenu()
{
    QMenu* help = menuBar()->addMenu(tr("&Help"));
    help->addAction(tr("&Keyboard Shortcuts"), this, [this] {
        QMessageBox::information(this, tr("Keyboard shortcuts"),
                                 tr("Ctrl+O open · Ctrl+S save · Ctrl+E export plan\n"
                                    "Ctrl+Z undo · Ctrl+Shift+Z redo\n"
                                    "Ctrl+L lock selected op · Ctrl+Shift+L unlock\n"
                                    "Ctrl+Shift+M use the smallest mesh that fits (when nothing fits)\n"
                                    "Ctrl+Shift+E explain the selected op · Ctrl+Shift+C compare with a saved plan\n"
                                    "    (or drop a .tpplan.json of the same model on the window)\n"
                                    "Ctrl+Shift+T step timeline: wheel or +/- zoom, drag or arrows pan,\n"
                                    "    0 the whole step, click an op to select it, double-click for its layer\n"
                                    "Ctrl+Shift+D devices of the selected op: Space play/pause, arrows step,\n"
                                    "    Home/End first/last step, +/- speed\n"
                                    "Ctrl+F find op · F fit · Shift+F fit width\n"
                                    "Ctrl+= / Ctrl+- zoom · Ctrl+wheel zoom · drag to pan\n"
                                    "Double-click a block header to expand or collapse it;\n"
                                    "double-click a candidate in the Inspector to lock it."));
    });
    help->addAction(tr("&About TP Studio"), this, [this] {
        QMessageBox::about(this, tr("About TP Studio"),
                           tr("<b>TP Studio</b> %1<p>A visualizer and planner for tensor parallelism: folded graphs, exact "
                              "search of every operator's sharding, live re-search around your locks.</p>")
                               .arg(QApplication::applicationVersion()));
    });
}

void MainWindow::setDocument(std::unique_ptr<Document> document)
{
    std::unique_ptr<Document> old = std::move(document_);
    if (old) {
        // The old document goes at the end of this function: it has nothing more to say here.
        disconnect(old.get(), nullptr, this, nullptr);
        disconnect(old->undoStack(), nullptr, this, nullptr);
        // Its search is cancelled; the GUI does not wait for the worker to notice (up to one
        // block table): the document is deleted once its service is idle, or with the window.
        old->service().shutdown();
        if (old->service().isBusy()) {
            Document* dying = old.release();
            dying->setParent(this);
            connect(&dying->service(), &PlannerService::idle, dying, &QObject::deleteLater);
        }
    }
    document_ = std::move(document);
    Document* doc = document_.get();
    graph_->setDocument(doc);
    outlineFeed_->setDocument(doc);
    inspector_->setDocument(doc);
    breakdown_->setDocument(doc);
    meshPanel_->setDocument(doc);
    explain_->setDocument(doc);
    timeline_->setDocument(doc);
    devices_->setDocument(doc);
    connect(doc, &Document::planChanged, this, [this] {
        lastError_.clear();
        stack_->setCurrentWidget(graph_);
        updateStageActions();
        updateStatus();
    });
    connect(doc, &Document::searchStarted, this, &MainWindow::updateStatus);
    connect(doc, &Document::searchCancelled, this, [this] {
        statusBar()->showMessage(tr("Search cancelled; the plan shown is for the previous inputs"), 8000);
        updateStatus();
    });
    connect(doc, &Document::settingsChanged, this, &MainWindow::updateToolbar);
    connect(doc, &Document::locksChanged, this, &MainWindow::updateStatus);
    connect(doc, &Document::errorOccurred, this, &MainWindow::showError);
    connect(doc, &Document::fileChanged, this, &MainWindow::updateTitle);
    connect(doc->undoStack(), &EditHistory::indexChanged, this, &MainWindow::updateStatus);
    connect(doc->undoStack(), &EditHistory::cleanChanged, this, &MainWindow::updateTitle);
    connect(doc->undoStack(), &EditHistory::canUndoChanged, undo_, &QAction::setEnabled);
    connect(doc->undoStack(), &EditHistory::canRedoChanged, redo_, &QAction::setEnabled);
    connect(doc->undoStack(), &EditHistory::undoTextChanged, this,
            [this](const QString& t) { undo_->setText(tr("&Undo %1").arg(t)); });
    connect(doc->undoStack(), &EditHistory::redoTextChanged, this,
            [this](const QString& t) { redo_->setText(tr("&Redo %1").arg(t)); });
    connect(doc, &Document::selectionChanged, this, [this](OpId op) {
        // Selecting anywhere selects everywhere: mirror into the outline.
        selecting_ = true;
        const QModelIndex index = outline_->indexOfOp(op);
        if (index.isValid()) {
            outlineView_->scrollTo(index);
            outlineView_->selectionModel()->setCurrentIndex(index,
                                                            QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
        } else {
            outlineView_->selectionModel()->clearSelection();
        }
        selecting_ = false;
    });
    connect(doc, &Document::modelChanged, this, [this] {
        // Show the classes; the biggest one open one level.
        outlineView_->collapseAll();
        if (outline_->rowCount() > 0) outlineView_->expand(outline_->index(0, 0));
    });
    undo_->setEnabled(false);
    redo_->setEnabled(false);
    if (recovery_) recovery_->setDocument(doc);
    updateToolbar();
    updateStageActions();
    updateStatus();
    updateTitle();
}

bool MainWindow::openSource(const QString& source, const PlanSettings& base)
{
    if (!maybeSave()) return false;
    auto doc = std::make_unique<Document>();
    // Errors while reading the file come synchronously; connect before reading.
    QString error;
    auto connection = connect(doc.get(), &Document::errorOccurred, this, [&error](const QString& m) { error = m; });
    const bool ok = doc->openSource(source, base);
    disconnect(connection);
    if (!ok) {
        showError(error);
        return false;
    }
    setDocument(std::move(doc));
    addRecent(source);
    return true;
}

void MainWindow::openSettings(const PlanSettings& settings, const std::vector<LockRequest>& locks)
{
    auto doc = std::make_unique<Document>();
    doc->open(settings, locks);
    setDocument(std::move(doc));
}

bool MainWindow::saveProject(const QString& path) { return document_->saveProject(path); }

void MainWindow::showStartPage()
{
    if (persistent_)
        start_->setRecentFiles(QSettings().value(QStringLiteral("recentFiles")).toStringList());
    else
        start_->setRecentFiles({});
    stack_->setCurrentWidget(startScroll_);
}

QString MainWindow::statusText() const { return status_->text(); }

void MainWindow::updateStatus()
{
    if (!document_) return;
    QStringList parts;
    const auto plan = document_->plan();
    const bool busy = document_->service().isBusy();
    cancelSearch_->setEnabled(busy);
    cancelButton_->setVisible(busy);
    const bool fitHint = plan && !plan->result.fits && plan->fitsOn;
    useFittingMesh_->setEnabled(fitHint && !busy);
    if (fitHint) useFittingMesh_->setText(tr("Use %1").arg(QString::fromStdString(plan->fitsOn->mesh)));
    fitButton_->setVisible(fitHint && !busy);
    if (busy && !searchClock_->isActive()) searchClock_->start();
    if (!busy) searchClock_->stop();
    if (busy) {
        // A long search (a 3D mesh, a wide encoder-decoder) says how far it has got.
        const JobProgress progress = document_->service().progress();
        if (progress.elapsedMs >= 1000)
            parts << tr("searching… %1 · %2 · %3")
                         .arg(QString::fromStdString(formatSeconds(progress.elapsedMs / 1e3)))
                         .arg(countOf(progress.pricesTried, "memory price", "memory prices"))
                         .arg(countOf(progress.tablesSolved, "block table", "block tables"));
        else
            parts << tr("searching…");
    }
    if (plan) {
        const Breakdown& b = plan->result.breakdown;
        const double capacity = plan->result.memoryLimitBytes > 0 ? plan->result.memoryLimitBytes : b.capacityBytes;
        // The whole job (every combination of settings the planner chose among, the baselines),
        // not the chosen combination's search alone.
        parts << (plan->candidates.empty() ? tr("searched in %1").arg(QString::fromStdString(formatSeconds(plan->wallMs / 1e3)))
                                           : tr("searched in %1 (%2 combinations)")
                                                 .arg(QString::fromStdString(formatSeconds(plan->wallMs / 1e3)))
                                                 .arg(plan->candidates.size()));
        if (plan->pipeline) {
            // The pipeline's step (the slowest stage's with its sends); the views show that stage.
            const int slowest = plan->pipeline->stages[static_cast<size_t>(plan->pipeline->slowest)].stage;
            const int shown = document_->shownStage();
            parts << tr("pipeline %1 stages, step %2; shown: stage %3%4")
                         .arg(plan->pipeline->schedule.stages)
                         .arg(QString::fromStdString(formatSeconds(plan->pipeline->stepSeconds)))
                         .arg(shown + 1)
                         .arg(shown == slowest ? tr(" (the slowest)") : tr(" (the slowest: %1)").arg(slowest + 1));
        } else {
            parts << tr("step %1").arg(QString::fromStdString(formatSeconds(b.stepSeconds)));
        }
        parts << QStringLiteral("%1 / %2%3")
                     .arg(QString::fromStdString(formatBytes(b.perDeviceBytes)), QString::fromStdString(formatBytes(capacity)),
                          plan->result.fits ? QString() : tr(" (does not fit)"));
        if (!plan->result.fits && plan->fitsOn) parts << QString::fromStdString(meshFitText(*plan->fitsOn));
        if (plan->workspace && plan->workspace != axesNoteWorkspace_.lock()) {
            axesNoteWorkspace_ = plan->workspace;
            QStringList axes;
            const Mesh& mesh = plan->workspace->costModel->mesh();
            for (int a : axesNoOpCanSplit(*plan->workspace->costModel))
                axes << QStringLiteral("%1 (%2)")
                            .arg(QString::fromStdString(mesh.axes[static_cast<size_t>(a)].name))
                            .arg(mesh.axes[static_cast<size_t>(a)].size);
            axesNote_ =
                axes.isEmpty()
                    ? QString()
                    : tr("nothing divides over axis %1: its devices repeat the work").arg(axes.join(QStringLiteral(", ")));
        }
        if (!axesNote_.isEmpty()) parts << axesNote_;
    }
    parts << countOf(static_cast<int>(document_->locks().size()), "lock", "locks");
    parts << tr("undo %1").arg(document_->undoStack()->index());
    if (!lastError_.isEmpty()) parts << lastError_;
    status_->setText(parts.join(QStringLiteral(" · ")));
}

void MainWindow::updateTitle()
{
    const QString name = document_->filePath().isEmpty() ? QString::fromStdString(document_->settings().model)
                                                         : QFileInfo(document_->filePath()).fileName();
    // Qt draws "[*]" as "*" while the window is modified (unsaved edits) and hides it otherwise.
    setWindowTitle(tr("%1[*] — TP Studio").arg(name));
    setWindowModified(document_->isModified());
}

void MainWindow::updateToolbar()
{
    const PlanSettings& s = document_->settings();
    modelCombo_->setCurrentText(QString::fromStdString(s.model));
    meshCombo_->setCurrentText(QString::fromStdString(s.mesh));
    hardwareCombo_->setCurrentText(QString::fromStdString(s.hardware));
    updateTitle();
}

void MainWindow::showError(const QString& message)
{
    // Input errors are one line naming the file, op or field: the status bar shows it; a search
    // failure keeps the last good plan on screen.
    lastError_ = message;
    statusBar()->showMessage(message, 15000);
    updateStatus();
}

void MainWindow::addRecent(const QString& source)
{
    if (!persistent_) return;
    QSettings settings;
    QStringList files = settings.value(QStringLiteral("recentFiles")).toStringList();
    const QString entry = QFileInfo::exists(source) ? QFileInfo(source).absoluteFilePath() : source;
    files.removeAll(entry);
    files.prepend(entry);
    while (files.size() > kMaxRecent) files.removeLast();
    settings.setValue(QStringLiteral("recentFiles"), files);
    rebuildRecentMenu();
}

void MainWindow::rebuildRecentMenu()
{
    recentMenu_->clear();
    const QStringList files = persistent_ ? QSettings().value(QStringLiteral("recentFiles")).toStringList() : QStringList();
    for (const auto& f : files) recentMenu_->addAction(f, this, [this, f] { openSource(f); });
    recentMenu_->setEnabled(!files.isEmpty());
    start_->setRecentFiles(files);
}

void MainWindow::openDialog()
{
    const QString path = QFileDialog::getOpenFileName(this, tr("Open"), QString(), QLatin1String(kFileFilter));
    if (!path.isEmpty()) openSource(path);
}

void MainWindow::save()
{
    if (document_->filePath().isEmpty())
        saveAs();
    else
        saveProject(document_->filePath());
}

void MainWindow::saveAs()
{
    QString path = QFileDialog::getSaveFileName(this, tr("Save project"), QString(), tr("Projects (*.tpproj.json)"));
    if (path.isEmpty()) return;
    if (!path.endsWith(QLatin1String(".tpproj.json"))) path += QLatin1String(".tpproj.json");
    if (saveProject(path)) addRecent(path);
}

void MainWindow::exportPlanJson()
{
    const auto plan = document_->plannedOutcome(); // the slowest stage, as plan files hold it
    if (!plan) return;
    QString path = QFileDialog::getSaveFileName(this, tr("Export plan"), QString(), tr("Plans (*.tpplan.json)"));
    if (path.isEmpty()) return;
    if (!path.endsWith(QLatin1String(".tpplan.json"))) path += QLatin1String(".tpplan.json");
    const PlanWorkspace& ws = *plan->workspace;
    auto json = planToJson(ws.context, *ws.costModel, ws.folded, plan->result);
    if (plan->pipeline) {
        const std::string wholeMesh = parseMesh(document_->settings().mesh, ws.hardware).shapeText();
        json["pipeline"] = pipelineToJson(*plan->pipeline, wholeMesh);
    }
    QSaveFile file(path);
    if (!file.open(QIODevice::WriteOnly) || file.write(QByteArray::fromStdString(writePlanFile(json))) < 0 || !file.commit())
        showError(tr("%1: cannot write: %2").arg(path, file.errorString()));
    else
        statusBar()->showMessage(tr("Exported %1").arg(path), 5000);
}

void MainWindow::exportFormat(const QString& format)
{
    const auto plan = document_->plannedOutcome(); // the slowest stage, as plan files hold it
    if (!plan) return;
    static const std::map<QString, QString> suffixes = {
        {QStringLiteral("csv"), QStringLiteral(".csv")},        {QStringLiteral("dot"), QStringLiteral(".dot")},
        {QStringLiteral("svg"), QStringLiteral(".svg")},        {QStringLiteral("png"), QStringLiteral(".png")},
        {QStringLiteral("pytorch"), QStringLiteral(".py")},     {QStringLiteral("megatron"), QStringLiteral(".sh")},
        {QStringLiteral("hf-tp-plan"), QStringLiteral(".json")}};
    const auto it = suffixes.find(format);
    const QString suffix = it == suffixes.end() ? QStringLiteral(".") + format : it->second;
    QString path =
        QFileDialog::getSaveFileName(this, tr("Export %1").arg(format), QString(), tr("%1 (*%2)").arg(format.toUpper(), suffix));
    if (path.isEmpty()) return;
    if (!path.endsWith(suffix)) path += suffix;
    try {
        const std::string bytes = exportPlan(*plan->workspace, plan->result, format.toStdString());
        QSaveFile file(path);
        if (!file.open(QIODevice::WriteOnly) || file.write(bytes.data(), static_cast<qint64>(bytes.size())) < 0 || !file.commit())
            throw InputError(path.toStdString() + ": cannot write: " + file.errorString().toStdString());
        statusBar()->showMessage(tr("Exported %1").arg(path), 5000);
    } catch (const InputError& e) {
        showError(QString::fromUtf8(e.what()));
    }
}

void MainWindow::exportGraphImage()
{
    QString path = QFileDialog::getSaveFileName(this, tr("Export graph image"), QString(), tr("PNG (*.png);;SVG (*.svg)"));
    if (path.isEmpty()) return;
    QGraphicsScene* scene = graph_->scene();
    const QRectF rect = scene->sceneRect();
    if (path.endsWith(QLatin1String(".svg"), Qt::CaseInsensitive)) {
        QSvgGenerator svg;
        svg.setFileName(path);
        svg.setSize(rect.size().toSize());
        svg.setViewBox(QRectF(QPointF(0, 0), rect.size()));
        QPainter painter(&svg);
        scene->render(&painter, QRectF(QPointF(0, 0), rect.size()), rect);
    } else {
        QImage image((rect.size() * 2).toSize(), QImage::Format_ARGB32_Premultiplied);
        image.fill(Qt::white);
        QPainter painter(&image);
        painter.setRenderHint(QPainter::Antialiasing);
        scene->render(&painter, QRectF(QPointF(0, 0), rect.size() * 2), rect);
        painter.end();
        if (!image.save(path)) showError(tr("%1: cannot write the image").arg(path));
    }
}

bool MainWindow::maybeSave()
{
    if (!document_ || !document_->isModified()) return true;
    const QString name = document_->filePath().isEmpty() ? QString::fromStdString(document_->settings().model)
                                                         : QFileInfo(document_->filePath()).fileName();
    const auto answer = ask(tr("Unsaved changes"), tr("Save the changes to %1?").arg(name),
                            QMessageBox::Save | QMessageBox::Discard | QMessageBox::Cancel, QMessageBox::Save);
    if (answer == QMessageBox::Discard) return true;
    if (answer != QMessageBox::Save) return false;
    save(); // asks for a name when the project has none; cancelling that keeps the edits
    return !document_->isModified();
}

Recovery* MainWindow::enableRecovery(const QString& directory)
{
    if (!recovery_) {
        recovery_ = new Recovery(directory, this);
        connect(recovery_, &Recovery::autosaveFailed, this, [this](const QString& m) { statusBar()->showMessage(m, 15000); });
        recovery_->setDocument(document_.get());
    }
    return recovery_;
}

bool MainWindow::offerRecovery()
{
    if (!recovery_) return false;
    // Each orphan is claimed (its lock held) until it is restored, discarded or let go.
    std::vector<RecoveryOrphan> orphans = recovery_->claimOrphans();
    for (RecoveryOrphan& orphan : orphans) {
        RecoveredProject recovered;
        try {
            recovered = Recovery::read(orphan.path);
        } catch (const InputError& e) {
            // Unreadable (not ours, or from a newer version): left where it is, and said so.
            showError(tr("Recovery file not restored: %1").arg(QString::fromUtf8(e.what())));
            continue;
        }
        const QString name =
            recovered.originalPath.isEmpty() ? QString::fromStdString(recovered.project.settings.model) : recovered.originalPath;
        const QString text = tr("TP Studio did not exit cleanly. Unsaved edits to %1 (%2 locks, mesh %3) were autosaved %4.\n\n"
                                "Restore them?")
                                 .arg(name)
                                 .arg(recovered.project.locks.size())
                                 .arg(QString::fromStdString(recovered.project.settings.mesh),
                                      QLocale().toString(recovered.savedAt.toLocalTime(), QLocale::ShortFormat));
        // QMessageBox has no Restore button: Open, labelled "Restore".
        const auto answer =
            ask(tr("Recover unsaved edits"), text, QMessageBox::Open | QMessageBox::Discard, QMessageBox::Open, tr("&Restore"));
        if (answer == QMessageBox::Open) {
            if (!maybeSave()) return false; // the orphan stays for the next start
            auto doc = std::make_unique<Document>();
            doc->openProject(recovered.project, recovered.originalPath, true);
            setDocument(std::move(doc));
            // Ours now: written under this session's name before the orphan goes.
            recovery_->autosave();
            Recovery::removeOrphan(orphan);
            statusBar()->showMessage(tr("Restored unsaved edits to %1").arg(name), 8000);
            return true; // the others stay for the next start (their claims end here)
        }
        if (answer == QMessageBox::Discard) Recovery::removeOrphan(orphan);
    }
    return false;
}

void MainWindow::closeEvent(QCloseEvent* event)
{
    if (!maybeSave()) {
        event->ignore();
        return;
    }
    if (persistent_) {
        QSettings settings;
        settings.setValue(QStringLiteral("window/geometry"), saveGeometry());
        settings.setValue(QStringLiteral("window/state"), saveState());
    }
    // A clean exit: nothing to recover.
    if (recovery_) recovery_->finish();
    event->accept();
}

void MainWindow::showEvent(QShowEvent* event)
{
    QMainWindow::showEvent(event);
    // Dock sizes only take once the window has its size; a restored state keeps the user's.
    if (docksSized_) return;
    docksSized_ = true;
    if (persistent_ && QSettings().contains(QStringLiteral("window/state"))) return;
    const auto docks = findChildren<QDockWidget*>();
    QList<QDockWidget*> sides;
    for (QDockWidget* dock : docks)
        if (dock->objectName() == QLatin1String("BlocksDock") || dock->objectName() == QLatin1String("InspectorDock"))
            sides << dock;
    resizeDocks(sides, {width() * 22 / 100, width() * 30 / 100}, Qt::Horizontal);
    resizeDocks({breakdownDock_}, {height() * 30 / 100}, Qt::Vertical);
}

void MainWindow::dragEnterEvent(QDragEnterEvent* event)
{
    if (event->mimeData()->hasUrls()) event->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* event)
{
    const auto urls = event->mimeData()->urls();
    if (urls.isEmpty() || !urls.first().isLocalFile()) return;
    const QString path = urls.first().toLocalFile();
    event->acceptProposedAction();
    // A saved plan of the model on screen is compared with it; anything else is opened.
    if (path.endsWith(QLatin1String(".tpplan.json")) && document_->plan() && compareWithPlanFile(path, false)) return;
    openSource(path);
}

bool MainWindow::compareWithPlanFile(const QString& path, bool reportErrors)
{
    const auto plan = document_->plan();
    QFile file(path);
    if (!plan || !file.open(QIODevice::ReadOnly)) {
        if (reportErrors) showError(plan ? tr("%1: cannot read: %2").arg(path, file.errorString()) : tr("No plan to compare with yet."));
        return false;
    }
    std::shared_ptr<const LoadedPlan> saved;
    try {
        saved = std::make_shared<LoadedPlan>(readPlanFile(file.readAll().toStdString(), QFileInfo(path).fileName().toStdString()));
    } catch (const std::exception& e) {
        if (reportErrors) showError(QString::fromUtf8(e.what()));
        return false;
    }
    if (const QString why = explain_->compareWithSaved(saved, QFileInfo(path).fileName()); !why.isEmpty()) {
        if (reportErrors) showError(why);
        return false;
    }
    explainDock_->show();
    explainDock_->raise();
    explain_->showCompareTab();
    statusBar()->showMessage(tr("Comparing with %1 (Explain > Compare plans; File > Open opens it)").arg(QFileInfo(path).fileName()), 8000);
    return true;
}

void MainWindow::createDockActions(QMenu* view)
{
    view->addSeparator();
    for (QDockWidget* dock : findChildren<QDockWidget*>()) view->addAction(dock->toggleViewAction());
    // The toggle would hide a dock that is only behind a tab; this one always brings it forward.
    view->addAction(tr("&Explain Selected Op"), QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_E), this, [this] {
        explainDock_->show();
        explainDock_->raise();
    });
    view->addAction(tr("Step &Timeline"), QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_T), this, [this] {
        timelineDock_->show();
        timelineDock_->raise();
        timeline_->setFocus();
    });
    view->addAction(tr("&Devices of Selected Op"), QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_D), this, [this] {
        devicesDock_->show();
        devicesDock_->raise();
        devices_->setFocus();
    });
}

void MainWindow::createStageActions(QMenu* view)
{
    // A pipelined plan's views show one stage (Document::showStage); these step through them.
    view->addSeparator();
    previousStage_ = view->addAction(tr("&Previous Pipeline Stage"), QKeySequence(Qt::CTRL | Qt::Key_BracketLeft), this,
                                     [this] { stepStage(-1); });
    nextStage_ = view->addAction(tr("Ne&xt Pipeline Stage"), QKeySequence(Qt::CTRL | Qt::Key_BracketRight), this,
                                 [this] { stepStage(+1); });
    slowestStage_ = view->addAction(tr("S&lowest Pipeline Stage"), QKeySequence(Qt::CTRL | Qt::Key_Backslash), this,
                                    [this] { document_->showSlowestStage(); });
}

void MainWindow::stepStage(int delta)
{
    const auto plan = document_ ? document_->plan() : nullptr;
    if (!plan || !plan->pipeline) return;
    // Stages that run one plan (PipelineStagePlan::standsFor) are stepped over together.
    const PipelinePlan& p = *plan->pipeline;
    const int index = stagePlanIndex(p, document_->shownStage()) + delta;
    if (index < 0 || index >= static_cast<int>(p.stages.size())) return;
    document_->showStage(p.stages[static_cast<size_t>(index)].stage);
}

void MainWindow::updateStageActions()
{
    const auto plan = document_ ? document_->plan() : nullptr;
    const int count = plan && plan->pipeline ? static_cast<int>(plan->pipeline->stages.size()) : 0;
    const int index = count ? stagePlanIndex(*plan->pipeline, document_->shownStage()) : -1;
    previousStage_->setEnabled(index > 0);
    nextStage_->setEnabled(index >= 0 && index + 1 < count);
    slowestStage_->setEnabled(count && index != plan->pipeline->slowest);
}

} // namespace tp
