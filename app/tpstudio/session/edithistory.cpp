#include "edithistory.h"

namespace tp {

EditHistory::EditHistory(QObject* parent) : QObject(parent) {}

void EditHistory::changing(const std::function<void()>& change)
{
    const int index = index_;
    const bool clean = isClean(), canUndoBefore = canUndo(), canRedoBefore = canRedo();
    const QString undoBefore = undoText(), redoBefore = redoText();
    change();
    if (index_ != index) emit indexChanged(index_);
    if (isClean() != clean) emit cleanChanged(isClean());
    if (canUndo() != canUndoBefore) emit canUndoChanged(canUndo());
    if (canRedo() != canRedoBefore) emit canRedoChanged(canRedo());
    if (undoText() != undoBefore) emit undoTextChanged(undoText());
    if (redoText() != redoBefore) emit redoTextChanged(redoText());
}

void EditHistory::push(const QString& text, std::function<void()> onUndo, std::function<void()> onRedo)
{
    changing([&] {
        edits_.resize(static_cast<size_t>(index_));
        if (cleanIndex_ > index_) cleanIndex_ = -1; // the saved state was undone and is gone now
        onRedo();                                   // as QUndoStack::push: applied first, then the index moves
        edits_.push_back({text, std::move(onUndo), std::move(onRedo)});
        ++index_;
    });
}

void EditHistory::undo()
{
    if (!canUndo()) return;
    changing([&] {
        edits_[static_cast<size_t>(index_ - 1)].undo();
        --index_;
    });
}

void EditHistory::redo()
{
    if (!canRedo()) return;
    changing([&] {
        edits_[static_cast<size_t>(index_)].redo();
        ++index_;
    });
}

void EditHistory::clear()
{
    changing([&] {
        edits_.clear();
        index_ = 0;
        cleanIndex_ = 0;
    });
}

void EditHistory::setClean()
{
    changing([&] { cleanIndex_ = index_; });
}

void EditHistory::resetClean()
{
    changing([&] { cleanIndex_ = -1; });
}

} // namespace tp
