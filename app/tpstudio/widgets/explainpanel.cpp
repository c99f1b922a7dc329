#include "explainpanel.h"

#include <algorithm>
#include <set>

#include <QCheckBox>
#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPainter>
#include <QScrollArea>
#include <QSplitter>
#include <QTabWidget>
#include <QTableWidget>
#include <QVBoxLayout>

#include "presentation.h"

namespace tp {

namespace {

QTableWidget* makeTable(QWidget* parent)
{
    auto* t = new QTableWidget(parent);
    t->setEditTriggers(QAbstractItemView::NoEditTriggers);
    t->setSelectionBehavior(QAbstractItemView::SelectRows);
    t->verticalHeader()->hide();
    t->verticalHeader()->setDefaultSectionSize(t->fontMetrics().height() + 6);
    t->horizontalHeader()->setStretchLastSection(true);
    t->setWordWrap(false);
    return t;
}

QTableWidgetItem* cell(const QString& text, const QString& tooltip = {})
{
    auto* item = new QTableWidgetItem(text);
    if (!tooltip.isEmpty()) item->setToolTip(tooltip);
    return item;
}

} // namespace

// ---------------------------------------------------------------------------------------------

MeshSliceWidget::MeshSliceWidget(QWidget* parent) : QWidget(parent)
{
    setMinimumHeight(150);
    setToolTip(tr("Each grid is the device mesh (rows: outer axes, columns: the innermost axis). In every device, the "
                  "rectangle is the whole operand over two of its dims; the filled part is the slice that device holds."));
}

void MeshSliceWidget::setExplanation(std::vector<explain::OperandLayout> operands, std::vector<int> meshShape)
{
    operands_ = std::move(operands);
    meshShape_ = std::move(meshShape);
    updateGeometry();
    update();
}

QSize MeshSliceWidget::sizeHint() const { return {std::max<int>(300, 190 * static_cast<int>(operands_.size())), 210}; }

void MeshSliceWidget::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing);
    p.fillRect(rect(), palette().base());
    if (operands_.empty() || meshShape_.empty()) {
        p.setPen(palette().color(QPalette::PlaceholderText));
        p.drawText(rect(), Qt::AlignCenter, tr("Select an op to see which slice each device holds."));
        return;
    }
    // Grid: the innermost axis across, every outer axis folded into rows (x-major), as mesh order.
    const int cols = meshShape_.back();
    int rows = 1;
    for (size_t a = 0; a + 1 < meshShape_.size(); ++a) rows *= meshShape_[a];
    const int n = static_cast<int>(operands_.size());
    const double panelW = double(width()) / n;
    const QFontMetricsF fm(font());
    const double titleH = 2 * fm.height() + 4;
    for (int k = 0; k < n; ++k) {
        const auto& od = operands_[static_cast<size_t>(k)];
        const QRectF panel(k * panelW + 6, 4, panelW - 12, height() - 8);
        p.setPen(palette().color(QPalette::Text));
        QFont bold = font();
        bold.setBold(true);
        p.setFont(bold);
        const QString name = QString::fromStdString(od.tensor);
        p.drawText(QRectF(panel.left(), panel.top(), panel.width(), fm.height()), Qt::AlignLeft | Qt::AlignVCenter,
                   QFontMetrics(bold).elidedText(QStringLiteral("%1 %2").arg(QString::fromStdString(od.role), name),
                                                 Qt::ElideLeft, static_cast<int>(panel.width())));
        p.setFont(font());
        p.drawText(QRectF(panel.left(), panel.top() + fm.height() + 2, panel.width(), fm.height()),
                   Qt::AlignLeft | Qt::AlignVCenter, QString::fromStdString(od.spec));
        // Two dims to draw: the split ones first (they are what differs between devices), then the last ones.
        const size_t rank = od.shape.size();
        std::vector<size_t> dims;
        for (size_t d = 0; d < rank && dims.size() < 2; ++d)
            for (const auto& dev : od.devices)
                if (d < dev.ranges.size() && (dev.ranges[d].first != 0 || dev.ranges[d].second != od.shape[d])) {
                    dims.push_back(d);
                    break;
                }
        for (size_t d = rank; d-- > 0 && dims.size() < 2;)
            if (std::find(dims.begin(), dims.end(), d) == dims.end()) dims.push_back(d);
        std::sort(dims.begin(), dims.end());
        const QRectF grid(panel.left(), panel.top() + titleH, panel.width(), panel.height() - titleH);
        const double cell = std::min(grid.width() / cols, grid.height() / rows);
        for (const auto& dev : od.devices) {
            int row = 0;
            for (size_t a = 0; a + 1 < dev.coords.size(); ++a) row = row * meshShape_[a] + dev.coords[a];
            const int col = dev.coords.empty() ? 0 : dev.coords.back();
            const QRectF box(grid.left() + col * cell + 1.5, grid.top() + row * cell + 1.5, cell - 3, cell - 3);
            p.setPen(QPen(QColor(0x99, 0x99, 0xa4), 0.8));
            p.setBrush(QColor(0xf2, 0xf2, 0xf6));
            p.drawRect(box);
            // The slice: vertical extent from the first drawn dim, horizontal from the second.
            auto fraction = [&](size_t slot, double& lo, double& hi) {
                lo = 0;
                hi = 1;
                if (slot >= dims.size() || dims[slot] >= dev.ranges.size() || od.shape[dims[slot]] <= 0) return;
                const double size = double(od.shape[dims[slot]]);
                lo = dev.ranges[dims[slot]].first / size;
                hi = dev.ranges[dims[slot]].second / size;
            };
            double y0, y1, x0, x1;
            if (dims.size() >= 2) {
                fraction(0, y0, y1);
                fraction(1, x0, x1);
            } else {
                y0 = 0;
                y1 = 1;
                fraction(0, x0, x1);
            }
            const QRectF inner = box.adjusted(2, 2, -2, -2);
            p.setPen(Qt::NoPen);
            p.setBrush(operandRoleColor(od.role));
            p.drawRect(QRectF(inner.left() + x0 * inner.width(), inner.top() + y0 * inner.height(), (x1 - x0) * inner.width(),
                              (y1 - y0) * inner.height()));
        }
    }
}

