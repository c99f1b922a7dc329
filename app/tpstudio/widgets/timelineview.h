#pragma once
// The Timeline dock: one training step of the plan on a time axis (core/explain/timeline.h).
// The first lane is the step's critical path (forward in graph order, backward in reverse, the
// optimizer step, and the communication the step waits for); below it one lane per mesh axis
// with every collective in full, the part hidden under compute drawn pale. Hover names the op
// and the figures; a click selects the op in every view; double-click zooms to its layer. Wheel
// or +/- zoom around the pointer, drag or the arrow keys pan, 0 shows the whole step.
#include <QPointer>
#include <QWidget>

#include <memory>
#include <optional>

#include "document.h"
#include "explain/timeline.h"

class QComboBox;
class QLabel;

namespace tp {

class TimelineCanvas;

class TimelineView : public QWidget {
    Q_OBJECT
public:
    explicit TimelineView(QWidget* parent = nullptr);
    void setDocument(Document* document);
    /// The timeline shown (std::nullopt before a plan); built when the view is first shown
    /// after a plan changes.
    const std::optional<explain::Timeline>& timeline() const;
    /// The time range on screen, in seconds from the start of the step.
    std::pair<double, double> visibleRange() const;
    /// Shows [from, to] of the step (clamped to the step).
    void showRange(double from, double to);
    /// Shows the instance (layer) that holds `op`, as double-clicking one of its segments does.
    void zoomToLayerOf(OpId op);
    /// The drawing (mouse and keys go there), and where on it the op's first segment of `kind`
    /// on the critical path is drawn (its centre; std::nullopt when off screen): for tests.
    QWidget* canvas() const;
    std::optional<QPoint> segmentCentre(OpId op, explain::TimelineSegment::Kind kind) const;

protected:
    void showEvent(QShowEvent* event) override;

private:
    void refresh();
    void rebuild();
    void showSchedule(const PipelinePlan& pipeline);

    QPointer<Document> document_;
    std::shared_ptr<const PlanOutcome> plan_; ///< the plan drawn (its graph and cost model stay alive)
    TimelineCanvas* canvas_;
    QLabel* summary_;
    QComboBox* show_; ///< a pipelined plan: its schedule or its slowest stage's step
    bool stale_ = true;
};

} // namespace tp
