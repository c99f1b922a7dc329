#pragma once
#include <QMainWindow>

namespace tp {

/// The TP Studio main window (placeholder until the GUI issue: shows the model summary).
class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    explicit MainWindow(QWidget* parent = nullptr);
    /// Loads a built-in model or file; returns false and shows the message on bad input.
    bool openModel(const QString& source);
};

} // namespace tp
