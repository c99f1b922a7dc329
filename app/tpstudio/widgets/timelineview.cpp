#include "timelineview.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QKeyEvent>
#include <QLabel>
#include <QMouseEvent>
#include <QPainter>
#include <QToolButton>
#include <QToolTip>
#include <QVBoxLayout>
#include <QWheelEvent>

#include <algorithm>
#include <cmath>
#include <functional>

#include "presentation.h"

namespace tp {

using explain::Timeline;
using explain::TimelineLane;
using explain::TimelineSegment;
using Kind = TimelineSegment::Kind;

/// The drawing and the mouse and keys; TimelineView owns the data and the summary above it.
class TimelineCanvas : public QWidget {
public:
    static constexpr int kLabelWidth = 150;
    static constexpr int kTickHeight = 22;
    static constexpr int kPhaseHeight = 18;
    static constexpr int kAxisHeight = kTickHeight + kPhaseHeight; ///< ticks, then the phases' band
    static constexpr int kLaneHeight = 30;
    static constexpr int kLegendHeight = 24;

    std::optional<Timeline> timeline;
    const Graph* graph = nullptr;
    OpId selected = -1;
    std::vector<bool> oddLayer; ///< per op: in an odd instance of its block class (shaded apart from its neighbours)
    double from = 0, to = 1; ///< the visible range, seconds
    std::function<void(OpId)> onSelect, onZoomToLayer;

    explicit TimelineCanvas(QWidget* parent) : QWidget(parent)
    {
        setMouseTracking(true);
        setFocusPolicy(Qt::StrongFocus);
        setMinimumHeight(kAxisHeight + 2 * kLaneHeight + kLegendHeight);
    }

    double step() const { return timeline ? timeline->stepSeconds : 1.0; }

    void showRange(double a, double b)
    {
        const double span = std::max(b - a, std::max(step() * 1e-7, 1e-12));
        a = std::clamp(a, 0.0, std::max(0.0, step() - span));
        from = a;
        to = std::min(step(), a + span);
        if (to - from < span) from = std::max(0.0, to - span);
        update();
    }
    void showAll() { showRange(0, step()); }