// ---------------------------------------------------------------------------------------------

ExplainPanel::ExplainPanel(QWidget* parent) :
    QWidget(parent),
    explainJob_([this](quint64, Explained e) {
        try {
            showExplanation(e.explanation, e.plan, e.op);
        } catch (const std::exception& x) {
            clearExplanation(tr("Cannot explain this op: %1").arg(QString::fromUtf8(x.what()).toHtmlEscaped()));
        }
    }),
    compareJob_([this](quint64, explain::PlanDiff d) { showComparison(d); })
{
    connect(&explainJob_, &JobTracker::dropped, this, &ExplainPanel::resultDropped);
    connect(&compareJob_, &JobTracker::dropped, this, &ExplainPanel::resultDropped);
    connect(&explainJob_, &JobTracker::failed, this, [this](quint64, const QString& message) {
        clearExplanation(tr("Cannot explain this op: %1").arg(message.toHtmlEscaped()));
    });
    connect(&compareJob_, &JobTracker::failed, this,
            [this](quint64, const QString& message) { compareTotals_->setText(tr("Cannot compare: %1").arg(message)); });
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    summary_ = new QLabel(tr("Select an op in the graph or the outline."), this);
    summary_->setWordWrap(true);
    summary_->setTextFormat(Qt::RichText);
    summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    summary_->setAlignment(Qt::AlignTop | Qt::AlignLeft);
    auto* summaryScroll = new QScrollArea(this);
    summaryScroll->setWidget(summary_);
    summaryScroll->setWidgetResizable(true);
    summaryScroll->setFrameShape(QFrame::NoFrame);

    picture_ = new MeshSliceWidget(this);

    collectives_ = makeTable(this);
    collectives_->setColumnCount(7);
    collectives_->setHorizontalHeaderLabels(
        {tr("Where"), tr("Collective"), tr("Axis"), tr("Phase"), tr("Bytes"), tr("Time"), tr("Why")});

    whyNot_ = makeTable(this);
    whyNot_->setToolTip(
        tr("Every candidate strategy against the chosen one (candidate minus chosen), the neighbours' strategies held "
           "fixed. Objective = step time + the search's memory price × memory: what the search minimises."));

    auto* compareBox = new QWidget(this);
    auto* compareLayout = new QVBoxLayout(compareBox);
    compareLayout->setContentsMargins(0, 0, 0, 0);
    auto* compareRow = new QHBoxLayout;
    compareRow->addWidget(new QLabel(tr("Compare this plan with:"), compareBox));
    compareWith_ = new QComboBox(compareBox);
    compareWith_->addItem(tr("Megatron-LM"), static_cast<int>(CompareWith::Megatron));
    compareWith_->addItem(tr("Data parallel"), static_cast<int>(CompareWith::DataParallel));
    compareWith_->addItem(tr("The search without locks"), static_cast<int>(CompareWith::Unlocked));
    compareRow->addWidget(compareWith_);
    compareRow->addStretch(1);
    compareLayout->addLayout(compareRow);
    compareTotals_ = new QLabel(compareBox);
    compareTotals_->setWordWrap(true);
    compareLayout->addWidget(compareTotals_);
    compare_ = makeTable(compareBox);
    compare_->setColumnCount(9);
    compare_->setHorizontalHeaderLabels({tr("Block"), tr("Instances"), tr("Ops changed"), tr("Step: this plan"),
                                         tr("Step: other"), tr("Δ step"), tr("Δ compute"), tr("Δ comm"), tr("Δ memory")});
    compare_->setToolTip(tr("Per block class, summed over its instances; Δ = other plan minus this plan."));
    // Per op: the representative ops (first instance of each class) whose strategy differs;
    // a row selects its op, and the graph marks them all.
    compareOps_ = makeTable(compareBox);
    compareOps_->setObjectName(QStringLiteral("compareOps"));
    compareOps_->setColumnCount(5);
    compareOps_->setHorizontalHeaderLabels({tr("Op that differs"), tr("This plan"), tr("Other"), tr("Δ step"), tr("Δ memory")});
    compareOps_->setToolTip(tr("The first instance of each block; Δ = the other plan minus this one at this op (its "
                               "compute, its own collectives and the edges into it)."));
    connect(compareOps_, &QTableWidget::cellClicked, this, [this](int row, int) {
        if (!document_ || !document_->workspace() || row < 0 || !comparison_ || row >= static_cast<int>(comparison_->changes.size())) return;
        try {
            document_->setSelectedOp(explain::findOp(document_->workspace()->model.graph, comparison_->changes[static_cast<size_t>(row)].op));
        } catch (const InputError&) {
        }
    });
    markOnGraph_ = new QCheckBox(tr("Mark them on the graph"), compareBox);
    markOnGraph_->setObjectName(QStringLiteral("markDifferences"));
    markOnGraph_->setChecked(true);
    connect(markOnGraph_, &QCheckBox::toggled, this, [this] { emit differencesToMark(markedOps()); });
    auto* tables = new QHBoxLayout;
    tables->addWidget(compare_, 3);
    auto* opsColumn = new QVBoxLayout;
    opsColumn->addWidget(compareOps_, 1);
    opsColumn->addWidget(markOnGraph_);
    tables->addLayout(opsColumn, 2);
    compareLayout->addLayout(tables, 1);
    connect(compareWith_, &QComboBox::currentIndexChanged, this, &ExplainPanel::requestComparison);

    auto* tabs = new QTabWidget(this);
    tabs->addTab(whyNot_, tr("Why not"));
    tabs->addTab(collectives_, tr("Collectives"));
    tabs->addTab(compareBox, tr("Compare plans"));
    tabs_ = tabs;
    compareBox_ = compareBox;
    // The graph marks the differences while the comparison is in view.
    connect(tabs, &QTabWidget::currentChanged, this, [this] {
        emit differencesToMark(markedOps());
        // Comparing two plans is not about the selected op: its slice picture folds away and
        // the tables take the room (at 1280x800 they showed two rows); back again elsewhere.
        if (!split_) return;
        const int total = std::max(split_->height(), 400);
        if (tabs_->currentWidget() == compareBox_)
            split_->setSizes({total / 8, 0, total - total / 8});
        else if (split_->sizes().value(1) == 0)
            split_->setSizes({total * 2 / 9, total * 3 / 9, total * 4 / 9});
    });

    auto* split = new QSplitter(Qt::Vertical, this);
    split->addWidget(summaryScroll);
    split->addWidget(picture_);
    split->addWidget(tabs);
    split->setStretchFactor(0, 2);
    split->setStretchFactor(1, 3);
    split->setStretchFactor(2, 3);
    split->setSizes({160, 260, 300}); // the words and the picture first: they teach; the tables detail
    split_ = split;
    layout->addWidget(split);
}

