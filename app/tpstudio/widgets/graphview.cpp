#include "graphview.h"

#include <algorithm>
#include <cmath>

#include <QGraphicsItem>
#include <QMouseEvent>
#include <QPainter>
#include <QScrollBar>
#include <QWheelEvent>

#include "graphitems.h"
#include "graphlayout.h"
#include "graphminimap.h"
#include "presentation.h"

namespace tp {

using namespace graphview;

GraphView::GraphView(QWidget* parent) :
    QGraphicsView(parent),
    minimap_(new Minimap(this)),
    layoutJobs_([this](quint64 job, LaidOutCards cards) { applyLayout(job, std::move(cards)); })
{
    connect(&layoutJobs_, &JobTracker::dropped, this, &GraphView::layoutDropped);
    setScene(&scene_);
    setRenderHints(QPainter::Antialiasing | QPainter::TextAntialiasing);
    setDragMode(QGraphicsView::ScrollHandDrag);
    setTransformationAnchor(QGraphicsView::AnchorUnderMouse);
    setBackgroundBrush(QColor(0xfb, 0xfb, 0xfd));
    setViewportUpdateMode(QGraphicsView::SmartViewportUpdate);
    minimap_->setScene(&scene_);
    minimap_->resize(170, 210);
    placeMinimap();
}

GraphView::~GraphView() = default;

void GraphView::setDocument(Document* document)
{
    if (document_) disconnect(document_, nullptr, this, nullptr);
    document_ = document;
    fitPending_ = true;
    if (document_) {
        connect(document_, &Document::modelChanged, this, &GraphView::onModelChanged);
        connect(document_, &Document::planChanged, this, &GraphView::rebuild);
        connect(document_, &Document::expandedClassesChanged, this, &GraphView::rebuild);
        connect(document_, &Document::selectionChanged, this, &GraphView::showSelection);
    }
    rebuild();
}

void GraphView::onModelChanged()
{
    fitPending_ = true;
    // Dot's positions belong to the old fold; a job still running for it is stale.
    cardLayouts_.clear();
    layoutInFlight_.clear();
    layoutWorkspace_ = nullptr;
    layoutJobs_.cancel(); // its result is checked against the workspace too
    // A model with nothing expanded yet opens its biggest repeated block.
    if (document_ && document_->expandedClasses().isEmpty() && document_->plan()) {
        const FoldedGraph& f = document_->plan()->workspace->folded;
        int best = -1;
        double weight = -1;
        for (const auto& run : f.runs) {
            const auto& bc = f.classes[static_cast<size_t>(run.classId)];
            const double w = double(run.count) * bc.opsPerInstance();
            if (w > weight) {
                weight = w;
                best = run.classId;
            }
        }
        if (best >= 0) document_->setExpandedClasses({QString::fromStdString(f.classes[static_cast<size_t>(best)].label)});
    }
}

quint64 GraphView::relayout()
{
    cardLayouts_.clear();
    layoutInFlight_.clear();
    rebuild(); // requests every expanded card again
    return layoutJobs_.latestJob();
}

quint64 GraphView::startLayout(std::map<int, LayoutInput> inputs)
{
    const auto plan = document_ ? document_->plan() : nullptr;
    if (!plan) return layoutJobs_.latestJob();
    layoutInFlight_.clear();
    for (const auto& [run, input] : inputs) layoutInFlight_.insert(run);
    // The workspace is kept alive by the job, and compared when the result arrives.
    return layoutJobs_.start([workspace = plan->workspace, inputs = std::move(inputs)](const std::atomic<bool>&) {
        return LaidOutCards{workspace, layoutCards(inputs)};
    });
}

void GraphView::applyLayout(quint64 job, LaidOutCards cards)
{
    const auto current = document_ ? document_->plan() : nullptr;
    if (!current || current->workspace != cards.workspace) {
        emit layoutDropped(job);
        return;
    }
    for (auto& [run, layout] : cards.layouts) cardLayouts_[run] = std::move(layout);
    layoutInFlight_.clear();
    rebuild();
    emit layoutFinished(job);
}

void GraphView::showSelection()
{
    if (selectionMarker_) {
        scene_.removeItem(selectionMarker_);
        delete selectionMarker_;
        selectionMarker_ = nullptr;
    }
    const auto plan = document_ ? document_->plan() : nullptr;
    const OpId op = document_ ? document_->selectedOp() : -1;
    if (!plan || op < 0 || static_cast<size_t>(op) >= plan->workspace->folded.classOfOp.size()) return;
    // An op of another instance is shown at its position in the displayed representative.
    const FoldedGraph& f = plan->workspace->folded;
    const int cls = f.classOfOp[static_cast<size_t>(op)];
    const auto& instOps =
        f.classes[static_cast<size_t>(cls)].instances[static_cast<size_t>(f.instanceOfOp[static_cast<size_t>(op)])].ops;
    const size_t position = static_cast<size_t>(std::find(instOps.begin(), instOps.end(), op) - instOps.begin());
    QGraphicsItem* target = nullptr;
    // The op itself when it is drawn (an unfolded run draws every instance), else its instance's card.
    if (const auto it = index_.opItems.find(op); it != index_.opItems.end())
        target = it->second;
    else if (const auto card = index_.instanceCardOf.find({cls, f.instanceOfOp[static_cast<size_t>(op)]});
             card != index_.instanceCardOf.end())
        target = card->second;
    for (size_t c = 0; c < index_.cards.size() && !target; ++c) {
        if (index_.cardClass[c] != cls) continue;
        const Run& run = f.runs[static_cast<size_t>(index_.cardRun[c])];
        if (f.instanceOfOp[static_cast<size_t>(op)] < run.firstInstance ||
            f.instanceOfOp[static_cast<size_t>(op)] >= run.firstInstance + run.count)
            continue;
        const OpId shown = f.classes[static_cast<size_t>(cls)].instances[static_cast<size_t>(run.firstInstance)].ops[position];
        const auto it = index_.opItems.find(shown);
        target = it != index_.opItems.end() ? it->second : index_.cards[c];
    }
    if (!target) return;
    auto* marker = scene_.addPath(
        [&] {
            QPainterPath p;
            p.addRoundedRect(target->boundingRect().adjusted(-3, -3, 3, 3), 8, 8);
            return p;
        }(),
        QPen(QColor(0x10, 0x50, 0xd0), 3), Qt::NoBrush);
    marker->setZValue(5);
    selectionMarker_ = marker;
    ensureVisible(target, 60, 60);
}

void GraphView::setMarkedOps(const std::vector<std::string>& ops)
{
    markedOps_ = ops;
    showDifferences();
}

// The ops that differ from the compared plan: a dashed magenta frame around each drawn one
// (representative ops: the card of a run shows its first instance).
void GraphView::showDifferences()
{
    for (QGraphicsItem* m : differenceMarkers_) {
        scene_.removeItem(m);
        delete m;
    }
    differenceMarkers_.clear();
    const auto plan = document_ ? document_->plan() : nullptr;
    if (!plan) return;
    const Graph& g = plan->workspace->model.graph;
    std::map<std::string, OpId> byName;
    for (const auto& op : g.ops) byName.emplace(op.name, op.id);
    for (const auto& name : markedOps_) {
        const auto id = byName.find(name);
        if (id == byName.end()) continue;
        const auto it = index_.opItems.find(id->second);
        if (it == index_.opItems.end()) continue;
        QPainterPath path;
        path.addRoundedRect(it->second->boundingRect().adjusted(-6, -6, 6, 6), 9, 9);
        auto* marker = scene_.addPath(path, QPen(QColor(0xc0, 0x1f, 0x9a), 2.2, Qt::DashLine), Qt::NoBrush);
        marker->setZValue(4);
        marker->setToolTip(tr("Its strategy differs in the compared plan (Explain > Compare plans)"));
        differenceMarkers_.push_back(marker);
    }
}

int GraphView::markedOpCount() const { return static_cast<int>(differenceMarkers_.size()); }

QString GraphView::instancesKey(const QString& classLabel) { return instancesViewKey(classLabel); }

bool GraphView::instancesShown(int card) const
{
    const auto plan = document_ ? document_->plan() : nullptr;
    if (!plan || card < 0 || card >= static_cast<int>(index_.cards.size())) return false;
    const QString label = QString::fromStdString(
        plan->workspace->folded.classes[static_cast<size_t>(index_.cardClass[static_cast<size_t>(card)])].label);
    return document_->expandedClasses().contains(instancesKey(label));
}

void GraphView::setInstancesShown(int card, bool shown)
{
    const auto plan = document_ ? document_->plan() : nullptr;
    if (!plan || card < 0 || card >= static_cast<int>(index_.cards.size()) || shown == instancesShown(card)) return;
    const QString key = instancesKey(QString::fromStdString(
        plan->workspace->folded.classes[static_cast<size_t>(index_.cardClass[static_cast<size_t>(card)])].label));
    QStringList expanded = document_->expandedClasses();
    if (shown)
        expanded << key;
    else
        expanded.removeAll(key);
    document_->setExpandedClasses(expanded);
}

void GraphView::toggleCard(int card)
{
    if (!document_ || card < 0 || card >= static_cast<int>(index_.cards.size())) return;
    const auto plan = document_->plan();
    const QString label = QString::fromStdString(
        plan->workspace->folded.classes[static_cast<size_t>(index_.cardClass[static_cast<size_t>(card)])].label);
    QStringList expanded = document_->expandedClasses();
    if (expanded.contains(label))
        expanded.removeAll(label);
    else
        expanded << label;
    document_->setExpandedClasses(expanded);
}

bool GraphView::findNext(const QString& text)
{
    const auto plan = document_ ? document_->plan() : nullptr;
    if (!plan || text.isEmpty()) return false;
    const Graph& g = plan->workspace->model.graph;
    const int n = static_cast<int>(g.ops.size());
    const int start = document_->selectedOp();
    for (int k = 1; k <= n; ++k) {
        const OpId op = (start + k + n) % n;
        if (!QString::fromStdString(g.op(op).name).contains(text, Qt::CaseInsensitive)) continue;
        // Open the card that holds it, so the op itself can be shown.
        const QString label = QString::fromStdString(
            plan->workspace->folded.classes[static_cast<size_t>(plan->workspace->folded.classOfOp[static_cast<size_t>(op)])]
                .label);
        if (!document_->expandedClasses().contains(label)) document_->setExpandedClasses(document_->expandedClasses() << label);
        document_->setSelectedOp(op);
        return true;
    }
    return false;
}

void GraphView::zoomBy(double factor)
{
    const double current = transform().m11();
    const double next = std::clamp(current * factor, 0.05, 4.0);
    scale(next / current, next / current);
    minimap_->viewport()->update();
}

void GraphView::zoomIn() { zoomBy(1.25); }
void GraphView::zoomOut() { zoomBy(0.8); }

void GraphView::fitAll()
{
    fitInView(scene_.sceneRect(), Qt::KeepAspectRatio);
    minimap_->viewport()->update();
}

void GraphView::fitWidth()
{
    const QRectF rect = scene_.sceneRect();
    if (rect.isEmpty()) return;
    const double scaleX = (viewport()->width() - 24) / rect.width();
    const double s = std::clamp(scaleX, 0.3, 0.85);
    setTransform(QTransform::fromScale(s, s));
    centerOn(rect.center().x(), rect.top() + viewport()->height() / s / 2);
    minimap_->viewport()->update();
}

void GraphView::setMinimapVisible(bool visible) { minimap_->setVisible(visible); }

void GraphView::wheelEvent(QWheelEvent* event)
{
    if (event->modifiers() & Qt::ControlModifier) {
        zoomBy(std::pow(1.0015, event->angleDelta().y()));
        event->accept();
        return;
    }
    QGraphicsView::wheelEvent(event);
}

void GraphView::mousePressEvent(QMouseEvent* event)
{
    if (event->button() == Qt::LeftButton && document_) {
        const QPointF scenePos = mapToScene(event->pos());
        for (QGraphicsItem* item : items(event->pos()))
            if (auto* card = qgraphicsitem_cast<CardItem*>(item);
                card && card->data(KindKey).toInt() == CardKindItem && card->toggleRect().contains(scenePos)) {
                toggleInstances(card->data(ValueKey).toInt());
                event->accept();
                return;
            }
        // A stage of the pipeline's band: every view shows that stage's plan.
        for (size_t stage = 0; stage < index_.stageSegments.size(); ++stage)
            if (index_.stageSegments[stage].contains(scenePos)) {
                document_->showStage(static_cast<int>(stage));
                event->accept();
                return;
            }
        for (QGraphicsItem* item : items(event->pos())) {
            if (item->data(KindKey).toInt() == OpKindItem) {
                document_->setSelectedOp(item->data(ValueKey).toInt());
                break;
            }
        }
    }
    QGraphicsView::mousePressEvent(event);
}

void GraphView::mouseDoubleClickEvent(QMouseEvent* event)
{
    for (QGraphicsItem* item : items(event->pos())) {
        if (auto* card = qgraphicsitem_cast<CardItem*>(item); card && card->toggleRect().contains(mapToScene(event->pos()))) {
            event->accept(); // the second click of a double-click on the +/- toggle
            return;
        }
        if (item->data(KindKey).toInt() == CardKindItem || item->data(KindKey).toInt() == InstanceCardKindItem) {
            // Only the header toggles, so double-clicking an op inside does not fold its card.
            const QPointF scenePos = mapToScene(event->pos());
            if (scenePos.y() - item->boundingRect().top() <= kCardHeader + 8 ||
                item->boundingRect().height() <= kCollapsedH + 20) {
                toggleCard(item->data(ValueKey).toInt());
                return;
            }
        }
    }
    QGraphicsView::mouseDoubleClickEvent(event);
}

void GraphView::resizeEvent(QResizeEvent* event)
{
    QGraphicsView::resizeEvent(event);
    placeMinimap();
    if (fitPending_ && !scene_.items().isEmpty() && isVisible()) {
        fitPending_ = false;
        fitWidth();
    }
}

void GraphView::showEvent(QShowEvent* event)
{
    QGraphicsView::showEvent(event);
    placeMinimap();
    if (fitPending_ && !scene_.items().isEmpty()) {
        fitPending_ = false;
        fitWidth();
    }
}

void GraphView::scrollContentsBy(int dx, int dy)
{
    QGraphicsView::scrollContentsBy(dx, dy);
    minimap_->viewport()->update();
}

void GraphView::placeMinimap()
{
    minimap_->move(viewport()->width() - minimap_->width() - 10, viewport()->height() - minimap_->height() - 10);
    minimap_->refit();
}

} // namespace tp
