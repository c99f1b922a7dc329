#pragma once
// The document's undo history in QtCore: QUndoStack lives in QtGui in Qt 6, and the session
// library links QtCore only (docs/ARCHITECTURE.md, app/). The document's edits are values (the
// settings or locks before and after), so an edit is a pair of functions, not a command class.
// Same names and semantics as QUndoStack where they overlap (push redoes, clean index, signals),
// so the window's Undo/Redo actions bind to it as they would to a QUndoStack.
#include <functional>
#include <vector>

#include <QObject>
#include <QString>

namespace tp {

class EditHistory : public QObject {
    Q_OBJECT
public:
    explicit EditHistory(QObject* parent = nullptr);

    /// Applies the edit (`redo`) and records it above the current index, discarding the edits
    /// that were undone.
    void push(const QString& text, std::function<void()> onUndo, std::function<void()> onRedo);
    void undo();
    void redo();
    /// Forgets every edit; the empty history is clean.
    void clear();
    /// Marks the current index as saved.
    void setClean();
    /// No index is clean any more (unsaved edits that cannot be undone, e.g. a recovered file).
    void resetClean();

    int index() const { return index_; }
    int count() const { return static_cast<int>(edits_.size()); }
    bool isClean() const { return cleanIndex_ == index_; }
    bool canUndo() const { return index_ > 0; }
    bool canRedo() const { return index_ < count(); }
    QString undoText() const { return canUndo() ? edits_[static_cast<size_t>(index_ - 1)].text : QString(); }
    QString redoText() const { return canRedo() ? edits_[static_cast<size_t>(index_)].text : QString(); }

signals:
    void indexChanged(int index);
    void cleanChanged(bool clean);
    void canUndoChanged(bool canUndo);
    void canRedoChanged(bool canRedo);
    void undoTextChanged(const QString& text);
    void redoTextChanged(const QString& text);

private:
    struct Edit {
        QString text;
        std::function<void()> undo, redo;
    };
    /// Runs `change` and emits the signals whose values it changed.
    void changing(const std::function<void()>& change);

    std::vector<Edit> edits_;
    int index_ = 0;
    int cleanIndex_ = 0; ///< -1: none
};

} // namespace tp