ExplainPanel::~ExplainPanel() = default;

void ExplainPanel::setDocument(Document* document)
{
    if (document_) disconnect(document_, nullptr, this, nullptr);
    document_ = document;
    if (document_) {
        connect(document_, &Document::planChanged, this, [this] {
            requestExplanation();
            requestComparison();
        });
        connect(document_, &Document::selectionChanged, this, &ExplainPanel::requestExplanation);
    }
    requestExplanation();
    requestComparison();
}

void ExplainPanel::setCompareWith(CompareWith with)
{
    compareWith_->setCurrentIndex(compareWith_->findData(static_cast<int>(with)));
}

void ExplainPanel::clearExplanation(const QString& message)
{
    shown_.reset();
    summary_->setText(message);
    picture_->setExplanation({}, {});
    collectives_->setRowCount(0);
    whyNot_->setRowCount(0);
}

void ExplainPanel::requestExplanation()
{
    const auto plan = document_ ? document_->plan() : nullptr;
    const OpId op = document_ ? document_->selectedOp() : -1;
    if (!plan || op < 0 || static_cast<size_t>(op) >= plan->workspace->model.graph.ops.size()) {
        explainJob_.cancel(); // a result still in flight is stale
        clearExplanation(tr("Select an op in the graph or the outline."));
        return;
    }
    shown_.reset();
    summary_->setText(tr("Explaining %1…").arg(QString::fromStdString(plan->workspace->model.graph.op(op).name).toHtmlEscaped()));
    // explainOp costs every candidate with its neighbours and lists every device's slices: for a
    // wide op on a large mesh that is more than a frame, so it runs on the pool. The plan outcome
    // is captured by shared_ptr so the workspace outlives the job.
    explainJob_.start([plan, op](const std::atomic<bool>&) {
        const PlanWorkspace& ws = *plan->workspace;
        return Explained{explain::explainOp(*ws.costModel, plan->result, op, &ws.folded), plan, op};
    });
}

