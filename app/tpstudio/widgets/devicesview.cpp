#include "devicesview.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QKeyEvent>
#include <QLabel>
#include <QPainter>
#include <QPainterPath>
#include <QTimer>
#include <QToolButton>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

#include "presentation.h"

namespace tp {

using explain::DeviceStep;
using explain::TensorPicture;

namespace {

constexpr double kSecondsPerStep = 1.6; ///< a collective's animation at 1x

CollectiveKind kindOf(const std::string& name)
{
    for (CollectiveKind k : {CollectiveKind::AllReduce, CollectiveKind::AllGather, CollectiveKind::ReduceScatter, CollectiveKind::AllToAll})
        if (collectiveName(k) == name) return k;
    return CollectiveKind::AllReduce;
}

/// The (up to) two dims a picture shows: those some device holds only part of (in any of the
/// pictures given), then the largest others. First vertical, second horizontal.
std::vector<size_t> shownDims(const std::vector<const TensorPicture*>& pictures)
{
    const TensorPicture& p = *pictures.front();
    std::vector<size_t> dims;
    for (size_t d = 0; d < p.shape.size(); ++d) {
        bool split = false;
        for (const auto* q : pictures)
            for (const auto& dev : q->devices)
                split |= d < dev.ranges.size() && (dev.ranges[d].first != 0 || dev.ranges[d].second != p.shape[d]);
        if (split) dims.push_back(d);
    }
    std::vector<size_t> rest;
    for (size_t d = 0; d < p.shape.size(); ++d)
        if (std::find(dims.begin(), dims.end(), d) == dims.end()) rest.push_back(d);
    std::stable_sort(rest.begin(), rest.end(), [&](size_t a, size_t b) { return p.shape[a] > p.shape[b]; });
    for (size_t d : rest)
        if (dims.size() < 2) dims.push_back(d);
    if (dims.size() > 2) dims.resize(2);
    std::sort(dims.begin(), dims.end());
    return dims;
}

} // namespace

/// The grid of devices and what each holds.
class DevicesCanvas : public QWidget {
public:
    const Mesh* mesh = nullptr;
    const DeviceStep* step = nullptr;
    double progress = 1; ///< of the shown collective's animation

    explicit DevicesCanvas(QWidget* parent) : QWidget(parent) { setMinimumSize(320, 150); }

protected:
    void paintEvent(QPaintEvent*) override;

private:
    struct Cell {
        int block = 0, row = 0, col = 0;
    };
    Cell cellOf(const std::vector<int>& coords) const
    {
        const auto& axes = mesh->axes;
        const size_t r = axes.size();
        if (r <= 1) return {0, 0, coords.empty() ? 0 : coords[0]};
        if (r == 2) return {0, coords[0], coords[1]};
        int col = 0;
        for (size_t a = 2; a < r; ++a) col = col * axes[a].size + coords[a];
        return {coords[0], coords[1], col};
    }
    int blocks() const { return mesh->axes.size() >= 3 ? mesh->axes[0].size : 1; }
    int rows() const { return mesh->axes.size() <= 1 ? 1 : mesh->axes[mesh->axes.size() >= 3 ? 1 : 0].size; }
    int cols() const
    {
        const auto& axes = mesh->axes;
        if (axes.empty()) return 1;
        if (axes.size() == 1) return axes[0].size;
        if (axes.size() == 2) return axes[1].size;
        int c = 1;
        for (size_t a = 2; a < axes.size(); ++a) c *= axes[a].size;
        return c;
    }
    QRectF cellRect(const Cell& c) const
    {
        const double top = kHeader, left = kLeft, gap = 18, pad = 6;
        const double blockWidth = (width() - left - pad - (blocks() - 1) * gap) / blocks();
        const double w = blockWidth / cols(), h = (height() - top - kLegend) / rows();
        return QRectF(left + c.block * (blockWidth + gap) + c.col * w + 3, top + c.row * h + 3, w - 6, h - 6);
    }
    void paintTensor(QPainter& p, const QRectF& area, const TensorPicture& t, size_t device, const std::vector<size_t>& dims,
                     double opacity) const;
    void paintHeader(QPainter& p) const;
    void paintArrows(QPainter& p) const;
    void paintLegend(QPainter& p) const;

