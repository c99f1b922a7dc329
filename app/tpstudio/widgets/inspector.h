#pragma once
// The operator inspector: facts of the selected op (kind, einsum, loop dims, shapes, specs) and
// its candidate strategies with their costs; lock / unlock in a chosen scope.
#include <QPointer>
#include <QWidget>

#include "candidatemodel.h"
#include "document.h"

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

private:
    void refresh();
    void lockSelected();

    QPointer<Document> document_;
    CandidateModel candidates_;
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
