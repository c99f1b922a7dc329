#include "breakdownview.h"

#include <QBarCategoryAxis>
#include <QCheckBox>
#include <QGraphicsPathItem>
#include <QGraphicsSimpleTextItem>
#include <QLogValueAxis>
#include <QToolTip>
#include <QVBoxLayout>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QGraphicsLayout>
#include <QHBoxLayout>
#include <QHorizontalBarSeries>
#include <QLegendMarker>
#include <QLineSeries>
#include <QStackedBarSeries>
#include <QValueAxis>

#include <algorithm>
#include <cmath>
#include <limits>

#include "presentation.h"

namespace tp {

namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

QChartView* makeView(QWidget* parent)
{
    auto* view = new QChartView(parent);
    view->setRenderHint(QPainter::Antialiasing);
    view->setMinimumHeight(220);
    return view;
}

QChart* makeChart(const QString& title)
{
    auto* chart = new QChart;
    chart->setTitle(title);
    QFont titleFont = chart->titleFont();
    titleFont.setBold(true);
    titleFont.setPointSizeF(10);
    chart->setTitleFont(titleFont);
    chart->setAnimationOptions(QChart::NoAnimation);
    chart->legend()->setAlignment(Qt::AlignBottom);
    QFont legendFont;
    legendFont.setPointSizeF(8);
    chart->legend()->setFont(legendFont);
    chart->setMargins(QMargins(4, 4, 4, 4));
    chart->layout()->setContentsMargins(0, 0, 0, 0);
    chart->setBackgroundRoundness(0);
    return chart;
}

QBarSet* makeSet(const QString& name, QColor color)
{
    auto* set = new QBarSet(name);
    set->setColor(color);
    set->setBorderColor(color.darker(130));
    return set;
}

double niceCeiling(double v)
{
    if (v <= 0) return 1;
    const double p = std::pow(10.0, std::floor(std::log10(v)));
    for (double m : {1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0})
        if (m * p >= v) return m * p;
    return 10 * p;
}

/// Category labels padded to the same number of lines: Qt Charts sizes the axis for one
/// label's lines and elides the rest of a taller one ("331 GiB..." under the last bar).
QStringList sameHeight(QStringList labels)
{
    int most = 0;
    for (const auto& l : labels) most = std::max<int>(most, static_cast<int>(l.count(QStringLiteral("<br>"))));
    for (auto& l : labels)
        while (l.count(QStringLiteral("<br>")) < most) l += QStringLiteral("<br>&nbsp;");
    return labels;
}

/// A bar's figure in three significant digits (more where the integer part needs them): the
/// full figure is in the tooltip, and long ones were elided under the last bar.
QString shortFigure(double value, bool bytes)
{
    std::string text;
    for (int digits = 3; digits <= 8; ++digits) {
        text = bytes ? formatBytes(value, digits) : formatSeconds(value, digits);
        if (text.find("e+") == std::string::npos) break;
    }
    return QString::fromStdString(text);
}

/// A category label of at most three lines (Qt Charts elides the rest, and at 1280x800 it
/// elided "Data parallel" on one line under the last bar): the plan's name, wrapped at its
/// spaces when long, its figure, and the settings line when there is room (the tooltip has
/// them all).
QString categoryLabel(const QString& name, const QString& figure, const QString& settings)
{
    QString wrapped = name;
    if (wrapped.size() > 9) wrapped.replace(QLatin1Char(' '), QStringLiteral("<br>"));
    QString label = wrapped + QStringLiteral("<br>") + figure;
    if (label.count(QStringLiteral("<br>")) + settings.count(QStringLiteral("<br>")) <= 2) label += settings;
    return label;
}

/// Where a value axis stops: past every bar, unless one bar dwarfs the reference (the memory
/// limit, or the plan shown): then at 2.5x the reference, and the bars past it are cut.
double axisTop(const std::vector<double>& totals, double reference)
{
    double top = reference;
    for (double t : totals) top = std::max(top, t);
    if (reference > 0 && top > 2.5 * reference) top = 2.5 * reference;
    return niceCeiling(top * 1.05);
}

/// The value axis of a chart: linear from 0 to `top`, or logarithmic over every bar.
QAbstractAxis* valueAxis(bool log, double top, const std::vector<double>& totals, const QString& format)
{
    if (!log) {
        auto* values = new QValueAxis;
        values->setRange(0, top);
        values->applyNiceNumbers();
        values->setLabelFormat(format);
        return values;
    }
    double low = std::numeric_limits<double>::infinity(), high = 0;
    for (double t : totals)
        if (t > 0) {
            low = std::min(low, t);
            high = std::max(high, t);
        }
    auto* values = new QLogValueAxis;
    values->setBase(10);
    values->setLabelFormat(QStringLiteral("%g"));
    values->setMinorTickCount(-1);
    if (high > 0) values->setRange(std::pow(10.0, std::floor(std::log10(low / 10))), std::pow(10.0, std::ceil(std::log10(high * 1.05))));
    return values;
}

/// A bar cut by the axis: a white zig-zag across its top and its value above it, kept on the
/// bar as the chart resizes.
void addBreakMarks(QChart* chart, QAbstractBarSeries* series, const std::vector<double>& totals, double top,
                   const QStringList& values, QStringList& shown)
{
    const int n = static_cast<int>(totals.size());
    std::vector<std::pair<QGraphicsPathItem*, QGraphicsSimpleTextItem*>> marks;
    for (int i = 0; i < n; ++i) {
        if (totals[static_cast<size_t>(i)] <= top) continue;
        auto* zigzag = new QGraphicsPathItem(chart);
        zigzag->setPen(QPen(Qt::white, 3));
        zigzag->setZValue(20);
        auto* label = new QGraphicsSimpleTextItem(QStringLiteral("▲ ") + values.value(i), chart);
        QFont bold = label->font();
        bold.setBold(true);
        bold.setPointSizeF(8);
        label->setFont(bold);
        label->setBrush(limitColor());
        label->setZValue(21);
        label->setData(0, i);
        zigzag->setData(0, i);
        marks.emplace_back(zigzag, label);
        shown << values.value(i);
    }
    if (marks.empty()) return;
    auto place = [chart, series, marks, n, top] {
        const QRectF area = chart->plotArea();
        for (const auto& [zigzag, label] : marks) {
            const int i = zigzag->data(0).toInt();
            const QPointF at = chart->mapToPosition(QPointF(i, top), series);
            const double half = area.width() / n * series->barWidth() / 2;
            QPainterPath path;
            const double y = area.top() + 8;
            path.moveTo(at.x() - half, y + 3);
            for (int k = 1; k <= 6; ++k) path.lineTo(at.x() - half + k * half / 3, y + (k % 2 ? -3 : 3));
            zigzag->setPath(path);
            const QRectF box = label->boundingRect();
            label->setPos(at.x() - box.width() / 2, area.top() + 14);
        }
    };
    QObject::connect(chart, &QChart::plotAreaChanged, chart, place);
    place();
}

} // namespace