    static constexpr double kHeader = 44, kLeft = 34, kLegend = 22;
};

void DevicesCanvas::paintTensor(QPainter& p, const QRectF& area, const TensorPicture& t, size_t device,
                                const std::vector<size_t>& dims, double opacity) const
{
    if (device >= t.devices.size() || area.width() < 4 || area.height() < 4) return;
    p.save();
    p.setOpacity(opacity);
    p.fillRect(area, QColor(0xee, 0xee, 0xf2));
    p.setPen(QPen(QColor(0x99, 0x99, 0xa6), 1));
    p.drawRect(area);
    const auto& ranges = t.devices[device].ranges;
    auto span = [&](size_t k, double from, double length) -> std::pair<double, double> {
        if (k >= dims.size() || dims[k] >= ranges.size() || t.shape[dims[k]] <= 0) return {from, length};
        const double whole = static_cast<double>(t.shape[dims[k]]);
        return {from + length * ranges[dims[k]].first / whole, length * (ranges[dims[k]].second - ranges[dims[k]].first) / whole};
    };
    // Two dims: rows then columns; one dim: columns.
    const auto [y, h] = dims.size() >= 2 ? span(0, area.top(), area.height()) : std::pair{area.top(), area.height()};
    const auto [x, w] = span(dims.size() >= 2 ? 1 : 0, area.left(), area.width());
    const QRectF held(x, y, std::max(1.0, w), std::max(1.0, h));
    const QColor colour = operandRoleColor(t.role);
    if (t.partial) {
        p.fillRect(held, colour.lighter(150));
        p.fillRect(held, QBrush(colour.darker(120), Qt::BDiagPattern));
        p.setPen(Qt::black);
        QFont f = font();
        f.setBold(true);
        p.setFont(f);
        if (held.width() > 12 && held.height() > 12) p.drawText(held, Qt::AlignCenter, QStringLiteral("Σ"));
    } else {
        p.fillRect(held, colour);
    }
    p.restore();
}

void DevicesCanvas::paintHeader(QPainter& p) const
{
    QStringList axes;
    for (const auto& a : mesh->axes)
        axes << QStringLiteral("%1: %2 devices, %3%4")
                    .arg(QString::fromStdString(a.name))
                    .arg(a.size)
                    .arg(QString::fromStdString(formatBandwidth(a.link.bandwidth)))
                    .arg(a.crossesNodes ? tr(" across nodes") : tr(" inside a node"));
    p.setPen(palette().color(QPalette::Text));
    p.drawText(QRectF(kLeft, 2, width() - kLeft, 18), Qt::AlignLeft | Qt::AlignVCenter, axes.join(QStringLiteral("   ·   ")));
    // Column and row coordinates along the edges.
    const size_t r = mesh->axes.size();
    QFont small = font();
    small.setPointSizeF(std::max(6.0, small.pointSizeF() - 1));
    p.setFont(small);
    const QString colAxis = QString::fromStdString(r == 0 ? "" : mesh->axes[r == 1 ? 0 : (r == 2 ? 1 : 2)].name);
    const QString rowAxis = QString::fromStdString(r >= 2 ? mesh->axes[r == 2 ? 0 : 1].name : "");
    for (int b = 0; b < blocks(); ++b) {
        for (int c = 0; c < cols(); ++c) {
            const QRectF cell = cellRect({b, 0, c});
            p.drawText(QRectF(cell.left(), 22, cell.width(), 18), Qt::AlignCenter,
                       (r >= 3 && c == 0 ? QString::fromStdString(mesh->axes[0].name) + QStringLiteral("=%1  ").arg(b) : QString()) +
                           colAxis + QStringLiteral("=%1").arg(c));
        }
    }
    if (!rowAxis.isEmpty())
        for (int row = 0; row < rows(); ++row) {
            const QRectF cell = cellRect({0, row, 0});
            p.drawText(QRectF(0, cell.top(), kLeft - 4, cell.height()), Qt::AlignRight | Qt::AlignVCenter, rowAxis + QStringLiteral("=%1").arg(row));
        }
    p.setFont(font());
}

// The collective's groups (devices differing only along its axis) as rings of arrows, with a
// dot moving along each as the step plays.
void DevicesCanvas::paintArrows(QPainter& p) const
{
    if (!step || step->kind != DeviceStep::Kind::Collective || step->axis < 0) return;
    const int a = step->axis;
    const int size = mesh->axes[static_cast<size_t>(a)].size;
    if (size <= 1) return;
    const QColor colour = collectiveColor(kindOf(step->collective));
    const double t = std::clamp((progress - 0.1) / 0.8, 0.0, 1.0);
    p.save();
    p.setRenderHint(QPainter::Antialiasing);
    const auto& devices = step->before.devices;
    for (const auto& from : devices) {
        std::vector<int> next = from.coords;
        next[static_cast<size_t>(a)] = (next[static_cast<size_t>(a)] + 1) % size;
        if (size == 2 && from.coords[static_cast<size_t>(a)] == 1) continue; // one arrow pair for two
        const QPointF p0 = cellRect(cellOf(from.coords)).center(), p1 = cellRect(cellOf(next)).center();
        QPainterPath path(p0);
        const QPointF mid = (p0 + p1) / 2, normal(-(p1.y() - p0.y()) * 0.18, (p1.x() - p0.x()) * 0.18);
        path.quadTo(mid + normal, p1);
        p.setPen(QPen(colour, 2.5));
        p.setBrush(Qt::NoBrush);
        p.setOpacity(0.85);
        p.drawPath(path);
        if (progress > 0 && progress < 1) {
            p.setBrush(colour);
            p.setPen(Qt::white);
            p.drawEllipse(path.pointAtPercent(t), 6, 6);
            if (size == 2) p.drawEllipse(path.pointAtPercent(1 - t), 6, 6);
        }
    }
    p.restore();
}

void DevicesCanvas::paintLegend(QPainter& p) const
{
    double x = kLeft;
    const double y = height() - kLegend + 5;
    for (const auto& [role, name] : {std::pair{"input", tr("input")}, std::pair{"weight", tr("weight")}, std::pair{"output", tr("output")},
                                     std::pair{"gradient", tr("gradient")}}) {
        p.fillRect(QRectF(x, y, 12, 12), operandRoleColor(role));
        p.setPen(palette().color(QPalette::Text));
        p.drawText(QPointF(x + 16, y + 11), name);
        x += 28 + fontMetrics().horizontalAdvance(name);
    }
    p.fillRect(QRectF(x, y, 12, 12), operandRoleColor("input").lighter(150));
    p.fillRect(QRectF(x, y, 12, 12), QBrush(operandRoleColor("input").darker(120), Qt::BDiagPattern));
    p.drawText(QPointF(x + 16, y + 11), tr("Σ partial sums (to be reduced)   grey: held by other devices"));
}

void DevicesCanvas::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    p.fillRect(rect(), palette().color(QPalette::Base));
    if (!mesh || !step) {
        p.setPen(palette().color(QPalette::Text));
        p.drawText(rect(), Qt::AlignCenter, tr("Select an op to see what every device holds."));
        return;
    }
    paintHeader(p);
    // What each device holds: a collective's tensor before and after it (switching halfway), or
    // every operand of the compute side by side.
    std::vector<const TensorPicture*> shown;
    if (step->kind == DeviceStep::Kind::Compute)
        for (const auto& o : step->operands) shown.push_back(&o);
    const bool collective = step->kind == DeviceStep::Kind::Collective;
    const TensorPicture& now = progress < 0.5 ? step->before : step->after;
    std::vector<std::vector<size_t>> dims;
    if (collective)
        dims.push_back(shownDims({&step->before, &step->after}));
    else
        for (const auto* o : shown) dims.push_back(shownDims({o}));
    const size_t devices = collective ? now.devices.size() : (shown.empty() ? 0 : shown.front()->devices.size());
    for (size_t d = 0; d < devices; ++d) {
        const auto& coords = (collective ? now : *shown.front()).devices[d].coords;
        const QRectF cell = cellRect(cellOf(coords));
        p.setPen(QPen(palette().color(QPalette::Mid), 1));
        p.setBrush(palette().color(QPalette::Window));
        p.drawRoundedRect(cell, 4, 4);
        p.setPen(palette().color(QPalette::Text));
        QFont small = font();
        small.setPointSizeF(std::max(6.0, small.pointSizeF() - 1.5));
        p.setFont(small);
        p.drawText(cell.adjusted(4, 1, -2, 0), Qt::AlignLeft | Qt::AlignTop, tr("GPU %1").arg(d));
        p.setFont(font());
        const QRectF inside = cell.adjusted(6, 16, -6, -6);
        if (collective) {
            const double fade = progress < 0.5 ? 1 - progress : progress; // a brief dip at the switch
            paintTensor(p, inside, now, d, dims[0], std::clamp(fade, 0.4, 1.0));
        } else {
            // Each operand under its name (the last part of the tensor's name: "weight", "gelu").
            const double w = inside.width() / static_cast<double>(shown.size());
            QFont tiny = font();
            tiny.setPointSizeF(std::max(6.0, tiny.pointSizeF() - 2));
            const QFontMetrics metrics(tiny);
            for (size_t k = 0; k < shown.size(); ++k) {
                const QRectF box(inside.left() + k * w + 2, inside.top(), w - 4, inside.height());
                p.setFont(tiny);
                p.setPen(palette().color(QPalette::Text));
                p.drawText(box.adjusted(0, 0, 0, -(box.height() - metrics.height())), Qt::AlignLeft | Qt::AlignTop,
                           metrics.elidedText(shortOpName(shown[k]->tensor), Qt::ElideRight, static_cast<int>(box.width())));
                p.setFont(font());
                paintTensor(p, box.adjusted(0, metrics.height() + 1, 0, 0), *shown[k], d, dims[k], 1.0);
            }
        }
    }
    paintArrows(p);
    paintLegend(p);
}