    QSize sizeHint() const override
    {
        const int lanes = timeline ? static_cast<int>(timeline->lanes.size()) : 2;
        return {900, kAxisHeight + lanes * kLaneHeight + kLegendHeight + 4};
    }

protected:
    void paintEvent(QPaintEvent*) override;
    void wheelEvent(QWheelEvent* event) override
    {
        const double at = timeAt(event->position().x());
        const double factor = std::pow(1.25, -event->angleDelta().y() / 120.0);
        zoomAround(at, factor);
        event->accept();
    }
    void mousePressEvent(QMouseEvent* event) override
    {
        pressX_ = event->position().x();
        pressFrom_ = from;
        dragged_ = false;
    }
    void mouseMoveEvent(QMouseEvent* event) override
    {
        if (event->buttons() & Qt::LeftButton) {
            const double dx = event->position().x() - pressX_;
            if (std::abs(dx) > 3) dragged_ = true;
            if (dragged_) showRange(pressFrom_ - dx * secondsPerPixel(), pressFrom_ - dx * secondsPerPixel() + (to - from));
            return;
        }
        const TimelineSegment* s = segmentAt(event->position());
        if (s)
            QToolTip::showText(event->globalPosition().toPoint(), tooltipOf(*s), this);
        else
            QToolTip::hideText();
    }
    void mouseReleaseEvent(QMouseEvent* event) override
    {
        if (dragged_ || event->button() != Qt::LeftButton) return;
        if (const TimelineSegment* s = segmentAt(event->position()); s && s->op >= 0 && onSelect) onSelect(s->op);
    }
    void mouseDoubleClickEvent(QMouseEvent* event) override
    {
        if (const TimelineSegment* s = segmentAt(event->position()); s && s->op >= 0 && onZoomToLayer) onZoomToLayer(s->op);
    }
    void keyPressEvent(QKeyEvent* event) override
    {
        const double middle = (from + to) / 2, span = to - from;
        switch (event->key()) {
        case Qt::Key_Plus:
        case Qt::Key_Equal:
            zoomAround(middle, 1 / 1.5);
            break;
        case Qt::Key_Minus:
            zoomAround(middle, 1.5);
            break;
        case Qt::Key_0:
        case Qt::Key_Home:
            showAll();
            break;
        case Qt::Key_Left:
            showRange(from - span / 4, to - span / 4);
            break;
        case Qt::Key_Right:
            showRange(from + span / 4, to + span / 4);
            break;
        default:
            QWidget::keyPressEvent(event);
        }
    }

public:
    std::optional<QPoint> centreOf(OpId op, Kind kind) const
    {
        if (!timeline) return std::nullopt;
        for (const auto& s : timeline->lanes[0].segments)
            if (s.op == op && s.kind == kind) {
                const double x = (xOf(s.start) + xOf(s.end())) / 2;
                if (x < kLabelWidth || x > width()) return std::nullopt;
                return QPoint(static_cast<int>(x), kAxisHeight + kLaneHeight / 2);
            }
        return std::nullopt;
    }

private:
    double plotWidth() const { return std::max(1, width() - kLabelWidth - 8); }
    double secondsPerPixel() const { return (to - from) / plotWidth(); }
    double xOf(double t) const { return kLabelWidth + (t - from) / (to - from) * plotWidth(); }
    double timeAt(double x) const { return from + (x - kLabelWidth) * secondsPerPixel(); }
    QRectF laneRect(size_t lane) const
    {
        return {0.0, static_cast<double>(kAxisHeight + static_cast<int>(lane) * kLaneHeight), static_cast<double>(width()),
                static_cast<double>(kLaneHeight)};
    }

    void zoomAround(double at, double factor)
    {
        const double span = (to - from) * factor;
        const double share = (at - from) / (to - from);
        showRange(at - share * span, at - share * span + span);
    }

    /// The segment under the point: its lane's segments do not overlap (one collective at a
    /// time per axis), so a binary search by start, with a few pixels of slack for thin ones.
    const TimelineSegment* segmentAt(QPointF p) const
    {
        if (!timeline || p.x() < kLabelWidth || p.y() < kAxisHeight) return nullptr;
        const auto lane = static_cast<size_t>((p.y() - kAxisHeight) / kLaneHeight);
        if (lane >= timeline->lanes.size()) return nullptr;
        const auto& segs = timeline->lanes[lane].segments;
        const double t = timeAt(p.x()), slack = 3 * secondsPerPixel();
        auto it = std::upper_bound(segs.begin(), segs.end(), t, [](double v, const TimelineSegment& s) { return v < s.start; });
        const TimelineSegment* best = nullptr;
        double bestDistance = slack;
        for (auto c = it == segs.begin() ? it : std::prev(it); c != segs.end() && c->start <= t + slack; ++c) {
            const double distance = t < c->start ? c->start - t : (t > c->end() ? t - c->end() : 0.0);
            if (distance <= bestDistance) {
                best = &*c;
                bestDistance = distance;
                if (distance == 0) break;
            }
        }
        return best;
    }

    QString opName(OpId op) const
    {
        if (op < 0) return tr("all weights");
        return graph && static_cast<size_t>(op) < graph->ops.size() ? QString::fromStdString(graph->ops[static_cast<size_t>(op)].name)
                                                                      : QString::number(op);
    }

    static QString microBatchLabel(const TimelineSegment& s)
    {
        QString text = (s.kind == Kind::Forward ? QStringLiteral("F") : QStringLiteral("B")) + QString::number(s.microBatch + 1);
        if (s.chunk >= 0) text += QStringLiteral(".") + QString::number(s.chunk + 1);
        return text;
    }