BreakdownView::BreakdownView(QWidget* parent) : QWidget(parent)
{
    auto* outer = new QVBoxLayout(this);
    outer->setContentsMargins(2, 0, 2, 2);
    outer->setSpacing(0);
    logScale_ = new QCheckBox(tr("Log scale"), this);
    logScale_->setObjectName(QStringLiteral("breakdownLogScale"));
    logScale_->setToolTip(tr("Memory and step time on a logarithmic axis, every bar whole"));
    connect(logScale_, &QCheckBox::toggled, this, [this](bool on) {
        refresh();
        emit logScaleChanged(on);
    });
    auto* options = new QHBoxLayout;
    options->addStretch(1);
    options->addWidget(logScale_);
    outer->addLayout(options);
    auto* layout = new QHBoxLayout;
    memory_ = makeView(this);
    time_ = makeView(this);
    blocks_ = makeView(this);
    layout->addWidget(memory_, 1);
    layout->addWidget(time_, 1);
    layout->addWidget(blocks_, 1);
    outer->addLayout(layout, 1);
    refresh();
}

void BreakdownView::setLogScale(bool on) { logScale_->setChecked(on); }

bool BreakdownView::logScale() const { return logScale_->isChecked(); }

void BreakdownView::setDocument(Document* document)
{
    if (document_) disconnect(document_, nullptr, this, nullptr);
    document_ = document;
    if (document_) connect(document_, &Document::planChanged, this, &BreakdownView::refresh);
    refresh();
}