void ExplainPanel::showExplanation(const explain::OpExplanation& x, std::shared_ptr<const PlanOutcome> plan, OpId op)
{
    shown_ = x;
    const Mesh& mesh = plan->workspace->costModel->mesh();

    // Words: the summary, the loops and how each operand lies on the mesh.
    QString html = QStringLiteral("<b style='font-size:large'>%1</b> &nbsp; %2 <code>%3</code>%4<br>")
                       .arg(QString::fromStdString(x.op).toHtmlEscaped(), QString::fromStdString(x.kind),
                            QString::fromStdString(x.einsum).toHtmlEscaped(),
                            x.block.empty() ? QString()
                                            : tr(" &nbsp; block <i>%1</i>").arg(QString::fromStdString(x.block).toHtmlEscaped()));
    html += tr("Chosen strategy: <b>%1</b><br>").arg(QString::fromStdString(x.strategy).toHtmlEscaped());
    html += QString::fromStdString(x.summary).toHtmlEscaped() + QStringLiteral("<ul style='margin-top:2px'>");
    for (const auto& od : x.operands)
        html += QStringLiteral("<li>%1 <b>%2</b> <code>%3</code>: %4</li>")
                    .arg(QString::fromStdString(od.role), QString::fromStdString(od.tensor).toHtmlEscaped(),
                         QString::fromStdString(od.spec).toHtmlEscaped(), QString::fromStdString(od.words).toHtmlEscaped());
    html += QStringLiteral("</ul>");
    summary_->setText(html);

    std::vector<int> shape;
    for (const auto& axis : mesh.axes) shape.push_back(axis.size);
    picture_->setExplanation(x.operands, shape);

    // Collectives into, of, and out of the op, with their reasons.
    collectives_->setRowCount(0);
    auto addSteps = [&](const std::vector<explain::CollectiveStep>& steps, const QString& where) {
        for (const auto& c : steps) {
            const int row = collectives_->rowCount();
            collectives_->insertRow(row);
            const QString detail =
                QString::fromStdString(c.why) + QStringLiteral("\n") + QString::fromStdString(c.formula) +
                (c.fromSpec.empty()
                     ? QString()
                     : QStringLiteral("\n%1 → %2").arg(QString::fromStdString(c.fromSpec), QString::fromStdString(c.toSpec)));
            collectives_->setItem(row, 0, cell(where, QString::fromStdString(c.tensor)));
            collectives_->setItem(row, 1, cell(QString::fromStdString(c.kind), detail));
            collectives_->setItem(row, 2, cell(QString::fromStdString(c.axis)));
            collectives_->setItem(row, 3, cell(QString::fromStdString(c.phase)));
            collectives_->setItem(row, 4, cell(QString::fromStdString(formatBytes(c.bytes)), QString::fromStdString(c.formula)));
            collectives_->setItem(row, 5,
                                  cell(QString::fromStdString(formatSeconds(c.seconds)), QString::fromStdString(c.formula)));
            collectives_->setItem(row, 6, cell(QString::fromStdString(c.why), detail));
        }
    };
    addSteps(x.incoming, tr("into"));
    addSteps(x.own, tr("own"));
    addSteps(x.outgoing, tr("out of"));
    collectives_->resizeColumnsToContents();

    // Why not: one column per collective kind that any candidate changes.
    std::set<std::string> kinds;
    for (const auto& w : x.whyNot)
        for (const auto& [kind, seconds] : w.delta.commByKind) kinds.insert(kind);
    QStringList headers{tr("Strategy"), tr("Δ objective"), tr("Δ step"), tr("Δ compute"), tr("Δ memory")};
    for (const auto& kind : kinds) headers << tr("Δ %1").arg(QString::fromStdString(kind));
    whyNot_->clear();
    whyNot_->setColumnCount(static_cast<int>(headers.size()));
    whyNot_->setHorizontalHeaderLabels(headers);
    whyNot_->horizontalHeaderItem(WhyObjective)
        ->setToolTip(tr("Δ step + memory price × Δ memory, the price being the search's λ = %1 per GiB (0 when memory did not "
                        "constrain the plan). The search minimises this, so a faster candidate can lose for its memory.")
                         .arg(QString::fromStdString(formatSeconds(x.lambda * 1024.0 * 1024 * 1024))));
    whyNot_->setRowCount(static_cast<int>(x.whyNot.size()));
    for (size_t r = 0; r < x.whyNot.size(); ++r) {
        const auto& w = x.whyNot[r];
        const int row = static_cast<int>(r);
        whyNot_->setItem(
            row, WhyStrategy,
            cell(w.chosen ? QStringLiteral("✔ %1").arg(QString::fromStdString(w.strategy)) : QString::fromStdString(w.strategy)));
        whyNot_->setItem(row, WhyObjective, cell(QString::fromStdString(formatSecondsDelta(w.objectiveDelta))));
        whyNot_->setItem(row, WhyStep, cell(QString::fromStdString(formatSecondsDelta(w.delta.stepSeconds))));
        whyNot_->setItem(row, WhyCompute, cell(QString::fromStdString(formatSecondsDelta(w.delta.computeSeconds))));
        whyNot_->setItem(row, WhyMemory, cell(QString::fromStdString(formatBytesDelta(w.delta.memoryBytes))));
        int column = WhyFirstCollective;
        for (const auto& kind : kinds) {
            const auto it = w.delta.commByKind.find(kind);
            whyNot_->setItem(row, column++,
                             cell(QString::fromStdString(formatSecondsDelta(it == w.delta.commByKind.end() ? 0.0 : it->second))));
        }
        if (w.chosen)
            for (int c = 0; c < whyNot_->columnCount(); ++c) {
                QFont f = whyNot_->item(row, c)->font();
                f.setBold(true);
                whyNot_->item(row, c)->setFont(f);
                whyNot_->item(row, c)->setBackground(QColor(0xfff3c4));
            }
    }
    whyNot_->resizeColumnsToContents();
    emit explanationShown(op);
}

