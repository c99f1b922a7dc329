#pragma once
// The "Blocks" outline: block classes -> instances -> ops, with counts, strategies and times of
// the current plan. Rebuilt (reset) when the model changes; only data changes on a new plan.
// A class with several instances has a check box: checked, the graph view unfolds its runs into
// one card per instance (instancesViewKey in Document::expandedClasses).
#include <QAbstractItemModel>
#include <QPointer>

#include "document.h"

namespace tp {

class BlockOutlineModel : public QAbstractItemModel {
    Q_OBJECT
public:
    enum Column { NameColumn, CountColumn, StrategyColumn, TimeColumn, ColumnCount };
    enum Role { OpIdRole = Qt::UserRole + 1 }; ///< the op of a row (-1 for class and instance rows)

    explicit BlockOutlineModel(QObject* parent = nullptr);
    void setDocument(Document* document);

    QModelIndex index(int row, int column, const QModelIndex& parent = {}) const override;
    QModelIndex parent(const QModelIndex& child) const override;
    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    Qt::ItemFlags flags(const QModelIndex& index) const override;
    bool setData(const QModelIndex& index, const QVariant& value, int role = Qt::EditRole) override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

    /// The op's row (class -> instance -> op), or an invalid index.
    QModelIndex indexOfOp(OpId op) const;

private:
    struct Node {
        int level = 0; ///< 0 class, 1 instance, 2 op
        int cls = 0;
        int instance = 0;
        int op = 0;    ///< position in the instance
    };
    static quintptr pack(const Node& node);
    static Node unpack(quintptr id);
    void reset();
    void refreshPlanColumns();
    void refreshCheckStates();

    QPointer<Document> document_;
    std::shared_ptr<const PlanOutcome> plan_; ///< keeps the workspace the rows describe alive
    std::vector<double> classSeconds_;        ///< per class, all its instances
};

} // namespace tp