    QString tooltipOf(const TimelineSegment& s) const
    {
        if (s.kind == Kind::Idle)
            return tr("<b>idle</b>: the pipeline's bubble (or a send awaited), %1 from %2")
                .arg(QString::fromStdString(formatSeconds(s.seconds)), QString::fromStdString(formatSeconds(s.start)));
        if (s.microBatch >= 0) {
            QString what = tr("<b>%1 of micro-batch %2</b>").arg(s.kind == Kind::Forward ? tr("forward") : tr("backward")).arg(s.microBatch + 1);
            if (s.chunk >= 0) what += tr(", model chunk %1").arg(s.chunk + 1);
            return what + tr("<br>%1, from %2").arg(QString::fromStdString(formatSeconds(s.seconds)),
                                                   QString::fromStdString(formatSeconds(s.start)));
        }
        QString what;
        switch (s.kind) {
        case Kind::Forward:
            what = tr("forward compute");
            break;
        case Kind::Backward:
            what = tr("backward compute");
            break;
        case Kind::Optimizer:
            what = tr("optimizer step");
            break;
        case Kind::Communication: {
            what = QString::fromUtf8(collectiveName(s.collective).data()) + " (" + QString::fromUtf8(phaseName(s.phase).data());
            if (s.recomputed) what += tr(", recomputed");
            what += ")";
            if (s.axis >= 0 && timeline) what += tr(" over ") + QString::fromStdString(timeline->lanes[laneOfAxis(s.axis)].name);
            break;
        }
        case Kind::Idle:
            break;
        }
        QString text = QStringLiteral("<b>%1</b><br>%2: %3, from %4").arg(opName(s.op).toHtmlEscaped(), what,
                                                                           QString::fromStdString(formatSeconds(s.seconds)),
                                                                           QString::fromStdString(formatSeconds(s.start)));
        if (s.kind == Kind::Communication) {
            text += tr("<br>%1 per device").arg(QString::fromStdString(formatBytes(s.bytes)));
            if (s.axis >= 0)
                text += tr("<br>exposed %1, hidden under compute %2")
                            .arg(QString::fromStdString(formatSeconds(s.exposedSeconds)),
                                 QString::fromStdString(formatSeconds(s.seconds - s.exposedSeconds)));
            else
                text += tr("<br>the step waits for it");
        }
        return text;
    }

    size_t laneOfAxis(int axis) const
    {
        for (size_t l = 0; l < timeline->lanes.size(); ++l)
            if (timeline->lanes[l].axis == axis) return l;
        return 0;
    }

    static QColor colourOf(const TimelineSegment& s)
    {
        switch (s.kind) {
        case Kind::Forward:
            return stepPartColor(StepPart::Forward);
        case Kind::Backward:
            return stepPartColor(StepPart::Backward);
        case Kind::Optimizer:
            return stepPartColor(StepPart::Optimizer);
        case Kind::Communication:
            return collectiveColor(s.collective);
        case Kind::Idle:
            return stepPartColor(StepPart::Idle);
        }
        return Qt::gray;
    }

    void paintAxis(QPainter& p) const;
    void paintLane(QPainter& p, size_t lane) const;
    void paintLegend(QPainter& p) const;