void BreakdownView::refresh()
{
    const auto plan = document_ ? document_->plan() : nullptr;
    plans_.clear();
    settings_.clear();
    std::vector<const SearchResult*> results;
    if (plan) {
        const int locks = static_cast<int>(plan->locks.size());
        plans_ << (locks ? tr("Yours (%1)").arg(countOf(locks, "lock", "locks")) : tr("Searched"));
        results.push_back(&plan->result);
        if (plan->unlocked) {
            plans_ << tr("Searched");
            results.push_back(&*plan->unlocked);
        }
        plans_ << tr("Megatron") << tr("Data parallel");
        results.push_back(&plan->megatron);
        results.push_back(&plan->dataParallel);
        // Each plan under its own micro-batch and ZeRO stage (the planner chooses them per plan),
        // a line each so that narrow bars do not elide them.
        // Each plan's ZeRO stage on its bar (short enough for the narrowest); the whole of its
        // settings (settingsText: HSDP, kept gathered, micro-batch) when the bar is hovered.
        auto settingsOf = [](const PlanWorkspace* ws) {
            return ws ? tr("<br>ZeRO %1").arg(ws->costModel->settings().zeroStage) : QString();
        };
        settingsText_.clear();
        auto fullSettingsOf = [](const PlanWorkspace* ws) {
            return ws ? QString::fromStdString(settingsText(candidateOf(ws->costModel->settings()))) : QString();
        };
        const PlanWorkspace* own[] = {plan->workspace.get(), plan->unlocked ? plan->workspace.get() : nullptr,
                                      plan->megatronWorkspace.get(), plan->dataParallelWorkspace.get()};
        for (int i = 0; i < 4; ++i)
            if (i != 1 || plan->unlocked) {
                settings_ << settingsOf(own[i]);
                settingsText_ << fullSettingsOf(own[i]);
            }
    }
    showMemory(results);
    showStepTime(results);
    showBlockTimes(plan.get());
}

