#pragma once
// One open model: the plan inputs (settings and locks), the latest plan and the selection.
// Every edit is an entry of the document's EditHistory (QtCore's stand-in for QUndoStack, which
// Qt 6 keeps in QtGui); applying one (do, undo or redo) emits a typed change signal and asks the
// PlannerService for a new plan. Views only listen.
#include <memory>

#include <QObject>
#include <QString>

#include "edithistory.h"
#include "plannerservice.h"

namespace tp {

enum class LockScope {
    AllInstances, ///< the op at this position in every instance of its block class (a glob)
    ThisInstance, ///< this op only (the class's run splits around it)
};

class Document : public QObject {
    Q_OBJECT
public:
    explicit Document(QObject* parent = nullptr);
    ~Document() override;

    /// Starts a document on a model source with default settings (or the given ones) and asks
    /// for the first plan. Opening is not an edit: the undo stack starts empty.
    void open(const PlanSettings& settings, const std::vector<LockRequest>& locks = {});
    /// Reads a .tpproj.json or .tpplan.json, or treats the text as a model source (built-in name,
    /// .tpgraph.json, .onnx, config.json). Returns false and emits errorOccurred on bad input.
    bool openSource(const QString& source, const PlanSettings& base = {});
    /// Opens a project already read (a recovery file): `filePath` is the project file it belongs
    /// to ("" for none). `modified`: the document starts with unsaved edits (the undo stack is
    /// empty but not clean, so the window shows it modified and quitting asks).
    void openProject(const ProjectData& project, const QString& filePath, bool modified);
    /// Writes the project with QSaveFile. Returns false and emits errorOccurred on failure.
    bool saveProject(const QString& path);
    QString filePath() const { return filePath_; }
    /// The project as saveProject writes it (settings, locks, view state).
    ProjectData projectData() const;
    /// Unsaved edits: the undo stack is not at its clean index.
    bool isModified() const { return !undo_.isClean(); }

    EditHistory* undoStack() { return &undo_; }
    const PlanSettings& settings() const { return settings_; }
    const std::vector<LockRequest>& locks() const { return locks_; }
    /// The latest plan applied as the views show it (null before the first arrives): on a
    /// pipelined plan, the shown stage's (showStage; the slowest stage's until another is chosen).
    std::shared_ptr<const PlanOutcome> plan() const { return plan_; }
    /// The latest plan as planned: a pipelined plan's slowest stage, as exports and plan files
    /// hold it (docs/formats.md), whichever stage is shown.
    std::shared_ptr<const PlanOutcome> plannedOutcome() const { return planned_; }
    const PlanWorkspace* workspace() const { return plan_ ? plan_->workspace.get() : nullptr; }
    bool isSearching() const { return service_.latestJob() != appliedJob_ && lastError_.isEmpty(); }
    PlannerService& service() { return service_; }
    /// Stops the running search (the last edit stays, without a plan for it). Returns false when
    /// none runs. Emits searchCancelled, never errorOccurred.
    bool cancelSearch() { return service_.cancel(); }

    // Edits: each pushes one undo command (nothing when the value does not change).
    void setSettings(const PlanSettings& settings, const QString& description);
    void setModelSource(const QString& source);
    void setMesh(const QString& mesh);
    void setHardware(const QString& hardware);
    void setBatch(qint64 batch);
    void setSeq(qint64 seq);
    void setMicroBatch(qint64 microBatch); ///< kAuto: the planner chooses
    void setZeroStage(int stage);          ///< 0-3, or kAuto: the planner chooses
    /// Pipeline stages (1 none, kAuto the planner chooses), schedule ("1f1b",
    /// "interleaved:V", "auto") and stage boundaries ("auto", "even", "F,L"), one undoable edit.
    void setPipeline(int stages, const QString& schedule, const QString& stageLayers);
    void setMode(const QString& mode);
    void setMemoryLimit(const QString& limit);
    void setLinkBandwidths(double intraNodeGBps, double interNodeGBps);
    void setLocks(const std::vector<LockRequest>& locks, const QString& description);
    /// Locks an op to candidate `strategy` (index into CostModel::strategies) in the given scope,
    /// replacing any lock on it. Needs a plan. Returns false (and reports) if it cannot.
    bool lockOp(OpId op, int strategy, LockScope scope);
    /// Removes every lock whose pattern matches the op.
    void unlockOp(OpId op);
    /// The glob that names this op in every instance of its class ("layers.*/mlp/fc1"), or the
    /// op's own name when the class has one instance or no glob singles out exactly its peers.
    std::string classPattern(OpId op) const;
    bool isLocked(OpId op) const;

    // Selection is view state, not an edit: no undo command.
    OpId selectedOp() const { return selectedOp_; }
    void setSelectedOp(OpId op);

    // The pipeline stage the views show: view state, not an edit (like the selection).
    /// The shown pipeline stage (0-based), or -1 for a plan without a pipeline.
    int shownStage() const;
    /// Shows pipeline stage `stage` (0-based) in every view, the selection moved to the same op
    /// of that stage's graph (or cleared where it has none). Returns false, changing nothing,
    /// without a pipelined plan or for a stage it does not have. The choice holds across
    /// re-plans while the pipeline has that stage.
    bool showStage(int stage);
    /// Back to the slowest stage, the one planned.
    void showSlowestStage();

    // View state kept in the project file.
    QStringList expandedClasses() const { return expandedClasses_; }
    void setExpandedClasses(const QStringList& labels);

    // Applied by the undo commands; not for views.
    void applySettings(const PlanSettings& settings);
    void applyLocks(const std::vector<LockRequest>& locks);
    void applySettingsAndLocks(const PlanSettings& settings, const std::vector<LockRequest>& locks);

signals:
    void modelChanged(); ///< a plan for a different graph arrived (views rebuild)
    void settingsChanged();
    void locksChanged();
    void planChanged();
    void selectionChanged(tp::OpId op);
    void expandedClassesChanged();
    void searchStarted(quint64 jobId);
    void searchFinished(quint64 jobId, double searchMs);
    void searchCancelled(quint64 jobId);
    void errorOccurred(const QString& message);
    void fileChanged();

private:
    void replan();
    void onPlanFinished(std::shared_ptr<const PlanOutcome> outcome);
    /// Makes `shown` the plan the views show, the selection moved to its graph.
    void applyShown(std::shared_ptr<const PlanOutcome> shown);

    PlannerService service_;
    EditHistory undo_;
    PlanSettings settings_;
    std::vector<LockRequest> locks_;
    std::shared_ptr<const PlanOutcome> planned_; ///< as planned
    std::shared_ptr<const PlanOutcome> plan_;    ///< as shown (showingStage of planned_)
    int chosenStage_ = -1;                       ///< the stage asked for by showStage; -1: the slowest
    quint64 appliedJob_ = 0;
    QString lastError_;
    OpId selectedOp_ = -1;
    std::string pendingSelection_; ///< op name to select once the first plan arrives
    QStringList expandedClasses_;
    QString filePath_;
};

} // namespace tp
