#include "document.h"

#include <algorithm>
#include <fstream>
#include <regex>

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QSaveFile>

#include "util/error.h"
#include "util/json_reader.h"

namespace tp {

namespace {

bool sameLocks(const std::vector<LockRequest>& a, const std::vector<LockRequest>& b)
{
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (a[i].pattern != b[i].pattern || a[i].strategy != b[i].strategy) return false;
    return true;
}

bool endsWith(const QString& text, const char* suffix) { return text.endsWith(QLatin1String(suffix), Qt::CaseInsensitive); }

/// The op of `to`'s graph that stands for `op` of `from`'s: the op of the same name, else the
/// one at the same place in the same instance (or the last there is) of the block class of the
/// same label (another pipeline stage holds other layers of the same class), else -1.
OpId sameOpIn(const PlanWorkspace& from, OpId op, const PlanWorkspace& to)
{
    const Graph& graph = from.model.graph;
    if (op < 0 || static_cast<size_t>(op) >= graph.ops.size()) return -1;
    for (const auto& o : to.model.graph.ops)
        if (o.name == graph.op(op).name) return o.id;
    const FoldedGraph& f = from.folded;
    const BlockClass& own = f.classes[static_cast<size_t>(f.classOfOp[static_cast<size_t>(op)])];
    const size_t instance = static_cast<size_t>(f.instanceOfOp[static_cast<size_t>(op)]);
    const auto& ops = own.instances[instance].ops;
    const size_t place = static_cast<size_t>(std::find(ops.begin(), ops.end(), op) - ops.begin());
    for (const BlockClass& other : to.folded.classes) {
        if (other.label != own.label || other.instances.empty()) continue;
        const auto& same = other.instances[std::min(instance, other.instances.size() - 1)].ops;
        return place < same.size() ? same[place] : -1;
    }
    return -1;
}

} // namespace

Document::Document(QObject* parent) : QObject(parent)
{
    connect(&service_, &PlannerService::started, this, &Document::searchStarted);
    connect(&service_, &PlannerService::finished, this, &Document::onPlanFinished);
    connect(&service_, &PlannerService::failed, this, [this](quint64 jobId, const QString& message) {
        appliedJob_ = jobId;
        lastError_ = message;
        emit errorOccurred(message);
    });
    connect(&service_, &PlannerService::cancelled, this, [this](quint64 jobId) {
        appliedJob_ = jobId; // settled: no longer searching, and nothing to apply
        emit searchCancelled(jobId);
    });
}

Document::~Document()
{
    // The history's edits point at this document; clear them before the members go. Nobody is
    // told: the history going clean here is not a save (a window would re-read a dying document).
    undo_.blockSignals(true);
    undo_.clear();
}

void Document::open(const PlanSettings& settings, const std::vector<LockRequest>& locks)
{
    undo_.clear();
    settings_ = settings;
    locks_ = locks;
    emit settingsChanged();
    emit locksChanged();
    replan();
}

bool Document::openSource(const QString& source, const PlanSettings& base)
{
    try {
        ProjectData project;
        project.settings = base;
        const bool project_file = endsWith(source, ".tpproj.json");
        const bool plan_file = endsWith(source, ".tpplan.json");
        if (project_file || plan_file) {
            QFile file(source);
            if (!file.open(QIODevice::ReadOnly))
                throw InputError(source.toStdString() + ": cannot open: " + file.errorString().toStdString());
            const std::string text = file.readAll().toStdString();
            if (project_file) {
                project = readProject(text, source.toStdString());
            } else {
                project = projectFromPlanJson(parseJsonText(text, source.toStdString()), source.toStdString());
            }
            // A model file named relative to the project is found next to it.
            const QFileInfo modelInfo(QString::fromStdString(project.settings.model));
            if (modelInfo.isRelative() && !isBuiltinModel(project.settings.model)) {
                const QString beside = QFileInfo(source).dir().filePath(modelInfo.filePath());
                if (QFileInfo::exists(beside)) project.settings.model = beside.toStdString();
            }
        } else {
            // Unknown names fail here, with the list of known ones, rather than in the worker.
            if (!isBuiltinModel(source.toStdString()) && !QFileInfo::exists(source)) {
                if (source.contains(QLatin1Char('/')) || source.contains(QLatin1Char('.')))
                    throw InputError(source.toStdString() + ": no such file");
                builtinModelConfig(source.toStdString()); // throws, naming the known models
            }
            project.settings.model = source.toStdString();
        }
        // A plan file is not a project: saving asks for a name (as before, the path stays).
        openProject(project, project_file ? source : plan_file ? filePath_ : QString(), false);
        return true;
    } catch (const InputError& e) {
        emit errorOccurred(QString::fromUtf8(e.what()));
        return false;
    }
}

void Document::openProject(const ProjectData& project, const QString& filePath, bool modified)
{
    filePath_ = filePath;
    expandedClasses_.clear();
    for (const auto& label : project.expandedClasses) expandedClasses_ << QString::fromStdString(label);
    pendingSelection_ = project.selectedOp;
    plan_.reset();
    planned_.reset();
    chosenStage_ = -1;
    selectedOp_ = -1;
    open(project.settings, project.locks);
    if (modified) undo_.resetClean();
    emit fileChanged();
}

ProjectData Document::projectData() const
{
    ProjectData project;
    project.settings = settings_;
    project.locks = locks_;
    for (const auto& label : expandedClasses_) project.expandedClasses.push_back(label.toStdString());
    if (const auto* ws = workspace(); ws && selectedOp_ >= 0)
        project.selectedOp = ws->model.graph.op(selectedOp_).name;
    else
        project.selectedOp = pendingSelection_; // not applied yet: keep what was asked for
    return project;
}

bool Document::saveProject(const QString& path)
{
    const ProjectData project = projectData();
    QSaveFile file(path);
    if (!file.open(QIODevice::WriteOnly)) {
        emit errorOccurred(tr("%1: cannot write: %2").arg(path, file.errorString()));
        return false;
    }
    file.write(QByteArray::fromStdString(writeProject(project)));
    if (!file.commit()) {
        emit errorOccurred(tr("%1: cannot write: %2").arg(path, file.errorString()));
        return false;
    }
    filePath_ = path;
    undo_.setClean();
    emit fileChanged();
    return true;
}

void Document::setSettings(const PlanSettings& settings, const QString& description)
{
    if (settings == settings_) return;
    // The whole settings before and after (they are small).
    undo_.push(
        description, [this, before = settings_] { applySettings(before); }, [this, settings] { applySettings(settings); });
}

void Document::setModelSource(const QString& source)
{
    PlanSettings s = settings_;
    s.model = source.trimmed().toStdString();
    setSettings(s, tr("Model %1").arg(source));
}

void Document::setMesh(const QString& mesh)
{
    PlanSettings s = settings_;
    s.mesh = mesh.trimmed().toStdString();
    setSettings(s, tr("Mesh %1").arg(mesh));
}

void Document::setHardware(const QString& hardware)
{
    PlanSettings s = settings_;
    s.hardware = hardware.trimmed().toStdString();
    setSettings(s, tr("Hardware %1").arg(hardware));
}

void Document::setBatch(qint64 batch)
{
    PlanSettings s = settings_;
    s.batch = batch;
    setSettings(s, tr("Batch %1").arg(batch));
}

void Document::setSeq(qint64 seq)
{
    PlanSettings s = settings_;
    s.seq = seq;
    setSettings(s, tr("Sequence %1").arg(seq));
}

void Document::setMicroBatch(qint64 microBatch)
{
    PlanSettings s = settings_;
    s.microBatch = microBatch;
    setSettings(s, microBatch == kAuto ? tr("Micro-batch auto") : tr("Micro-batch %1").arg(microBatch));
}

void Document::setZeroStage(int stage)
{
    PlanSettings s = settings_;
    s.zero = stage;
    setSettings(s, stage == kAuto ? tr("ZeRO auto") : tr("ZeRO stage %1").arg(stage));
}

void Document::setPipeline(int stages, const QString& schedule, const QString& stageLayers)
{
    PlanSettings s = settings_;
    s.pipeline = stages;
    s.schedule = schedule.toStdString();
    s.stageLayers = stageLayers.toStdString();
    const QString what = stages == 1 ? tr("no pipeline") : stages == kAuto ? tr("auto") : tr("%1 stages").arg(stages);
    setSettings(s, tr("Pipeline %1, schedule %2, stage layers %3").arg(what, schedule, stageLayers));
}

void Document::setMode(const QString& mode)
{
    PlanSettings s = settings_;
    s.mode = mode.toStdString();
    setSettings(s, tr("Mode %1").arg(mode));
}

void Document::setMemoryLimit(const QString& limit)
{
    PlanSettings s = settings_;
    s.memoryLimit = limit.trimmed().toStdString();
    setSettings(s, tr("Memory limit %1").arg(limit.isEmpty() ? tr("capacity") : limit));
}

void Document::setLinkBandwidths(double intraNodeGBps, double interNodeGBps)
{
    PlanSettings s = settings_;
    s.intraNodeGBps = intraNodeGBps;
    s.interNodeGBps = interNodeGBps;
    setSettings(s, tr("Link bandwidths"));
}

void Document::setLocks(const std::vector<LockRequest>& locks, const QString& description)
{
    if (sameLocks(locks, locks_)) return;
    // Locks name the axes of the mesh the plan is shown on; on a pipelined plan that is a stage's
    // mesh, so locking pins the pipeline the lock was made on (the planner plans a locked
    // `auto` without a pipeline: Planner::planPipeline). One undo step for both.
    PlanSettings pinned = settings_;
    if (plan_ && plan_->pipeline && !locks.empty()) {
        pinned.pipeline = plan_->pipeline->schedule.stages;
        pinned.schedule = scheduleWord(plan_->pipeline->schedule);
        pinned.stageLayers =
            stageLayersWord(plan_->pipeline->layersOfStage, plan_->pipeline->stages.front().workspace->stage.period);
    }
    if (pinned == settings_) {
        undo_.push(
            description, [this, before = locks_] { applyLocks(before); }, [this, locks] { applyLocks(locks); });
        return;
    }
    undo_.push(
        description, [this, before = locks_, settings = settings_] { applySettingsAndLocks(settings, before); },
        [this, locks, pinned] { applySettingsAndLocks(pinned, locks); });
}

std::string Document::classPattern(OpId op) const
{
    const PlanWorkspace* ws = workspace();
    if (!ws) return {};
    const Graph& g = ws->model.graph;
    const FoldedGraph& f = ws->folded;
    const auto& bc = f.classes[static_cast<size_t>(f.classOfOp[static_cast<size_t>(op)])];
    const std::string& name = g.op(op).name;
    if (bc.instances.size() < 2) return name;
    const auto& inst = bc.instances[static_cast<size_t>(f.instanceOfOp[static_cast<size_t>(op)])];
    const size_t position = static_cast<size_t>(std::find(inst.ops.begin(), inst.ops.end(), op) - inst.ops.begin());
    // Replace every number that differs between the instances' names with '*': layer indices.
    static const std::regex number("[0-9]+");
    auto tokens = [](const std::string& text) {
        std::vector<std::string> parts;
        std::sregex_token_iterator it(text.begin(), text.end(), number, {-1, 0});
        for (; it != std::sregex_token_iterator(); ++it) parts.push_back(*it);
        return parts;
    };
    const auto mine = tokens(name);
    std::vector<bool> varies(mine.size(), false);
    for (const auto& other : bc.instances) {
        const auto theirs = tokens(g.op(other.ops[position]).name);
        if (theirs.size() != mine.size()) return name;
        for (size_t i = 0; i < mine.size(); ++i)
            if (theirs[i] != mine[i]) varies[i] = true;
    }
    std::string pattern;
    for (size_t i = 0; i < mine.size(); ++i) pattern += varies[i] ? std::string("*") : mine[i];
    // The glob must name exactly the class's ops at this position, no more.
    size_t matched = 0;
    for (const auto& o : g.ops)
        if (globMatch(pattern, o.name)) {
            const auto& oi = bc.instances;
            const bool peer = f.classOfOp[static_cast<size_t>(o.id)] == bc.id &&
                              oi[static_cast<size_t>(f.instanceOfOp[static_cast<size_t>(o.id)])].ops[position] == o.id;
            if (!peer) return name;
            ++matched;
        }
    return matched == bc.instances.size() ? pattern : name;
}

bool Document::lockOp(OpId op, int strategy, LockScope scope)
{
    const PlanWorkspace* ws = workspace();
    if (!ws || op < 0 || op >= static_cast<OpId>(ws->model.graph.ops.size())) return false;
    const CostModel& model = *ws->costModel;
    const auto& candidates = model.strategies(op);
    if (strategy < 0 || strategy >= static_cast<int>(candidates.size())) return false;
    const std::string text = strategyToString(candidates[static_cast<size_t>(strategy)], model.signature(op), model.mesh());
    const std::string& name = ws->model.graph.op(op).name;
    const std::string pattern = scope == LockScope::AllInstances ? classPattern(op) : name;
    std::vector<LockRequest> locks;
    // A new lock replaces those that name the same op in the same scope; a per-instance lock
    // placed after a class lock overrides it for that op (later locks win in resolveLocks).
    for (const auto& lock : locks_)
        if (lock.pattern != pattern) locks.push_back(lock);
    locks.push_back({pattern, text});
    setLocks(locks, tr("Lock %1 = %2").arg(QString::fromStdString(pattern), QString::fromStdString(text)));
    return true;
}

void Document::unlockOp(OpId op)
{
    const PlanWorkspace* ws = workspace();
    if (!ws) return;
    const std::string& name = ws->model.graph.op(op).name;
    std::vector<LockRequest> locks;
    for (const auto& lock : locks_)
        if (!globMatch(lock.pattern, name)) locks.push_back(lock);
    setLocks(locks, tr("Unlock %1").arg(QString::fromStdString(name)));
}

bool Document::isLocked(OpId op) const
{
    const auto& p = plan_;
    return p && op >= 0 && static_cast<size_t>(op) < p->result.lockedOp.size() && p->result.lockedOp[static_cast<size_t>(op)];
}

void Document::setSelectedOp(OpId op)
{
    if (op == selectedOp_) return;
    selectedOp_ = op;
    emit selectionChanged(op);
}

void Document::setExpandedClasses(const QStringList& labels)
{
    if (labels == expandedClasses_) return;
    expandedClasses_ = labels;
    emit expandedClassesChanged();
}

void Document::applySettings(const PlanSettings& settings)
{
    settings_ = settings;
    emit settingsChanged();
    replan();
}

void Document::applyLocks(const std::vector<LockRequest>& locks)
{
    locks_ = locks;
    emit locksChanged();
    replan();
}

void Document::applySettingsAndLocks(const PlanSettings& settings, const std::vector<LockRequest>& locks)
{
    settings_ = settings;
    locks_ = locks;
    emit settingsChanged();
    emit locksChanged();
    replan();
}

void Document::replan()
{
    lastError_.clear();
    service_.request(settings_, locks_);
}

void Document::onPlanFinished(std::shared_ptr<const PlanOutcome> outcome)
{
    const bool newModel = !plan_ || modelKeyOf(plan_->settings.toRequest({})) != modelKeyOf(outcome->settings.toRequest({}));
    appliedJob_ = outcome->jobId;
    planned_ = std::move(outcome);
    if (newModel) {
        chosenStage_ = -1;
        plan_ = planned_;
        selectedOp_ = -1;
        if (!pendingSelection_.empty())
            for (const auto& op : plan_->workspace->model.graph.ops)
                if (op.name == pendingSelection_) selectedOp_ = op.id;
        pendingSelection_.clear();
        emit modelChanged();
        emit planChanged();
        emit selectionChanged(selectedOp_);
    } else {
        // The stage chosen stays shown while the new pipeline has it.
        if (!planned_->pipeline || chosenStage_ >= planned_->pipeline->schedule.stages) chosenStage_ = -1;
        applyShown(showingStage(planned_, chosenStage_));
    }
    emit searchFinished(planned_->jobId, planned_->result.searchMs);
}

void Document::applyShown(std::shared_ptr<const PlanOutcome> shown)
{
    // Another graph (another stage, or another pipeline's stage) numbers its ops otherwise.
    const OpId selected = plan_ && shown && plan_->workspace != shown->workspace
                              ? sameOpIn(*plan_->workspace, selectedOp_, *shown->workspace)
                              : selectedOp_;
    plan_ = std::move(shown);
    emit planChanged();
    if (selected != selectedOp_) {
        selectedOp_ = selected;
        emit selectionChanged(selectedOp_);
    }
}

int Document::shownStage() const
{
    if (!plan_ || !plan_->pipeline) return -1;
    if (chosenStage_ >= 0) return chosenStage_;
    return plan_->pipeline->stages[static_cast<size_t>(plan_->pipeline->slowest)].stage;
}

bool Document::showStage(int stage)
{
    if (!planned_ || !planned_->pipeline || stagePlanIndex(*planned_->pipeline, stage) < 0) return false;
    if (stage == shownStage()) return true;
    chosenStage_ = stage;
    applyShown(showingStage(planned_, stage));
    return true;
}

void Document::showSlowestStage()
{
    if (!planned_ || !planned_->pipeline) return;
    showStage(planned_->pipeline->stages[static_cast<size_t>(planned_->pipeline->slowest)].stage);
}

} // namespace tp
