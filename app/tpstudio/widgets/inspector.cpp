#include "inspector.h"

#include <QButtonGroup>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QRadioButton>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QVBoxLayout>

namespace tp {

namespace {

QString shapeText(const std::vector<std::int64_t>& shape)
{
    QStringList dims;
    for (auto d : shape) dims << QString::number(d);
    return QStringLiteral("[%1]").arg(dims.join(QStringLiteral(", ")));
}

} // namespace

Inspector::Inspector(QWidget* parent) :
    QWidget(parent),
    costing_([this](quint64, Costed costed) {
        // Only for the plan and op still shown (a newer plan restarts the costing anyway).
        if (!document_ || document_->plan() != costed.plan || candidates_.op() != costed.snapshot.op) return;
        candidates_.setSnapshot(std::move(costed.snapshot));
        table_->resizeColumnsToContents();
        table_->horizontalHeader()->setStretchLastSection(true);
        emit candidatesCosted(candidates_.op());
    }),
    proxy_(new QSortFilterProxyModel(this))
{
    auto* layout = new QVBoxLayout(this);
    title_ = new QLabel(tr("Select an op in the graph or the outline."), this);
    title_->setWordWrap(true);
    title_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    facts_ = new QLabel(this);
    facts_->setWordWrap(true);
    facts_->setTextFormat(Qt::RichText);
    facts_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    layout->addWidget(title_);
    layout->addWidget(facts_);

    auto* scopeRow = new QHBoxLayout;
    allInstances_ = new QRadioButton(tr("All instances"), this);
    allInstances_->setToolTip(tr("Lock this op in every instance of its block class (a glob with * for the layer index)"));
    thisInstance_ = new QRadioButton(tr("This instance"), this);
    thisInstance_->setToolTip(tr("Lock only this op; its block's run splits around it"));
    allInstances_->setChecked(true);
    auto* group = new QButtonGroup(this);
    group->addButton(allInstances_);
    group->addButton(thisInstance_);
    lock_ = new QPushButton(tr("&Lock"), this);
    lock_->setToolTip(tr("Lock the selected candidate (or the chosen one); double-click a row does the same"));
    unlock_ = new QPushButton(tr("&Unlock"), this);
    // Scope on its own line: the class glob can be long.
    auto* scopeColumn = new QVBoxLayout;
    scopeColumn->addWidget(allInstances_);
    scopeColumn->addWidget(thisInstance_);
    scopeRow->addLayout(scopeColumn, 1);
    scopeRow->addWidget(lock_);
    scopeRow->addWidget(unlock_);
    layout->addLayout(scopeRow);

    proxy_->setSourceModel(&candidates_);
    proxy_->setSortRole(CandidateModel::SortRole);
    table_ = new QTableView(this);
    table_->setModel(proxy_);
    table_->setSortingEnabled(true);
    // By objective: the order the search ranks them in, so the chosen one is on top (locks aside).
    table_->sortByColumn(CandidateModel::ObjectiveColumn, Qt::AscendingOrder);
    table_->setSelectionBehavior(QAbstractItemView::SelectRows);
    table_->setSelectionMode(QAbstractItemView::SingleSelection);
    table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    table_->verticalHeader()->hide();
    table_->verticalHeader()->setDefaultSectionSize(fontMetrics().height() + 6);
    table_->horizontalHeader()->setStretchLastSection(true);
    table_->setWordWrap(false);
    layout->addWidget(table_, 1);

    connect(table_, &QTableView::doubleClicked, this, [this](const QModelIndex& index) { lockRow(index.row()); });
    connect(lock_, &QPushButton::clicked, this, &Inspector::lockSelected);
    connect(unlock_, &QPushButton::clicked, this, [this] {
        if (document_ && candidates_.op() >= 0) document_->unlockOp(candidates_.op());
    });
    refresh();
}

void Inspector::setDocument(Document* document)
{
    if (document_) disconnect(document_, nullptr, this, nullptr);
    document_ = document;
    if (document_) {
        connect(document_, &Document::planChanged, this, &Inspector::refresh);
        connect(document_, &Document::selectionChanged, this, &Inspector::refresh);
    }
    refresh();
}

LockScope Inspector::scope() const { return thisInstance_->isChecked() ? LockScope::ThisInstance : LockScope::AllInstances; }

void Inspector::setScope(LockScope scope)
{
    (scope == LockScope::ThisInstance ? thisInstance_ : allInstances_)->setChecked(true);
}

void Inspector::lockRow(int row)
{
    if (!document_ || candidates_.op() < 0 || row < 0 || row >= proxy_->rowCount()) return;
    const int strategy = proxy_->index(row, 0).data(CandidateModel::StrategyIndexRole).toInt();
    document_->lockOp(candidates_.op(), strategy, scope());
}

void Inspector::lockSelected()
{
    if (!document_ || candidates_.op() < 0) return;
    const auto rows = table_->selectionModel()->selectedRows();
    if (!rows.isEmpty())
        lockRow(rows.first().row());
    else
        document_->lockOp(candidates_.op(), candidates_.chosenStrategy(), scope());
}

void Inspector::refresh()
{
    const auto plan = document_ ? document_->plan() : nullptr;
    const OpId op = document_ ? document_->selectedOp() : -1;
    candidates_.setSnapshot(plan ? candidateHeader(*plan->workspace, plan->result, op) : CandidateSnapshot{});
    if (candidates_.op() >= 0)
        costing_.start([plan, op](const std::atomic<bool>&) {
            return Costed{plan, costCandidates(*plan->workspace, plan->result, op)};
        });
    else
        costing_.cancel();
    const bool has = candidates_.op() >= 0;
    lock_->setEnabled(has);
    unlock_->setEnabled(has && document_->isLocked(op));
    allInstances_->setEnabled(has);
    thisInstance_->setEnabled(has);
    if (!has) {
        title_->setText(tr("Select an op in the graph or the outline."));
        facts_->clear();
        return;
    }
    const PlanWorkspace& ws = *plan->workspace;
    const CostModel& model = *ws.costModel;
    const Graph& g = ws.model.graph;
    const Op& o = g.op(op);
    const Signature& sig = model.signature(op);
    const int chosen = plan->result.strategyOfOp[static_cast<size_t>(op)];
    const QString strategy =
        QString::fromStdString(strategyToString(model.strategies(op)[static_cast<size_t>(chosen)], sig, model.mesh()));
    title_->setText(QStringLiteral("<b style='font-size:large'>%1</b>").arg(QString::fromStdString(o.name).toHtmlEscaped()));
    allInstances_->setText(tr("All instances (%1)").arg(QString::fromStdString(document_->classPattern(op))));

    QString html;
    html += tr("<b>%1</b> &nbsp; <code>%2</code> &nbsp; strategy <b>%3</b> (%4)%5<br>")
                .arg(QLatin1String(opKindName(o.kind).data()), QString::fromStdString(sig.equation).toHtmlEscaped(),
                     strategy.toHtmlEscaped(), shardingClassName(classifyOp(model, op, chosen).kind),
                     document_->isLocked(op) ? tr(" <b>locked</b>") : QString());
    QStringList loops;
    for (const auto& loop : sig.loops)
        loops << QStringLiteral("%1=%2 <i>%3</i>")
                     .arg(QChar(loop.label))
                     .arg(loop.size)
                     .arg(QLatin1String(dimRoleName(loop.role).data()));
    html += tr("Loops: %1<br>").arg(loops.join(QStringLiteral(", ")));
    auto tensorRows = [&](const std::vector<TensorId>& ids, bool outputs) {
        QString rows;
        for (size_t k = 0; k < ids.size(); ++k) {
            const Tensor& t = g.tensor(ids[k]);
            const TensorSpec& spec =
                outputs ? model.outputSpec(op, chosen, static_cast<int>(k)) : model.inputSpec(op, chosen, static_cast<int>(k));
            rows += QStringLiteral("%1 %2 <code>%3</code> %4 %5<br>")
                        .arg(outputs ? QStringLiteral("→") : QStringLiteral("←"), QString::fromStdString(t.name).toHtmlEscaped(),
                             shapeText(t.shape), QLatin1String(dtypeName(t.dtype).data()),
                             QString::fromStdString(specToString(spec, model.mesh())).toHtmlEscaped());
        }
        return rows;
    };
    html += tensorRows(o.inputs, false) + tensorRows(o.outputs, true);
    facts_->setText(html);
    table_->resizeColumnsToContents();
    table_->horizontalHeader()->setStretchLastSection(true);
}

} // namespace tp