/// Memory per device, stacked by kind, against the capacity (or limit) line, labelled on it.
void BreakdownView::showMemory(const std::vector<const SearchResult*>& results)
{
    QChart* chart = makeChart(tr("Memory per device (GiB)"));
    auto* series = new QStackedBarSeries;
    QBarSet* sets[] = {makeSet(tr("Parameters"), QColor(0x4e, 0x79, 0xa7)), makeSet(tr("Gradients"), QColor(0x76, 0xb7, 0xb2)),
                       makeSet(tr("Optimizer"), QColor(0xf2, 0x8e, 0x2b)), makeSet(tr("Activations"), QColor(0xe1, 0x57, 0x59))};
    double capacity = 0;
    std::vector<double> totals;
    QStringList figures, shortFigures;
    for (const SearchResult* r : results) {
        const Breakdown& b = r->breakdown;
        *sets[0] << b.paramBytes / kGiB;
        *sets[1] << b.gradBytes / kGiB;
        *sets[2] << b.optimizerBytes / kGiB;
        *sets[3] << b.activationBytes / kGiB;
        totals.push_back(b.perDeviceBytes / kGiB);
        figures << QString::fromStdString(formatBytes(b.perDeviceBytes));
        shortFigures << shortFigure(b.perDeviceBytes, true);
        capacity = r->memoryLimitBytes > 0 ? r->memoryLimitBytes : b.capacityBytes;
    }
    for (auto* set : sets) series->append(set);
    chart->addSeries(series);
    QStringList labels;
    for (size_t i = 0; i < results.size(); ++i)
        labels << categoryLabel(plans_[static_cast<int>(i)], shortFigures[static_cast<int>(i)], settings_.value(static_cast<int>(i)));
    auto* categories = new QBarCategoryAxis;
    categories->append(sameHeight(labels));
    chart->addAxis(categories, Qt::AlignBottom);
    series->attachAxis(categories);
    // Plans far over the limit (data parallel on a big model) would flatten the others: the
    // axis stops at 2.5x the limit and those bars are drawn cut, with their totals (or, on a
    // log scale, every bar whole).
    const bool log = logScale();
    const double top = axisTop(totals, capacity / kGiB);
    QAbstractAxis* values = valueAxis(log, top, totals, QStringLiteral("%.0f"));
    chart->addAxis(values, Qt::AlignLeft);
    series->attachAxis(values);
    memoryCut_.clear();
    if (!log) addBreakMarks(chart, series, totals, top, figures, memoryCut_);
    if (capacity > 0 && !results.empty()) {
        // The capacity line spans the categories on a hidden x axis of the same extent; its
        // name is on the line, not in the legend (where it was cut at 1280x800).
        auto* line = new QLineSeries;
        line->setName(tr("Limit %1").arg(QString::fromStdString(formatBytes(capacity))));
        line->append(-0.5, capacity / kGiB);
        line->append(double(results.size()) - 0.5, capacity / kGiB);
        QPen pen(limitColor(), 2, Qt::DashLine);
        line->setPen(pen);
        chart->addSeries(line);
        auto* hidden = new QValueAxis;
        hidden->setRange(-0.5, double(results.size()) - 0.5);
        hidden->setVisible(false);
        chart->addAxis(hidden, Qt::AlignTop);
        line->attachAxis(hidden);
        line->attachAxis(values);
        for (QLegendMarker* marker : chart->legend()->markers(line)) marker->setVisible(false);
        auto* name = new QGraphicsSimpleTextItem(line->name(), chart);
        QFont small = name->font();
        small.setPointSizeF(8);
        name->setFont(small);
        name->setBrush(limitColor());
        name->setZValue(22);
        capacityLabel_ = line->name();
        auto place = [chart, line, name, capacity] {
            const QPointF at = chart->mapToPosition(QPointF(chart->plotArea().width(), capacity / kGiB), line);
            const QRectF area = chart->plotArea();
            const double y = std::clamp(at.y(), area.top() + 2, area.bottom() - 2);
            name->setPos(area.right() - name->boundingRect().width() - 2, y - name->boundingRect().height() - 1);
        };
        QObject::connect(chart, &QChart::plotAreaChanged, chart, place);
        place();
    }
    connectTooltips(series, figures);
    QChart* old = memory_->chart();
    memory_->setChart(chart);
    delete old;
}

/// Step time by compute and collective kind.
void BreakdownView::showStepTime(const std::vector<const SearchResult*>& results)
{
    QChart* chart = makeChart(tr("Step time (s): compute and communication"));
    auto* series = new QStackedBarSeries;
    auto* compute = makeSet(tr("Compute"), stepPartColor(StepPart::Forward));
    series->append(compute);
    std::map<CollectiveKind, QBarSet*> byKind;
    for (CollectiveKind kind :
         {CollectiveKind::AllReduce, CollectiveKind::AllGather, CollectiveKind::ReduceScatter, CollectiveKind::AllToAll}) {
        byKind[kind] = makeSet(collectiveAbbrev(kind), collectiveColor(kind));
        series->append(byKind[kind]);
    }
    std::vector<double> totals;
    QStringList figures, shortFigures;
    for (const SearchResult* r : results) {
        const Breakdown& b = r->breakdown;
        *compute << b.computeSeconds;
        // Collective times scaled so the bars add up to the exposed step time.
        double comm = 0;
        for (const auto& [kind, s] : b.commByKind) comm += s;
        const double scale = comm > 0 ? (b.stepSeconds - b.computeSeconds) / comm : 0;
        for (auto& [kind, set] : byKind) {
            const auto it = b.commByKind.find(kind);
            *set << (it == b.commByKind.end() ? 0.0 : it->second * scale);
        }
        totals.push_back(b.stepSeconds);
        figures << QString::fromStdString(formatSeconds(b.stepSeconds));
        shortFigures << shortFigure(b.stepSeconds, false);
    }
    chart->addSeries(series);
    QStringList labels;
    for (size_t i = 0; i < results.size(); ++i)
        labels << categoryLabel(plans_[static_cast<int>(i)], shortFigures[static_cast<int>(i)], settings_.value(static_cast<int>(i)));
    auto* categories = new QBarCategoryAxis;
    categories->append(sameHeight(labels));
    chart->addAxis(categories, Qt::AlignBottom);
    series->attachAxis(categories);
    // A baseline many times slower than the plan shown is cut at 2.5x the plan's step.
    const bool log = logScale();
    const double top = axisTop(totals, totals.empty() ? 0.0 : totals.front());
    QAbstractAxis* values = valueAxis(log, top, totals, top >= 10 ? QStringLiteral("%.0f") : QStringLiteral("%.2f"));
    chart->addAxis(values, Qt::AlignLeft);
    series->attachAxis(values);
    timeCut_.clear();
    if (!log) addBreakMarks(chart, series, totals, top, figures, timeCut_);
    connectTooltips(series, figures);
    QChart* old = time_->chart();
    time_->setChart(chart);
    delete old;
}

