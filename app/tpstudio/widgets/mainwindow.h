#pragma once
// The TP Studio main window (docs/ARCHITECTURE.md, "app/"): toolbar combos for model, mesh and hardware; the
// Blocks outline, the graph view, the Inspector, Mesh & Hardware, Breakdown and Explain docks; a status
// bar with the search time, step time, memory, locks and undo depth.
#include <functional>
#include <memory>

#include <QMainWindow>
#include <QMessageBox>

#include "document.h"

class QComboBox;
class QLabel;
class QLineEdit;
class QMenu;
class QStackedWidget;
class QTimer;
class QToolButton;
class QScrollArea;
class QTreeView;

namespace tp {

class BlockOutlineModel;
class OutlineFeed;
class BreakdownView;
class ExplainPanel;
class GraphView;
class Inspector;
class MeshPanel;
class Recovery;
class StartPage;
class TimelineView;
class DevicesView;

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    /// persistentSettings: read and write QSettings (recent files, window state); off in tests.
    explicit MainWindow(bool persistentSettings = true, QWidget* parent = nullptr);
    ~MainWindow() override;

    /// Opens a model, project or plan in a new document (replacing the current one). Unsaved
    /// edits are offered Save/Discard/Cancel first (false on Cancel).
    /// `base` carries command-line settings (mesh, hardware, ...) for a model source.
    bool openSource(const QString& source, const PlanSettings& base = {});
    /// Opens with settings and locks directly (command line).
    void openSettings(const PlanSettings& settings, const std::vector<LockRequest>& locks);
    bool saveProject(const QString& path);

    Document* document() const { return document_.get(); }
    GraphView* graphView() const { return graph_; }
    BlockOutlineModel* outlineModel() const { return outline_; }
    QTreeView* outlineView() const { return outlineView_; }
    Inspector* inspector() const { return inspector_; }
    BreakdownView* breakdownView() const { return breakdown_; }
    MeshPanel* meshPanel() const { return meshPanel_; }
    ExplainPanel* explainPanel() const { return explain_; }
    QDockWidget* explainDock() const { return explainDock_; }
    TimelineView* timelineView() const { return timeline_; }
    QDockWidget* timelineDock() const { return timelineDock_; }
    DevicesView* devicesView() const { return devices_; }
    QDockWidget* devicesDock() const { return devicesDock_; }
    QWidget* breakdownDock() const;
    QString statusText() const;
    /// Compares the plan on screen with the plan file at `path` (Explain > Compare plans, its
    /// differences marked on the graph). False when it cannot be read or is of another model or
    /// mesh (said in the status bar when `reportErrors`).
    bool compareWithPlanFile(const QString& path, bool reportErrors = true);
    void showStartPage();

    /// Autosave to a recovery file (recovery.h); `directory` empty: Recovery::defaultDirectory().
    /// Off until called (tests and screenshots leave no files behind).
    Recovery* enableRecovery(const QString& directory = {});
    Recovery* recovery() const { return recovery_; }
    /// Offers each recovery file left by a session that did not exit cleanly (newest first):
    /// Restore (QMessageBox::Open, labelled Restore) reopens it modified, Discard deletes it. Returns true when one was restored.
    bool offerRecovery();
    /// Save/Discard/Cancel for unsaved edits; true when the document may go.
    bool maybeSave();
    QAction* cancelSearchAction() const { return cancelSearch_; }
    QAction* useFittingMeshAction() const { return useFittingMesh_; }

    /// Answers the window's questions instead of a modal QMessageBox (tests): gets the title,
    /// the text and the buttons offered, returns the button chosen. Null: ask the user.
    using QuestionHook = std::function<QMessageBox::StandardButton(const QString& title, const QString& text,
                                                                   QMessageBox::StandardButtons buttons)>;
    static void setQuestionHook(QuestionHook hook);

protected:
    void closeEvent(QCloseEvent* event) override;
    void showEvent(QShowEvent* event) override;
    void dragEnterEvent(QDragEnterEvent* event) override;
    void dropEvent(QDropEvent* event) override;

private:
    void createActions();
    void createHelpMenu();
    void createDocks();
    void setDocument(std::unique_ptr<Document> document);
    void updateStatus();
    void updateTitle();
    void updateToolbar();
    void createDockActions(QMenu* view);  ///< View > each dock, and bringing Explain, Timeline, Devices forward
    void createStageActions(QMenu* view); ///< View > Previous / Next / Slowest Pipeline Stage
    /// Shows the stage plan `delta` places before (-1) or after (+1) the shown one.
    void stepStage(int delta);
    void updateStageActions(); ///< enables the stage actions for the plan shown
    void showError(const QString& message);
    void addRecent(const QString& source);
    void rebuildRecentMenu();
    void openDialog();
    void saveAs();
    void save();
    void exportPlanJson();
    void exportGraphImage();
    void exportFormat(const QString& format);
    QMessageBox::StandardButton ask(const QString& title, const QString& text, QMessageBox::StandardButtons buttons,
                                    QMessageBox::StandardButton defaultButton, const QString& openLabel = {});

    std::unique_ptr<Document> document_;
    Recovery* recovery_ = nullptr;
    QAction* cancelSearch_ = nullptr;
    QToolButton* cancelButton_ = nullptr;
    QAction* previousStage_ = nullptr; ///< a pipelined plan: show the stage before the shown one
    QAction* nextStage_ = nullptr;
    QAction* slowestStage_ = nullptr;
    QAction* useFittingMesh_ = nullptr; ///< switches to the mesh the status bar names (PlanOutcome::fitsOn)
    QToolButton* fitButton_ = nullptr;
    QTimer* searchClock_ = nullptr; ///< refreshes the status line's progress while a search runs
    bool persistent_;
    QStackedWidget* stack_ = nullptr;
    StartPage* start_ = nullptr;
    QScrollArea* startScroll_ = nullptr; ///< holds start_ in the stack
    GraphView* graph_ = nullptr;
    BlockOutlineModel* outline_ = nullptr;
    OutlineFeed* outlineFeed_ = nullptr;
    QTreeView* outlineView_ = nullptr;
    Inspector* inspector_ = nullptr;
    BreakdownView* breakdown_ = nullptr;
    MeshPanel* meshPanel_ = nullptr;
    QDockWidget* breakdownDock_ = nullptr;
    ExplainPanel* explain_ = nullptr;
    QDockWidget* explainDock_ = nullptr;
    TimelineView* timeline_ = nullptr;
    QDockWidget* timelineDock_ = nullptr;
    DevicesView* devices_ = nullptr;
    QDockWidget* devicesDock_ = nullptr;
    QComboBox* modelCombo_ = nullptr;
    QComboBox* meshCombo_ = nullptr;
    QComboBox* hardwareCombo_ = nullptr;
    QLineEdit* find_ = nullptr;
    QLabel* status_ = nullptr;
    QMenu* recentMenu_ = nullptr;
    QAction* undo_ = nullptr;
    QAction* redo_ = nullptr;
    QString lastError_;
    /// The unusable-axes note of the workspace it was computed for (recomputed on a new one).
    std::weak_ptr<const PlanWorkspace> axesNoteWorkspace_;
    QString axesNote_;
    bool selecting_ = false;
    bool docksSized_ = false;
};

} // namespace tp