    double pressX_ = 0, pressFrom_ = 0;
    bool dragged_ = false;
};

void TimelineCanvas::paintAxis(QPainter& p) const
{
    // Ticks at 1, 2 or 5 times a power of ten, about every 110 pixels.
    const double raw = (to - from) / std::max(1.0, plotWidth() / 110);
    const double power = std::pow(10.0, std::floor(std::log10(raw)));
    double tick = power;
    for (double m : {1.0, 2.0, 5.0, 10.0})
        if (m * power >= raw) {
            tick = m * power;
            break;
        }
    const QColor grid = palette().color(QPalette::Mid);
    p.setPen(palette().color(QPalette::Text));
    for (double t = std::ceil(from / tick) * tick; t <= to + tick * 1e-9; t += tick) {
        const double x = xOf(t);
        p.setPen(grid);
        p.drawLine(QPointF(x, kTickHeight - 4), QPointF(x, height() - kLegendHeight));
        p.setPen(palette().color(QPalette::Text));
        p.drawText(QRectF(x + 3, 2, 120, kTickHeight - 4), Qt::AlignLeft | Qt::AlignVCenter,
                   QString::fromStdString(formatSeconds(t)));
    }
    if (timeline->schedule) return; // a schedule interleaves the phases
    // The phases as a band under the ticks: forward, backward, optimizer step.
    const double bounds[] = {0, timeline->forwardEndSeconds, timeline->backwardEndSeconds, timeline->stepSeconds};
    const QString names[] = {tr("forward"), tr("backward"), tr("optimizer step")};
    const QColor shades[] = {stepPartColor(StepPart::Forward).lighter(170), stepPartColor(StepPart::Backward).lighter(190),
                             stepPartColor(StepPart::Optimizer).lighter(170)};
    for (int k = 0; k < 3; ++k) {
        const double a = std::max(bounds[k], from), b = std::min(bounds[k + 1], to);
        if (!(b > a)) continue;
        const QRectF band(xOf(a), kTickHeight, xOf(b) - xOf(a), kPhaseHeight - 2);
        p.fillRect(band, shades[k]);
        p.setPen(Qt::black);
        const QFontMetrics metrics(font());
        if (band.width() > 30)
            p.drawText(band.adjusted(4, 0, -2, 0), Qt::AlignLeft | Qt::AlignVCenter,
                       metrics.elidedText(names[k], Qt::ElideRight, static_cast<int>(band.width()) - 6));
    }
}

void TimelineCanvas::paintLane(QPainter& p, size_t lane) const
{
    const TimelineLane& l = timeline->lanes[lane];
    const QRectF row = laneRect(lane);
    p.fillRect(row, lane % 2 ? palette().color(QPalette::AlternateBase) : palette().color(QPalette::Base));
    p.setPen(palette().color(QPalette::Text));
    const QString label = l.name == "step" ? tr("step (critical path)") : QString::fromStdString(l.name);
    p.drawText(QRectF(6, row.top(), kLabelWidth - 10, row.height()), Qt::AlignLeft | Qt::AlignVCenter, label);
    p.save();
    p.setClipRect(QRectF(kLabelWidth, row.top(), plotWidth(), row.height()));
    const double top = row.top() + 4, h = row.height() - 8;
    const QFontMetrics metrics(font());
    auto first = std::upper_bound(l.segments.begin(), l.segments.end(), from,
                                  [](double v, const TimelineSegment& s) { return v < s.start; });
    if (first != l.segments.begin()) --first;
    double lastRight = -1;
    for (auto it = first; it != l.segments.end() && it->start <= to; ++it) {
        const TimelineSegment& s = *it;
        const double x0 = xOf(s.start), x1 = xOf(s.end());
        if (x1 < lastRight && x1 - x0 < 1) continue; // many sub-pixel segments: one pixel column each
        const QRectF r(x0, top, std::max(1.0, x1 - x0), h);
        lastRight = r.right();
        QColor colour = colourOf(s);
        if (s.kind != Kind::Communication && s.op >= 0 && static_cast<size_t>(s.op) < oddLayer.size() &&
            oddLayer[static_cast<size_t>(s.op)])
            colour = colour.lighter(118);
        if (s.kind == Kind::Communication && s.axis >= 0) {
            // Hidden part pale, exposed part (what the step waits for) in full colour.
            p.fillRect(r, colour.lighter(165));
            if (s.exposedSeconds > 0)
                p.fillRect(QRectF(x0, top, std::max(1.0, (x1 - x0) * s.exposedSeconds / s.seconds), h), colour);
        } else if (s.kind == Kind::Idle) {
            p.fillRect(r, QBrush(colour, Qt::BDiagPattern));
        } else {
            p.fillRect(r, colour);
        }
        if (s.op >= 0 && s.op == selected) {
            p.setPen(QPen(palette().color(QPalette::Text), 2));
            p.drawRect(r.adjusted(-1, -1, 1, 1));
        }
        if (r.width() > 36) {
            const QString text = s.kind == Kind::Idle            ? QString()
                                 : s.microBatch >= 0            ? microBatchLabel(s)
                                 : s.kind == Kind::Communication ? collectiveAbbrev(s.collective)
                                 : s.kind == Kind::Optimizer     ? tr("optimizer")
                                                                 : shortOpName(s.op >= 0 ? graph->ops[static_cast<size_t>(s.op)].name : "");
            p.setPen(Qt::white);
            p.drawText(r.adjusted(3, 0, -2, 0), Qt::AlignLeft | Qt::AlignVCenter, metrics.elidedText(text, Qt::ElideRight, static_cast<int>(r.width()) - 5));
        }
    }
    p.restore();
}

void TimelineCanvas::paintLegend(QPainter& p) const
{
    struct Item {
        QString name;
        QColor colour;
    };
    std::vector<Item> items = {{tr("forward"), stepPartColor(StepPart::Forward)},
                          {tr("backward"), stepPartColor(StepPart::Backward)},
                          {tr("optimizer"), stepPartColor(StepPart::Optimizer)},
                          {collectiveAbbrev(CollectiveKind::AllReduce), collectiveColor(CollectiveKind::AllReduce)},
                          {collectiveAbbrev(CollectiveKind::AllGather), collectiveColor(CollectiveKind::AllGather)},
                          {collectiveAbbrev(CollectiveKind::ReduceScatter), collectiveColor(CollectiveKind::ReduceScatter)},
                          {collectiveAbbrev(CollectiveKind::AllToAll), collectiveColor(CollectiveKind::AllToAll)},
                          {tr("hidden under compute"), collectiveColor(CollectiveKind::AllReduce).lighter(165)}};
    if (timeline->schedule) items = {items[0], items[1], {tr("idle (bubble)"), stepPartColor(StepPart::Idle)}};
    double x = kLabelWidth;
    const double y = height() - kLegendHeight + 6;
    const QFontMetrics metrics(font());
    for (const auto& item : items) {
        // The bubble is hatched on the lanes, so in the legend too.
        p.fillRect(QRectF(x, y, 12, 12), item.colour == stepPartColor(StepPart::Idle) ? QBrush(item.colour, Qt::BDiagPattern)
                                                                                       : QBrush(item.colour));
        p.setPen(palette().color(QPalette::Text));
        p.drawText(QPointF(x + 16, y + 11), item.name);
        x += 16 + metrics.horizontalAdvance(item.name) + 14;
    }
    // How to move around, where there is room for it.
    const QString hint = tr("wheel or +/− zoom · drag or ←/→ pan · double-click an op: its layer");
    if (x + metrics.horizontalAdvance(hint) + 12 < width()) {
        p.setPen(palette().color(QPalette::PlaceholderText));
        p.drawText(QRectF(x, y - 2, width() - x - 8, 16), Qt::AlignRight | Qt::AlignVCenter, hint);
    }
}

void TimelineCanvas::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    p.fillRect(rect(), palette().color(QPalette::Window));
    if (!timeline || !graph) {
        p.setPen(palette().color(QPalette::Text));
        p.drawText(rect(), Qt::AlignCenter, tr("No plan yet"));
        return;
    }
    for (size_t lane = 0; lane < timeline->lanes.size(); ++lane) paintLane(p, lane);
    paintAxis(p);
    paintLegend(p);
}

