#include "outlinefeed.h"

namespace tp {

OutlineFeed::OutlineFeed(BlockOutlineModel* model, QObject* parent) : QObject(parent), model_(model)
{
    connect(model_, &BlockOutlineModel::expandedKeysEdited, this, [this](const QStringList& keys) {
        if (document_) document_->setExpandedClasses(keys);
    });
}

void OutlineFeed::setDocument(Document* document)
{
    if (document_) disconnect(document_, nullptr, this, nullptr);
    document_ = document;
    if (document_) {
        connect(document_, &Document::planChanged, this, &OutlineFeed::showPlan);
        connect(document_, &Document::modelChanged, this, &OutlineFeed::showPlan);
        connect(document_, &Document::expandedClassesChanged, this,
                [this] { model_->setExpandedKeys(document_->expandedClasses()); });
    }
    model_->setExpandedKeys(document_ ? document_->expandedClasses() : QStringList());
    showPlan();
}

void OutlineFeed::showPlan()
{
    const auto plan = document_ ? document_->plan() : nullptr;
    model_->setSnapshot(plan ? outlineSnapshot(*plan->workspace, plan->result) : OutlineSnapshot{});
}

} // namespace tp