std::vector<std::string> ExplainPanel::markedOps() const
{
    std::vector<std::string> ops;
    if (comparison_ && markOnGraph_->isChecked() && isVisible() && tabs_->currentWidget() == compareBox_)
        for (const auto& c : comparison_->changes) ops.push_back(c.op);
    return ops;
}

void ExplainPanel::showEvent(QShowEvent* event)
{
    QWidget::showEvent(event);
    emit differencesToMark(markedOps());
}

void ExplainPanel::hideEvent(QHideEvent* event)
{
    QWidget::hideEvent(event);
    emit differencesToMark({});
}

void ExplainPanel::showCompareTab() { tabs_->setCurrentWidget(compareBox_); }

QString ExplainPanel::incompatibility(const PlanOutcome& plan, const LoadedPlan& saved)
{
    const CostModel& mine = *plan.workspace->costModel;
    const CostModel& theirs = *saved.workspace->costModel;
    if (mine.mesh().shapeText() != theirs.mesh().shapeText())
        return tr("The saved plan is on mesh %1, this one on %2: plans compare op by op on one mesh.")
            .arg(QString::fromStdString(theirs.mesh().shapeText()), QString::fromStdString(mine.mesh().shapeText()));
    const auto& a = mine.graph().ops;
    const auto& b = theirs.graph().ops;
    if (a.size() != b.size())
        return tr("The saved plan's model has %1 ops, this one %2: plans compare op by op on one model.").arg(b.size()).arg(a.size());
    for (size_t i = 0; i < a.size(); ++i)
        if (a[i].name != b[i].name || mine.strategies(a[i].id).size() != theirs.strategies(b[i].id).size())
            return tr("The saved plan's op '%1' differs from this model's '%2' (another model, batch or sequence).")
                .arg(QString::fromStdString(b[i].name), QString::fromStdString(a[i].name));
    return {};
}

