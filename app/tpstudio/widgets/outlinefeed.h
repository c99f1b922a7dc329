#pragma once
// Keeps a BlockOutlineModel showing a document: a snapshot of every plan that arrives, the check
// boxes from the document's expanded classes, and a toggled box back as a view-state change.
#include <QObject>
#include <QPointer>

#include "blockoutlinemodel.h"
#include "document.h"

namespace tp {

class OutlineFeed : public QObject {
    Q_OBJECT
public:
    explicit OutlineFeed(BlockOutlineModel* model, QObject* parent = nullptr);
    void setDocument(Document* document);

private:
    void showPlan();

    BlockOutlineModel* model_;
    QPointer<Document> document_;
};

} // namespace tp