/// Hovering a bar names its plan, its figure, the part hovered and the plan's settings.
void BreakdownView::connectTooltips(QAbstractBarSeries* series, const QStringList& figures)
{
    connect(series, &QAbstractBarSeries::hovered, this, [this, figures](bool on, int index, QBarSet* set) {
        if (!on) {
            QToolTip::hideText();
            return;
        }
        QToolTip::showText(QCursor::pos(), tr("<b>%1</b>: %2<br>%3 %4<br>%5")
                                               .arg(plans_.value(index), figures.value(index), set->label(),
                                                    QString::number(set->at(index), 'g', 4), settingsText_.value(index)));
    });
}

/// The plan's time per block class (all instances), the eight largest.
void BreakdownView::showBlockTimes(const PlanOutcome* plan)
{
    QChart* chart = makeChart(tr("Plan time per block class (s)"));
    auto* series = new QHorizontalBarSeries;
    auto* set = makeSet(tr("Time over all instances"), QColor(0x5b, 0x9b, 0xe6));
    QStringList labels;
    double top = 0;
    if (plan) {
        const FoldedGraph& f = plan->workspace->folded;
        std::vector<double> seconds(f.classes.size(), 0);
        for (const auto& ob : plan->result.breakdown.ops)
            seconds[static_cast<size_t>(f.classOfOp[static_cast<size_t>(ob.op)])] += ob.stepSeconds; // adds up to the step
        // Largest last, so it is drawn at the top.
        std::vector<size_t> order(f.classes.size());
        for (size_t i = 0; i < order.size(); ++i) order[i] = i;
        std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return seconds[a] < seconds[b]; });
        if (order.size() > 8) order.erase(order.begin(), order.end() - 8);
        for (size_t c : order) {
            const auto& bc = f.classes[c];
            labels << (bc.instances.size() > 1
                           ? QStringLiteral("%1 ×%2").arg(QString::fromStdString(bc.label)).arg(bc.instances.size())
                           : QString::fromStdString(bc.label));
            *set << seconds[c];
            top = std::max(top, seconds[c]);
        }
    }
    series->append(set);
    chart->addSeries(series);
    chart->legend()->hide();
    auto* categories = new QBarCategoryAxis;
    categories->append(sameHeight(labels));
    chart->addAxis(categories, Qt::AlignLeft);
    series->attachAxis(categories);
    auto* values = new QValueAxis;
    values->setRange(0, niceCeiling(top * 1.05));
    values->applyNiceNumbers();
    values->setLabelFormat(top >= 10 ? QStringLiteral("%.0f") : QStringLiteral("%.2f"));
    chart->addAxis(values, Qt::AlignBottom);
    series->attachAxis(values);
    QChart* old = blocks_->chart();
    blocks_->setChart(chart);
    delete old;
}

} // namespace tp