DevicesView::DevicesView(QWidget* parent) :
    QWidget(parent),
    canvas_(new DevicesCanvas(this)),
    title_(new QLabel(this)),
    why_(new QLabel(this)),
    counter_(new QLabel(this)),
    play_(new QToolButton(this)),
    speed_(new QComboBox(this)),
    timer_(new QTimer(this)),
    job_([this](quint64, Computed c) { showSteps(c); }, this)
{
    setFocusPolicy(Qt::StrongFocus);
    title_->setTextFormat(Qt::RichText);
    why_->setWordWrap(true);
    why_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    auto button = [this](const QString& text, const QString& tip, auto slot) {
        auto* b = new QToolButton(this);
        b->setText(text);
        b->setToolTip(tip);
        connect(b, &QToolButton::clicked, this, slot);
        return b;
    };
    auto* first = button(QStringLiteral("|◀"), tr("First step (Home)"), [this] { setCurrentStep(0); });
    auto* back = button(QStringLiteral("◀"), tr("Previous step (←)"), [this] { setCurrentStep(current_ - 1); });
    auto* forward = button(QStringLiteral("▶|"), tr("Next step (→)"), [this] { setCurrentStep(current_ + 1); });
    play_->setToolTip(tr("Play or pause (Space)"));
    connect(play_, &QToolButton::clicked, this, [this] { setPlaying(!isPlaying()); });
    for (const auto& [name, factor] : {std::pair{"0.5×", 0.5}, std::pair{"1×", 1.0}, std::pair{"2×", 2.0}, std::pair{"4×", 4.0}})
        speed_->addItem(QString::fromUtf8(name), factor);
    speed_->setCurrentIndex(1);
    speed_->setToolTip(tr("Speed (+/−)"));
    auto* controls = new QHBoxLayout;
    controls->addWidget(first);
    controls->addWidget(back);
    controls->addWidget(play_);
    controls->addWidget(forward);
    controls->addWidget(speed_);
    controls->addWidget(counter_);
    controls->addWidget(title_, 1);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->addLayout(controls);
    layout->addWidget(why_);
    layout->addWidget(canvas_, 1);
    // A failure is shown where the steps would be (and ends a wait for them, as a result does).
    connect(&job_, &JobTracker::failed, this, [this](quint64, const QString& message) {
        showSteps({});
        title_->setText(tr("Cannot show this op's devices: %1").arg(message.toHtmlEscaped()));
    });
    timer_->setInterval(30);
    connect(timer_, &QTimer::timeout, this, &DevicesView::tick);
    updateControls();
}

