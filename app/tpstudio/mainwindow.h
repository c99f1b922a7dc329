#pragma once
// The TP Studio main window (DESIGN.md "App"): toolbar combos for model, mesh and hardware; the
// Blocks outline, the graph view, the Inspector, Mesh & Hardware, Breakdown and Explain docks; a status
// bar with the search time, step time, memory, locks and undo depth.
#include <memory>

#include <QMainWindow>

#include "document.h"

class QComboBox;
class QLabel;
class QLineEdit;
class QMenu;
class QStackedWidget;
class QTreeView;

namespace tp {

class BlockOutlineModel;
class BreakdownView;
class ExplainPanel;
class GraphView;
class Inspector;
class MeshPanel;
class StartPage;

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    /// persistentSettings: read and write QSettings (recent files, window state); off in tests.
    explicit MainWindow(bool persistentSettings = true, QWidget* parent = nullptr);
    ~MainWindow() override;

    /// Opens a model, project or plan in a new document (replacing the current one).
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
    QWidget* breakdownDock() const;
    QString statusText() const;
    void showStartPage();

protected:
    void closeEvent(QCloseEvent* event) override;
    void showEvent(QShowEvent* event) override;
    void dragEnterEvent(QDragEnterEvent* event) override;
    void dropEvent(QDropEvent* event) override;

private:
    void createActions();
    void createDocks();
    void setDocument(std::unique_ptr<Document> document);
    void updateStatus();
    void updateTitle();
    void updateToolbar();
    void showError(const QString& message);
    void addRecent(const QString& source);
    void rebuildRecentMenu();
    void openDialog();
    void saveAs();
    void save();
    void exportPlanJson();
    void exportGraphImage();
    void exportFormat(const QString& format);
    bool maybeDiscard();

    std::unique_ptr<Document> document_;
    bool persistent_;
    QStackedWidget* stack_ = nullptr;
    StartPage* start_ = nullptr;
    GraphView* graph_ = nullptr;
    BlockOutlineModel* outline_ = nullptr;
    QTreeView* outlineView_ = nullptr;
    Inspector* inspector_ = nullptr;
    BreakdownView* breakdown_ = nullptr;
    MeshPanel* meshPanel_ = nullptr;
    QDockWidget* breakdownDock_ = nullptr;
    ExplainPanel* explain_ = nullptr;
    QDockWidget* explainDock_ = nullptr;
    QComboBox* modelCombo_ = nullptr;
    QComboBox* meshCombo_ = nullptr;
    QComboBox* hardwareCombo_ = nullptr;
    QLineEdit* find_ = nullptr;
    QLabel* status_ = nullptr;
    QMenu* recentMenu_ = nullptr;
    QAction* undo_ = nullptr;
    QAction* redo_ = nullptr;
    QString lastError_;
    bool selecting_ = false;
    bool docksSized_ = false;
};

} // namespace tp
