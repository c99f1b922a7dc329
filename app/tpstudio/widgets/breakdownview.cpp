#include "breakdownview.h"

#include <QBarCategoryAxis>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QGraphicsLayout>
#include <QHBoxLayout>
#include <QHorizontalBarSeries>
#include <QLineSeries>
#include <QStackedBarSeries>
#include <QValueAxis>

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

} // namespace

BreakdownView::BreakdownView(QWidget* parent) : QWidget(parent)
{
    auto* layout = new QHBoxLayout(this);
    layout->setContentsMargins(2, 2, 2, 2);
    memory_ = makeView(this);
    time_ = makeView(this);
    blocks_ = makeView(this);
    layout->addWidget(memory_, 1);
    layout->addWidget(time_, 1);
    layout->addWidget(blocks_, 1);
    refresh();
}

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
        auto settingsOf = [](const PlanWorkspace* ws) {
            if (!ws) return QString();
            const CostSettings& c = ws->costModel->settings();
            // "mbs": Megatron's --micro-batch-size, short enough for the narrowest bar.
            // "kept": FSDP without reshard after forward (settingsText says "kept gathered").
            QString layout = c.zeroStage > 0 && !c.zeroAcrossNodes ? tr(" HSDP") : QString();
            if (c.zeroStage >= 3 && !c.reshardAfterForward) layout += tr(" kept");
            return tr("<br>ZeRO %1%2<br>mbs %3")
                .arg(c.zeroStage)
                .arg(layout)
                .arg(c.microBatch > 0 ? QString::number(c.microBatch) : tr("all"));
        };
        const PlanWorkspace* own[] = {plan->workspace.get(), plan->unlocked ? plan->workspace.get() : nullptr,
                                      plan->megatronWorkspace.get(), plan->dataParallelWorkspace.get()};
        for (int i = 0; i < 4; ++i)
            if (i != 1 || plan->unlocked) settings_ << settingsOf(own[i]);
    }
    showMemory(results);
    showStepTime(results);
    showBlockTimes(plan.get());
}

/// Memory per device, stacked by kind, against the capacity (or limit) line.
void BreakdownView::showMemory(const std::vector<const SearchResult*>& results)
{
    QChart* chart = makeChart(tr("Memory per device (GiB)"));
    auto* series = new QStackedBarSeries;
    QBarSet* sets[] = {makeSet(tr("Parameters"), QColor(0x4e, 0x79, 0xa7)), makeSet(tr("Gradients"), QColor(0x76, 0xb7, 0xb2)),
                       makeSet(tr("Optimizer"), QColor(0xf2, 0x8e, 0x2b)), makeSet(tr("Activations"), QColor(0xe1, 0x57, 0x59))};
    double top = 0, capacity = 0;
    for (const SearchResult* r : results) {
        const Breakdown& b = r->breakdown;
        *sets[0] << b.paramBytes / kGiB;
        *sets[1] << b.gradBytes / kGiB;
        *sets[2] << b.optimizerBytes / kGiB;
        *sets[3] << b.activationBytes / kGiB;
        top = std::max(top, b.perDeviceBytes / kGiB);
        capacity = r->memoryLimitBytes > 0 ? r->memoryLimitBytes : b.capacityBytes;
    }
    for (auto* set : sets) series->append(set);
    chart->addSeries(series);
    // Plans far over the limit (data parallel on a big model) would flatten the others:
    // the axis stops at 2.5x the limit and the labels carry the totals.
    QStringList labels;
    for (size_t i = 0; i < results.size(); ++i)
        labels << QStringLiteral("%1<br>%2")
                      .arg(plans_[static_cast<int>(i)],
                           QString::fromStdString(formatBytes(results[i]->breakdown.perDeviceBytes)) +
                               settings_.value(static_cast<int>(i)));
    if (capacity > 0) top = std::min(top, 2.5 * capacity / kGiB);
    auto* categories = new QBarCategoryAxis;
    categories->append(labels);
    chart->addAxis(categories, Qt::AlignBottom);
    series->attachAxis(categories);
    auto* values = new QValueAxis;
    values->setRange(0, niceCeiling(std::max(top, capacity / kGiB) * 1.05));
    values->applyNiceNumbers();
    values->setLabelFormat(QStringLiteral("%.0f"));
    chart->addAxis(values, Qt::AlignLeft);
    series->attachAxis(values);
    if (capacity > 0 && !results.empty()) {
        // The capacity line spans the categories on a hidden x axis of the same extent.
        auto* line = new QLineSeries;
        line->setName(tr("Limit %1").arg(QString::fromStdString(formatBytes(capacity))));
        line->append(-0.5, capacity / kGiB);
        line->append(double(results.size()) - 0.5, capacity / kGiB);
        QPen pen(QColor(0xc0, 0x20, 0x20), 2, Qt::DashLine);
        line->setPen(pen);
        chart->addSeries(line);
        auto* hidden = new QValueAxis;
        hidden->setRange(-0.5, double(results.size()) - 0.5);
        hidden->setVisible(false);
        chart->addAxis(hidden, Qt::AlignTop);
        line->attachAxis(hidden);
        line->attachAxis(values);
    }
    QChart* old = memory_->chart();
    memory_->setChart(chart);
    delete old;
}

/// Step time by compute and collective kind.
void BreakdownView::showStepTime(const std::vector<const SearchResult*>& results)
{
    QChart* chart = makeChart(tr("Step time (s): compute and communication"));
    auto* series = new QStackedBarSeries;
    auto* compute = makeSet(tr("Compute"), QColor(0x59, 0xa1, 0x4f));
    series->append(compute);
    std::map<CollectiveKind, QBarSet*> byKind;
    for (CollectiveKind kind :
         {CollectiveKind::AllReduce, CollectiveKind::AllGather, CollectiveKind::ReduceScatter, CollectiveKind::AllToAll}) {
        byKind[kind] = makeSet(collectiveAbbrev(kind), collectiveColor(kind));
        series->append(byKind[kind]);
    }
    double top = 0;
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
        top = std::max(top, b.stepSeconds);
    }
    chart->addSeries(series);
    QStringList labels;
    for (size_t i = 0; i < results.size(); ++i)
        labels << QStringLiteral("%1<br>%2")
                      .arg(plans_[static_cast<int>(i)], QString::fromStdString(formatSeconds(results[i]->breakdown.stepSeconds)) +
                                                            settings_.value(static_cast<int>(i)));
    auto* categories = new QBarCategoryAxis;
    categories->append(labels);
    chart->addAxis(categories, Qt::AlignBottom);
    series->attachAxis(categories);
    auto* values = new QValueAxis;
    values->setRange(0, niceCeiling(top * 1.05));
    values->applyNiceNumbers();
    values->setLabelFormat(top >= 10 ? QStringLiteral("%.0f") : QStringLiteral("%.2f"));
    chart->addAxis(values, Qt::AlignLeft);
    series->attachAxis(values);
    QChart* old = time_->chart();
    time_->setChart(chart);
    delete old;
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
    categories->append(labels);
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