DevicesView::~DevicesView() { job_.shutdown(); }

QWidget* DevicesView::canvas() const { return canvas_; }

void DevicesView::setDocument(Document* document)
{
    if (document_) disconnect(document_, nullptr, this, nullptr);
    document_ = document;
    if (document_) {
        connect(document_, &Document::planChanged, this, &DevicesView::request);
        connect(document_, &Document::selectionChanged, this, &DevicesView::request);
    }
    request();
}

void DevicesView::request()
{
    // Every selection would otherwise run explainOp and the step builder for a closed dock;
    // as TimelineView does, a hidden view catches up when shown.
    if (!isVisible()) {
        job_.cancel();
        stale_ = true;
        return;
    }
    stale_ = false;
    const auto plan = document_ ? document_->plan() : nullptr;
    const OpId op = document_ ? document_->selectedOp() : -1;
    if (!plan || op < 0 || static_cast<size_t>(op) >= plan->workspace->costModel->graph().ops.size()) {
        job_.cancel();
        showSteps({});
        return;
    }
    job_.start([plan, op](const std::atomic<bool>&) {
        return Computed{explain::deviceSteps(*plan->workspace->costModel, plan->result, op, &plan->workspace->folded), plan};
    });
}

void DevicesView::showEvent(QShowEvent* event)
{
    QWidget::showEvent(event);
    if (stale_) request();
}

