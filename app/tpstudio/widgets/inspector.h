#pragma once
// The operator inspector: facts of the selected op (kind, einsum, loop dims, shapes, specs) and
// its candidate strategies with their costs; lock / unlock in a chosen scope.
#include <QPointer>
#include <QWidget>

#include "candidatemodel.h"
#include "document.h"
#include "latestjob.h"

class QLabel;
class QPushButton;
class QRadioButton;
class QTableView;
class QSortFilterProxyModel;

namespace tp {

class Inspector : public QWidget {
    Q_OBJECT
public:
    explicit Inspector(QWidget* parent = nullptr);
    void setDocument(Document* document);
    CandidateModel* candidateModel() { return &candidates_; }
    QTableView* candidateView() { return table_; }
    LockScope scope() const;
    void setScope(LockScope scope);
    /// Locks the candidate in the given row of the (sorted) table in the chosen scope.
    void lockRow(int row);

signals:
    /// The selected op's candidates are costed and in the table.
    void candidatesCosted(tp::OpId op);

private:
    void refresh();
    void lockSelected();

    QPointer<Document> document_;
    CandidateModel candidates_;
    /// Costs the selected op's candidates off the GUI thread; the newest selection wins. The
    /// snapshot travels with the plan it was costed for, which keeps the workspace alive.
    struct Costed {
        std::shared_ptr<const PlanOutcome> plan;
        CandidateSnapshot snapshot;
    };
    LatestJob<Costed> costing_;
    QSortFilterProxyModel* proxy_;
    QLabel* title_;
    QLabel* facts_;
    QTableView* table_;
    QRadioButton* allInstances_;
    QRadioButton* thisInstance_;
    QPushButton* lock_;
    QPushButton* unlock_;
};

} // namespace tp
