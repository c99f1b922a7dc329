#pragma once
// The "Blocks" outline: block classes -> instances -> ops, with counts, strategies and times of
// the current plan, shown from a plain OutlineSnapshot (outlineSnapshot makes one from a plan;
// tests build them by hand). A snapshot of the same shape only changes data; another shape
// resets the model. A class with several instances has a check box: checked, the graph view
// unfolds its runs into one card per instance (instancesViewKey in Document::expandedClasses);
// the model only reports the toggle (expandedKeysEdited), whoever feeds it applies it.
#include <QAbstractItemModel>
#include <QStringList>

#include "plan/planner.h"
#include "presentation.h"

namespace tp {

struct OutlineOp {
    OpId id = -1;
    QString name; ///< relative to the instance ("mlp/fc1" under "layers.3")
    QString fullName;
    QString kind;
    QString strategy;
    bool locked = false;
    double seconds = 0;
    ShardClass sharding = ShardClass::Replicated;
};
struct OutlineInstance {
    QString label; ///< "layers.3"
    double seconds = 0;
    std::vector<OutlineOp> ops;
};
struct OutlineClass {
    QString label;
    int opsPerInstance = 0;
    double seconds = 0; ///< over all its instances
    std::vector<OutlineInstance> instances;
};
struct OutlineSnapshot {
    std::vector<OutlineClass> classes;
};

/// The outline of a plan: one pass over the ops.
OutlineSnapshot outlineSnapshot(const PlanWorkspace& workspace, const SearchResult& plan);

class BlockOutlineModel : public QAbstractItemModel {
    Q_OBJECT
public:
    enum Column { NameColumn, CountColumn, StrategyColumn, TimeColumn, ColumnCount };
    enum Role { OpIdRole = Qt::UserRole + 1 }; ///< the op of a row (-1 for class and instance rows)

    explicit BlockOutlineModel(QObject* parent = nullptr);
    void setSnapshot(OutlineSnapshot snapshot);
    const OutlineSnapshot& snapshot() const { return shown_; }
    /// The Document::expandedClasses entries: which classes' check boxes are checked.
    void setExpandedKeys(const QStringList& keys);

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

signals:
    /// A check box was toggled: the expanded keys as they should be now.
    void expandedKeysEdited(const QStringList& keys);

private:
    struct Node {
        int level = 0; ///< 0 class, 1 instance, 2 op
        int cls = 0;
        int instance = 0;
        int op = 0; ///< position in the instance
    };
    struct Location {
        int cls = -1, instance = -1, position = -1;
    };
    static quintptr pack(const Node& node);
    static Node unpack(quintptr id);
    bool sameShape(const OutlineSnapshot& other) const;
    void emitAllDataChanged();
    QVariant classData(const OutlineClass& c, int column, int role) const;
    QVariant instanceData(const OutlineInstance& inst, int column, int role) const;
    QVariant opData(const OutlineOp& op, int column, int role) const;

    OutlineSnapshot shown_;
    std::vector<Location> locationOfOp_;
    QStringList expandedKeys_;
};

} // namespace tp