TimelineView::TimelineView(QWidget* parent) : QWidget(parent), canvas_(new TimelineCanvas(this)), summary_(new QLabel(this))
{
    summary_->setWordWrap(true);
    summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    auto* whole = new QToolButton(this);
    whole->setText(tr("Whole step"));
    whole->setToolTip(tr("Show the whole step (0 or Home)"));
    connect(whole, &QToolButton::clicked, this, [this] { canvas_->showAll(); });
    show_ = new QComboBox(this);
    show_->addItem(tr("Pipeline schedule"));
    show_->addItem(tr("Shown stage's step"));
    show_->setToolTip(tr("A pipelined plan: every stage's micro-batches and bubble, or the step of the stage the views show "
                         "(the slowest until another is chosen: View > Next Pipeline Stage) op by op"));
    show_->setVisible(false);
    connect(show_, &QComboBox::currentIndexChanged, this, [this] { refresh(); });
    auto* top = new QHBoxLayout;
    top->addWidget(summary_, 1);
    top->addWidget(show_);
    top->addWidget(whole);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->addLayout(top);
    layout->addWidget(canvas_, 1);
    canvas_->onSelect = [this](OpId op) {
        if (document_) document_->setSelectedOp(op);
    };
    canvas_->onZoomToLayer = [this](OpId op) { zoomToLayerOf(op); };
}