QString ExplainPanel::compareWithSaved(std::shared_ptr<const LoadedPlan> saved, const QString& name)
{
    const auto plan = document_ ? document_->plan() : nullptr;
    if (!plan) return tr("No plan to compare with yet.");
    if (const QString why = incompatibility(*plan, *saved); !why.isEmpty()) return why;
    saved_ = std::move(saved);
    int index = compareWith_->findData(static_cast<int>(CompareWith::SavedPlan));
    if (index < 0) {
        compareWith_->addItem(QString(), static_cast<int>(CompareWith::SavedPlan));
        index = compareWith_->count() - 1;
    }
    compareWith_->setItemText(index, tr("Saved plan: %1").arg(name));
    if (compareWith_->currentIndex() == index)
        requestComparison();
    else
        compareWith_->setCurrentIndex(index);
    return {};
}

void ExplainPanel::requestComparison()
{
    const auto plan = document_ ? document_->plan() : nullptr;
    compareJob_.cancel(); // a comparison still in flight is stale
    comparison_.reset();
    compare_->setRowCount(0);
    compareOps_->setRowCount(0);
    emit differencesToMark({});
    if (!plan) {
        compareTotals_->clear();
        return;
    }
    const auto with = static_cast<CompareWith>(compareWith_->currentData().toInt());
    if (with == CompareWith::Unlocked && !plan->unlocked) {
        compareTotals_->setText(tr("The plan has no locks: it is the search's own plan."));
        return;
    }
    if (with == CompareWith::SavedPlan) {
        const QString why = saved_ ? incompatibility(*plan, *saved_) : tr("No saved plan (Plan > Compare With Saved Plan…).");
        if (!why.isEmpty()) {
            compareTotals_->setText(why);
            return;
        }
        compareTotals_->setText(tr("Comparing…"));
        compareJob_.start([plan, saved = saved_](const std::atomic<bool>&) {
            const PlanWorkspace& ws = *plan->workspace;
            return explain::comparePlans(*ws.costModel, ws.folded, plan->result, saved->result, saved->workspace->costModel.get());
        });
        return;
    }
    compareTotals_->setText(tr("Comparing…"));
    // Sums every op's components of two plans: linear in the graph, tens of ms on the largest.
    compareJob_.start([plan, with](const std::atomic<bool>&) {
        const PlanWorkspace& ws = *plan->workspace;
        const SearchResult& other = with == CompareWith::Megatron       ? plan->megatron
                                    : with == CompareWith::DataParallel ? plan->dataParallel
                                                                        : *plan->unlocked;
        // A baseline under the settings it chose itself, as the breakdown's bar shows it.
        const PlanWorkspace* otherWs = with == CompareWith::Megatron       ? plan->megatronWorkspace.get()
                                       : with == CompareWith::DataParallel ? plan->dataParallelWorkspace.get()
                                                                           : nullptr;
        return explain::comparePlans(*ws.costModel, ws.folded, plan->result, other,
                                     otherWs ? otherWs->costModel.get() : nullptr);
    });
}