void DevicesView::showSteps(const Computed& c)
{
    plan_ = c.plan;
    steps_ = c.steps;
    canvas_->mesh = plan_ ? &plan_->workspace->costModel->mesh() : nullptr;
    // Start at the compute: what the op itself holds; the collectives are a step away.
    current_ = 0;
    for (size_t i = 0; i < steps_.size(); ++i)
        if (steps_[i].kind == DeviceStep::Kind::Compute) current_ = static_cast<int>(i);
    canvas_->progress = 1;
    setPlaying(false);
    updateControls();
    emit stepsShown();
}

void DevicesView::setCurrentStep(int step)
{
    if (steps_.empty()) return;
    current_ = std::clamp(step, 0, static_cast<int>(steps_.size()) - 1);
    canvas_->progress = steps_[static_cast<size_t>(current_)].kind == DeviceStep::Kind::Collective && isPlaying() ? 0 : 1;
    updateControls();
}

bool DevicesView::isPlaying() const { return timer_->isActive(); }

void DevicesView::setPlaying(bool on)
{
    if (on && !steps_.empty()) {
        if (current_ >= static_cast<int>(steps_.size()) - 1 && canvas_->progress >= 1) current_ = 0; // from the start again
        canvas_->progress = 0;
        timer_->start();
    } else {
        timer_->stop();
    }
    updateControls();
}

double DevicesView::progress() const { return canvas_->progress; }

void DevicesView::tick()
{
    const double speed = speed_->currentData().toDouble();
    canvas_->progress += timer_->interval() / 1000.0 * speed / kSecondsPerStep;
    if (canvas_->progress >= 1) {
        if (current_ + 1 < static_cast<int>(steps_.size())) {
            ++current_;
            canvas_->progress = 0;
        } else {
            canvas_->progress = 1;
            timer_->stop();
        }
        updateControls();
    }
    canvas_->update();
}

void DevicesView::updateControls()
{
    play_->setText(isPlaying() ? QStringLiteral("||") : QStringLiteral("▶"));
    if (steps_.empty()) {
        canvas_->step = nullptr;
        counter_->clear();
        title_->setText(document_ && document_->selectedOp() >= 0 ? tr("Working…") : tr("Select an op in the graph or the outline."));
        why_->clear();
        canvas_->update();
        return;
    }
    const DeviceStep& s = steps_[static_cast<size_t>(current_)];
    canvas_->step = &s;
    counter_->setText(tr("step %1 of %2").arg(current_ + 1).arg(steps_.size()));
    QString title = QStringLiteral("<b>%1</b>").arg(QString::fromStdString(s.title).toHtmlEscaped());
    if (s.kind == DeviceStep::Kind::Collective)
        title += tr(" · %1 per device, %2")
                     .arg(QString::fromStdString(formatBytes(s.bytes)), QString::fromStdString(formatSeconds(s.seconds)));
    title_->setText(title);
    if (s.kind == DeviceStep::Kind::Collective)
        why_->setText(QStringLiteral("%1 → %2: %3")
                          .arg(QString::fromStdString(s.before.spec), QString::fromStdString(s.after.spec), QString::fromStdString(s.why)));
    else
        why_->setText(QString::fromStdString(s.why));
    canvas_->update();
}

void DevicesView::keyPressEvent(QKeyEvent* event)
{
    switch (event->key()) {
    case Qt::Key_Space:
        setPlaying(!isPlaying());
        break;
    case Qt::Key_Left:
        setCurrentStep(current_ - 1);
        break;
    case Qt::Key_Right:
        setCurrentStep(current_ + 1);
        break;
    case Qt::Key_Home:
        setCurrentStep(0);
        break;
    case Qt::Key_End:
        setCurrentStep(static_cast<int>(steps_.size()) - 1);
        break;
    case Qt::Key_Plus:
    case Qt::Key_Equal:
        speed_->setCurrentIndex(std::min(speed_->count() - 1, speed_->currentIndex() + 1));
        break;
    case Qt::Key_Minus:
        speed_->setCurrentIndex(std::max(0, speed_->currentIndex() - 1));
        break;
    default:
        QWidget::keyPressEvent(event);
    }
}

} // namespace tp