void TimelineView::setDocument(Document* document)
{
    if (document_) disconnect(document_, nullptr, this, nullptr);
    document_ = document;
    if (document_) {
        connect(document_, &Document::planChanged, this, &TimelineView::refresh);
        connect(document_, &Document::selectionChanged, this, [this](OpId op) {
            canvas_->selected = op;
            canvas_->update();
        });
    }
    refresh();
}

const std::optional<Timeline>& TimelineView::timeline() const
{
    if (stale_) const_cast<TimelineView*>(this)->rebuild();
    return canvas_->timeline;
}

std::pair<double, double> TimelineView::visibleRange() const { return {canvas_->from, canvas_->to}; }

void TimelineView::showRange(double from, double to) { canvas_->showRange(from, to); }

QWidget* TimelineView::canvas() const { return canvas_; }

std::optional<QPoint> TimelineView::segmentCentre(OpId op, explain::TimelineSegment::Kind kind) const
{
    return canvas_->centreOf(op, kind);
}

void TimelineView::zoomToLayerOf(OpId op)
{
    const PlanWorkspace* ws = document_ ? document_->workspace() : nullptr;
    if (!ws || !timeline() || timeline()->schedule || op < 0 || static_cast<size_t>(op) >= ws->folded.classOfOp.size()) return;
    const BlockClass& cls = ws->folded.classes[static_cast<size_t>(ws->folded.classOfOp[static_cast<size_t>(op)])];
    const BlockInstance& instance = cls.instances[static_cast<size_t>(ws->folded.instanceOfOp[static_cast<size_t>(op)])];
    // The layer's forward: from its first op's segment to its last op's on the critical path.
    std::vector<bool> inLayer(ws->costModel->graph().ops.size(), false);
    for (OpId o : instance.ops) inLayer[static_cast<size_t>(o)] = true;
    double from = canvas_->step(), to = 0;
    for (const auto& s : canvas_->timeline->lanes[0].segments)
        if (s.op >= 0 && inLayer[static_cast<size_t>(s.op)] && s.start < canvas_->timeline->forwardEndSeconds) {
            from = std::min(from, s.start);
            to = std::max(to, s.end());
        }
    if (to <= from) return;
    const double pad = (to - from) * 0.05;
    canvas_->showRange(from - pad, to + pad);
}