void ExplainPanel::showComparison(const explain::PlanDiff& d)
{
    comparison_ = d;
    compareTotals_->setText(
        tr("This plan (%1): step %2, memory %3 per device. Other (%4): step %5, memory %6.")
            .arg(QString::fromStdString(d.baseMethod), QString::fromStdString(formatSeconds(d.base.stepSeconds)),
                 QString::fromStdString(formatBytes(d.base.memoryBytes)), QString::fromStdString(d.otherMethod),
                 QString::fromStdString(formatSeconds(d.other.stepSeconds)),
                 QString::fromStdString(formatBytes(d.other.memoryBytes))));
    compare_->setRowCount(static_cast<int>(d.blocks.size()));
    for (size_t b = 0; b < d.blocks.size(); ++b) {
        const auto& blk = d.blocks[b];
        const int row = static_cast<int>(b);
        compare_->setItem(row, 0, cell(QString::fromStdString(blk.block)));
        compare_->setItem(row, 1, cell(QString::number(blk.instances)));
        compare_->setItem(row, 2, cell(QString::number(blk.opsChanged)));
        compare_->setItem(row, 3, cell(QString::fromStdString(formatSeconds(blk.base.stepSeconds))));
        compare_->setItem(row, 4, cell(QString::fromStdString(formatSeconds(blk.other.stepSeconds))));
        compare_->setItem(row, 5, cell(QString::fromStdString(formatSecondsDelta(blk.other.stepSeconds - blk.base.stepSeconds))));
        compare_->setItem(row, 6,
                          cell(QString::fromStdString(formatSecondsDelta(blk.other.computeSeconds - blk.base.computeSeconds))));
        compare_->setItem(row, 7, cell(QString::fromStdString(formatSecondsDelta(blk.other.commSeconds - blk.base.commSeconds))));
        compare_->setItem(row, 8, cell(QString::fromStdString(formatBytesDelta(blk.other.memoryBytes - blk.base.memoryBytes))));
    }
    QStringList changes;
    for (const auto& c : d.changes)
        changes << QStringLiteral("%1: %2 → %3")
                       .arg(QString::fromStdString(c.op), QString::fromStdString(c.before), QString::fromStdString(c.after));
    compare_->setToolTip(changes.isEmpty() ? tr("No op's strategy differs.")
                                           : tr("Ops that differ (first instance):\n%1").arg(changes.join(QLatin1Char('\n'))));
    compare_->resizeColumnsToContents();
    compareOps_->setRowCount(static_cast<int>(d.changes.size()));
    for (size_t i = 0; i < d.changes.size(); ++i) {
        const int row = static_cast<int>(i);
        compareOps_->setItem(row, 0, cell(QString::fromStdString(d.changes[i].op)));
        compareOps_->setItem(row, 1, cell(QString::fromStdString(d.changes[i].before)));
        compareOps_->setItem(row, 2, cell(QString::fromStdString(d.changes[i].after)));
        compareOps_->setItem(row, 3, cell(QString::fromStdString(
                                         formatSecondsDelta(d.changes[i].other.stepSeconds - d.changes[i].base.stepSeconds))));
        compareOps_->setItem(row, 4, cell(QString::fromStdString(
                                         formatBytesDelta(d.changes[i].other.memoryBytes - d.changes[i].base.memoryBytes))));
    }
    compareOps_->resizeColumnsToContents();
    emit comparisonShown();
    emit differencesToMark(markedOps());
}

} // namespace tp