void TimelineView::showSchedule(const PipelinePlan& pipeline)
{
    canvas_->timeline = explain::buildPipelineTimeline(pipeline);
    canvas_->graph = &plan_->workspace->costModel->graph();
    canvas_->oddLayer.clear();
    const Timeline& t = *canvas_->timeline;
    double idle = 0, busy = 0;
    for (const auto& lane : t.lanes)
        for (const auto& seg : lane.segments) (seg.kind == Kind::Idle ? idle : busy) += seg.seconds;
    summary_->setText(tr("<b>%1</b>: the micro-batches run in %2, the stages idle %3 of it (the plan's step, %5, adds the "
                         "optimizer step and charges the bubble as (p-1)/V micro-batch times of the slowest stage: %4)")
                          .arg(QString::fromStdString(pipelineSummary(pipeline)).section(QLatin1Char(':'), 0, 0),
                               QString::fromStdString(formatSeconds(t.stepSeconds)),
                               QString::number(100 * idle / std::max(1e-300, idle + busy), 'f', 1) + QStringLiteral("%"),
                               QString::number(100 * pipeline.bubbleFraction(), 'f', 1) + QStringLiteral("%"),
                               QString::fromStdString(formatSeconds(pipeline.stepSeconds))));
    canvas_->updateGeometry();
    canvas_->showAll();
}

void TimelineView::showEvent(QShowEvent* event)
{
    QWidget::showEvent(event);
    if (stale_) rebuild();
}

void TimelineView::refresh()
{
    stale_ = true;
    canvas_->selected = document_ ? document_->selectedOp() : -1;
    if (isVisible()) rebuild();
}

void TimelineView::rebuild()
{
    stale_ = false;
    const auto plan = document_ ? document_->plan() : nullptr;
    plan_ = plan;
    if (!plan || !plan->workspace || plan->result.strategyOfOp.empty()) {
        canvas_->timeline.reset();
        canvas_->graph = nullptr;
        summary_->setText(tr("No plan yet."));
        canvas_->update();
        return;
    }
    const CostModel& model = *plan->workspace->costModel;
    show_->setVisible(plan->pipeline.has_value());
    if (plan->pipeline && show_->currentIndex() == 0) {
        showSchedule(*plan->pipeline);
        return;
    }
    canvas_->timeline = explain::buildTimeline(model, plan->result);
    canvas_->graph = &model.graph();
    const FoldedGraph& fold = plan->workspace->folded;
    canvas_->oddLayer.assign(model.graph().ops.size(), false);
    for (size_t op = 0; op < fold.instanceOfOp.size() && op < canvas_->oddLayer.size(); ++op)
        canvas_->oddLayer[op] = fold.instanceOfOp[op] % 2 == 1;
    const Timeline& t = *canvas_->timeline;
    const Breakdown& b = plan->result.breakdown;
    double forward = 0, backward = 0;
    for (const auto& s : t.lanes[0].segments) {
        if (s.kind == Kind::Forward) forward += s.seconds;
        if (s.kind == Kind::Backward) backward += s.seconds;
    }
    QString text = tr("<b>Step %1</b>: forward compute %2, backward %3, optimizer %4; communication %5, of it exposed %6")
                       .arg(QString::fromStdString(formatSeconds(t.stepSeconds)), QString::fromStdString(formatSeconds(forward)),
                            QString::fromStdString(formatSeconds(backward)), QString::fromStdString(formatSeconds(b.optimizerSeconds)),
                            QString::fromStdString(formatSeconds(b.commSeconds)),
                            QString::fromStdString(formatSeconds(t.exposedCommSeconds())));
    if (plan->pipeline) {
        const int slowest = plan->pipeline->stages[static_cast<size_t>(plan->pipeline->slowest)].stage;
        const int shown = document_ ? document_->shownStage() : plan->workspace->stage.stage;
        text += tr(" · pipeline stage %1 of %2%3, its micro-batches together")
                    .arg(shown + 1)
                    .arg(plan->pipeline->schedule.stages)
                    .arg(shown == slowest ? tr(" (the slowest)") : QString());
    }
    summary_->setText(text);
    canvas_->updateGeometry();
    canvas_->showAll();
}

} // namespace tp
